package io.stallscope.agent.core;

import java.util.concurrent.CountDownLatch;

/**
 * The instant the meter began measuring (after its start delay), handed from the meter thread to the
 * log thread so the .hlog's StartTime, its interval boundaries and the heartbeat's start_ns all name
 * the same moment. Invariant: published at most once; waiters are released either with the instant or,
 * if the meter ended first, with none.
 */
final class MeterStart {
    private final CountDownLatch done = new CountDownLatch(1);
    private volatile boolean started;
    private volatile long startNs;
    private volatile long startEpochMs;

    void publish(long startNs, long startEpochMs) {
        this.startNs = startNs;
        this.startEpochMs = startEpochMs;
        this.started = true;
        done.countDown();
    }

    /** The meter ended without starting (stopped during its delay, or failed). */
    void abandon() {
        done.countDown();
    }

    /** Waits for the meter; true if it started. */
    boolean await() throws InterruptedException {
        done.await();
        return started;
    }

    boolean started() {
        return started;
    }

    long startNs() {
        return startNs;
    }

    long startEpochMs() {
        return startEpochMs;
    }
}
