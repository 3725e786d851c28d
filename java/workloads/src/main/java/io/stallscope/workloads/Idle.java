package io.stallscope.workloads;

/**
 * A quiet JVM: a few threads that sleep and wake, as an idle service does. The doctor must
 * report no stalls for it, and the injectors (freeze) and attach are tried on it.
 */
public final class Idle {
    static final String USAGE = String.join("\n",
            "usage: idle [--duration 10s] [--threads 4] [--every 10ms]",
            "  --threads threads wake every --every to do a little work, until --duration; prints the pid first.",
            "  Prints a summary, then one JSON line.");

    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Options o = new Options("idle", USAGE, args, "duration", "threads", "every");
        long duration = o.nanos("duration", "10s");
        long everyMs = Math.max(1, o.nanos("every", "10ms") / 1_000_000);
        int n = (int) o.integer("threads", 4);
        System.out.println("idle: pid " + ProcessHandle.current().pid());
        System.out.flush();
        long end = System.nanoTime() + duration;
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            ts[i] = new Thread(() -> {
                while (System.nanoTime() < end) {
                    try {
                        Thread.sleep(everyMs);
                    } catch (InterruptedException e) {
                        return;
                    }
                    sink += System.nanoTime() & 7;
                }
            }, "idle-worker-" + i);
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        System.out.println("{\"workload\":\"idle\"," + Latencies.jvm() + ",\"duration_ns\":" + duration + ",\"threads\":" + n + "}");
    }
}
