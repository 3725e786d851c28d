package io.stallscope.agent.core;

import org.HdrHistogram.SingleWriterRecorder;

import java.util.concurrent.TimeUnit;

/**
 * The hiccup meter, measured as jHiccup does: sleep for the resolution, and record how much longer
 * than the shortest sleep ever seen this sleep took, corrected for coordinated omission (a 200 ms
 * hiccup at 1 ms resolution also records the 199, 198, ... ms that the missed ticks would have seen).
 * Each wake-up is also a heartbeat tick. Invariants: only the meter thread records and ticks; a tick
 * allocates nothing and makes no system call beyond the sleep itself; no exception leaves the thread.
 */
final class HiccupMeter implements Runnable {
    static final String THREAD_NAME = "stallscope-hiccup-meter";
    /**
     * Recordable range of the recorder: 1 µs to 1 hour in nanoseconds, 2 significant digits (1%, as
     * jHiccup records by default): at 3 the log thread cleared and walked 196 KB of counts a second.
     */
    static final long LOWEST_NS = 1_000L;
    static final long HIGHEST_NS = 3_600_000_000_000L;
    static final int SIGNIFICANT_DIGITS = 2;

    private final long resolutionNs;
    private final long delayNs;
    private final SingleWriterRecorder recorder;
    /** Null when the heartbeat file could not be created: the meter still feeds the log. */
    private final Heartbeat heartbeat;
    private final MeterStart start;
    private final SelfTids selfTids;
    private volatile boolean stopRequested;

    HiccupMeter(long resolutionNs, long delayNs, SingleWriterRecorder recorder, Heartbeat heartbeat,
            MeterStart start, SelfTids selfTids) {
        this.resolutionNs = resolutionNs;
        this.delayNs = delayNs;
        this.recorder = recorder;
        this.heartbeat = heartbeat;
        this.start = start;
        this.selfTids = selfTids;
    }

    static SingleWriterRecorder newRecorder() {
        return new SingleWriterRecorder(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS);
    }

    /** Asks the meter to stop; the caller then interrupts the thread to cut its sleep short. */
    void requestStop() {
        stopRequested = true;
    }

    @Override
    public void run() {
        try {
            int tid = selfTids.registerCurrentThread();
            if (heartbeat != null) {
                heartbeat.meterTid(tid);
            }
            if (!sleepThroughDelay()) {
                return;
            }
            long startNs = System.nanoTime();
            long startEpochMs = System.currentTimeMillis();
            if (heartbeat != null) {
                heartbeat.running(startNs, startEpochMs);
            }
            start.publish(startNs, startEpochMs);
            measure();
        } catch (Throwable t) {
            AgentLog.failure("the hiccup meter stopped", t);
            if (heartbeat != null) {
                heartbeat.state(Heartbeat.STATE_STOPPED);
            }
        } finally {
            start.abandon();
            selfTids.unregisterCurrentThread();
        }
    }

    /** False if a stop came during the delay. */
    private boolean sleepThroughDelay() {
        long end = System.nanoTime() + delayNs;
        for (long left = delayNs; left > 0 && !stopRequested; left = end - System.nanoTime()) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                // Only a stop request ends the delay early; an interrupt from elsewhere is ignored.
            }
        }
        return !stopRequested;
    }

    private void measure() {
        long shortestNs = Long.MAX_VALUE;
        // Each sleep is timed from the end of the last one, not from a fresh clock read: a pause that
        // lands while the meter records and ticks (a SIGSTOP, a safepoint at the loop's poll) is
        // counted in the next sleep instead of falling between two measurements.
        long before = System.nanoTime();
        while (!stopRequested) {
            try {
                TimeUnit.NANOSECONDS.sleep(resolutionNs);
            } catch (InterruptedException e) {
                // A cut-short sleep would lower the shortest sleep and inflate every later hiccup: skip it.
                before = System.nanoTime();
                continue;
            }
            long after = System.nanoTime();
            long deltaNs = after - before;
            before = after;
            if (deltaNs < shortestNs) {
                shortestNs = deltaNs;
            }
            long hiccupNs = Math.min(deltaNs - shortestNs, HIGHEST_NS);
            recorder.recordValueWithExpectedInterval(hiccupNs, resolutionNs);
            if (heartbeat != null) {
                heartbeat.tick(after);
            }
        }
    }
}
