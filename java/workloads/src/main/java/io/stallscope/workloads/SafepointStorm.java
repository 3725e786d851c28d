package io.stallscope.workloads;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Seed 003 (SetPriorityClass): CPU-bound threads that keep every core busy while the JVM is
 * asked for a safepoint every few milliseconds. Alone, each thread reaches the safepoint at its
 * next poll; beside other CPU-bound processes, a thread waiting for a CPU cannot, and the time
 * to safepoint grows to the scheduler's slices.
 *
 * <p>The TTSP distribution comes from the JVM's own safepoint log ({@code --log}, the file given
 * to {@code -Xlog:safepoint}), read back at the end.
 */
public final class SafepointStorm {
    static final String USAGE = String.join("\n",
            "usage: safepoint-storm [--threads 2] [--duration 10s] [--every 10ms] [--log PATH]",
            "  --threads busy threads compute while the main thread requests a safepoint (a thread dump) every",
            "  --every. Run it with -Xlog:safepoint:file=PATH and pass --log PATH for the TTSP distribution;",
            "  run it beside `stallscope inject cpu-hog` or other copies of itself for the seed's contention.",
            "  Prints a summary, then one JSON line.");

    static final Pattern REACHING = Pattern.compile("Reaching safepoint: (\\d+) ns");
    static final Pattern STOPPING = Pattern.compile("Stopping threads took: (\\d+)\\.(\\d+) seconds");

    public static void main(String[] args) throws Exception {
        Options o = new Options("safepoint-storm", USAGE, args, "threads", "duration", "every", "log");
        int threads = (int) o.integer("threads", 2);
        long duration = o.nanos("duration", "10s");
        long every = o.nanos("every", "10ms");
        String log = o.string("log", null);
        AtomicLong work = new AtomicLong();
        long end = System.nanoTime() + duration;
        Thread[] busy = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            busy[i] = new Thread(() -> {
                long x = 0;
                long n = 0;
                while (System.nanoTime() < end) {
                    // A long-indexed loop: it polls for safepoints, so only the CPU can keep it.
                    for (long k = 0; k < 100_000; k++) {
                        x = x * 6364136223846793005L + k;
                    }
                    n++;
                }
                work.addAndGet(n + (x == 42 ? 1 : 0));
            }, "busy-" + i);
            busy[i].start();
        }
        Latencies requests = new Latencies();
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
            requests.add(System.nanoTime() - t0);
            long sleep = every - (System.nanoTime() - t0);
            if (sleep > 0) {
                Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
            }
        }
        for (Thread t : busy) {
            t.join();
        }
        Latencies ttsp = new Latencies();
        if (log != null) {
            for (String line : Files.readAllLines(Paths.get(log))) {
                Matcher m = REACHING.matcher(line);
                if (m.find()) {
                    ttsp.add(Long.parseLong(m.group(1)));
                    continue;
                }
                m = STOPPING.matcher(line);
                if (m.find()) {
                    String frac = (m.group(2) + "000000000").substring(0, 9);
                    ttsp.add(Long.parseLong(m.group(1)) * 1_000_000_000L + Long.parseLong(frac));
                }
            }
        }
        System.out.println("safepoint-storm: " + threads + " busy threads, a safepoint every " + Latencies.ms(every) + " for " + Latencies.ms(duration));
        System.out.println("  safepoint requests took: " + requests.human());
        System.out.println("  time to safepoint (JVM log): " + (log == null ? "no --log given" : ttsp.human()));
        System.out.println("{\"workload\":\"safepoint-storm\"," + Latencies.jvm() + ",\"threads\":" + threads + ",\"duration_ns\":" + duration + ",\"every_ns\":" + every
                + ",\"work\":" + work.get() + ",\"requests\":" + requests.json() + ",\"ttsp\":" + ttsp.json() + "}");
    }
}
