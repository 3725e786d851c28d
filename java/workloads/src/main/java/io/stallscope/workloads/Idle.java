package io.stallscope.workloads;

/**
 * A quiet JVM: a few threads that sleep and wake, as an idle service does. The doctor must
 * report no stalls for it, and the injectors (freeze) and attach are tried on it.
 */
public final class Idle {
    static final String USAGE = String.join("\n",
            "usage: idle [--duration 10s] [--threads 4] [--every 10ms] [--until FILE]",
            "  --threads threads wake every --every to do a little work, until --duration, or until FILE",
            "  exists if sooner (looked for every 50 ms); prints the pid first.",
            "  Prints a summary, then one JSON line.");

    static volatile long sink;
    static volatile boolean stop;

    public static void main(String[] args) throws Exception {
        Options o = new Options("idle", USAGE, args, "duration", "threads", "every", "until");
        long duration = o.nanos("duration", "10s");
        long everyMs = Math.max(1, o.nanos("every", "10ms") / 1_000_000);
        int n = (int) o.integer("threads", 4);
        String until = o.string("until", "");
        System.out.println("idle: pid " + ProcessHandle.current().pid());
        System.out.flush();
        long end = System.nanoTime() + duration;
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            ts[i] = new Thread(() -> {
                while (!stop && System.nanoTime() < end) {
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
        if (!until.isEmpty()) {
            java.nio.file.Path file = java.nio.file.Path.of(until);
            while (System.nanoTime() < end && !java.nio.file.Files.exists(file)) {
                Thread.sleep(50);
            }
            stop = true;
        }
        for (Thread t : ts) {
            t.join();
        }
        System.out.println("{\"workload\":\"idle\"," + Latencies.jvm() + ",\"duration_ns\":" + duration + ",\"threads\":" + n + "}");
    }
}
