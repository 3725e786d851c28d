package io.stallscope.agent.core;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The native tids of the agent's own threads, as each read it from {@code /proc/thread-self}: the only
 * Java-to-native thread mapping that needs no inference. Invariant: holds an entry only while its thread
 * runs agent code.
 */
final class SelfTids {
    private final Map<Long, Integer> tidByJavaId = new ConcurrentHashMap<>();
    private final AtomicInteger version = new AtomicInteger();

    /** Called by an agent thread on itself; returns its tid (-1 if /proc does not say). */
    int registerCurrentThread() {
        int tid = ProcSelf.currentTid();
        if (tid > 0) {
            tidByJavaId.put(Thread.currentThread().getId(), tid);
            version.incrementAndGet();
        }
        return tid;
    }

    void unregisterCurrentThread() {
        if (tidByJavaId.remove(Thread.currentThread().getId()) != null) {
            version.incrementAndGet();
        }
    }

    /** Changes whenever an agent thread registers or leaves, so the thread table knows to rebuild. */
    int version() {
        return version.get();
    }

    Map<Long, Integer> snapshot() {
        return Map.copyOf(tidByJavaId);
    }
}
