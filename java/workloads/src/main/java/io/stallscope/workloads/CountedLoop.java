package io.stallscope.workloads;

import java.lang.management.ManagementFactory;

/**
 * Seed 004 (MeasureJitter / EnableBiasedLocking): a thread sums a byte array in nested
 * {@code int} counted loops, which C2 compiles without a safepoint poll when
 * {@code -XX:-UseCountedLoopSafepoints} (or a collector without loop strip mining) is in force;
 * a jitter thread sleeps 1 ms and records how late it wakes; a trigger asks for a safepoint
 * every period. Every other thread then waits for the loop to finish before the safepoint.
 *
 * <p>Faithful to the seed: the same loops and the same jitter measurement. Better instrumented:
 * every wake-up is kept (percentiles, not just the max), and a safepoint is asked for on a
 * schedule instead of waiting for biased locking to switch on at 4 s (gone since JDK 15).
 */
public final class CountedLoop {
    static final String USAGE = String.join("\n",
            "usage: counted-loop [--duration 10s] [--array-mb 16] [--rounds 600] [--trigger gc|threaddump|none] [--every 1s]",
            "  Sums an --array-mb byte array --rounds times per call, in nested int counted loops, until --duration.",
            "  A daemon thread sleeps 1 ms and records its lateness; every --every a safepoint is requested.",
            "  Shows multi-second stalls under -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints; none under default G1.",
            "  Prints a summary, then one JSON line.");

    private final byte[] array;
    private final int arraySize;

    CountedLoop(int bytes) {
        array = new byte[bytes];
        for (int i = 0; i < bytes; i++) {
            array[i] = (byte) (i % 7);
        }
        arraySize = bytes;
    }

    /** The seed's method, unchanged: two int counted loops. */
    public long invoke(int targetCount) {
        long sum = 0;
        for (int i = 0; i < targetCount; i++) {
            for (int j = 0; j < arraySize; j++) {
                sum += array[j];
            }
        }
        return sum;
    }

    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Options o = new Options("counted-loop", USAGE, args, "duration", "array-mb", "rounds", "trigger", "every");
        long duration = o.nanos("duration", "10s");
        int rounds = (int) o.integer("rounds", 600);
        String trigger = o.string("trigger", "gc");
        long every = o.nanos("every", "1s");
        if (!trigger.equals("gc") && !trigger.equals("threaddump") && !trigger.equals("none")) {
            o.fail("--trigger " + trigger + ": use gc, threaddump or none");
        }
        CountedLoop w = new CountedLoop((int) (o.integer("array-mb", 16) << 20));
        Latencies jitter = new Latencies();
        long end = System.nanoTime() + duration;

        Thread meter = new Thread(() -> {
            // The seed's MeasureJitter: lateness past a 1 ms sleep.
            long preSleep = System.nanoTime();
            while (true) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
                long wake = System.nanoTime();
                jitter.add(Math.max(0, wake - (preSleep + 1_000_000)));
                preSleep = wake;
            }
        }, "jitter-meter");
        meter.setDaemon(true);
        meter.start();

        Latencies triggered = new Latencies();
        Thread trig = new Thread(() -> {
            while (System.nanoTime() < end) {
                try {
                    Thread.sleep(every / 1_000_000);
                } catch (InterruptedException e) {
                    return;
                }
                long t0 = System.nanoTime();
                if (trigger.equals("gc")) {
                    System.gc();
                } else if (trigger.equals("threaddump")) {
                    ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
                } else {
                    return;
                }
                triggered.add(System.nanoTime() - t0);
            }
        }, "safepoint-trigger");
        trig.setDaemon(true);
        trig.start();

        long calls = 0;
        Thread.currentThread().setName("counted-loop");
        while (System.nanoTime() < end) {
            sink = w.invoke(rounds);
            calls++;
        }
        meter.interrupt();
        trig.interrupt();
        System.out.println("counted-loop: " + calls + " calls of " + rounds + " rounds over " + (w.arraySize >> 20) + " MB");
        System.out.println("  jitter thread lateness: " + jitter.human());
        System.out.println("  safepoint requests (" + trigger + ") took: " + triggered.human());
        System.out.println("{\"workload\":\"counted-loop\"," + Latencies.jvm() + ",\"duration_ns\":" + duration + ",\"array_bytes\":" + w.arraySize
                + ",\"rounds\":" + rounds + ",\"calls\":" + calls + ",\"trigger\":\"" + trigger + "\",\"jitter\":" + jitter.json() + ",\"requests\":" + triggered.json() + "}");
    }
}
