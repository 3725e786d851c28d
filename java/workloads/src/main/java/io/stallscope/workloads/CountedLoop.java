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
            "usage: counted-loop [--duration 10s] [--array-mb 16] [--rounds 600] [--shape seed|dependent] [--trigger gc|threaddump|none] [--every 1s]",
            "  Sums an --array-mb byte array --rounds times per call, in nested int counted loops, until --duration.",
            "  --shape dependent: each round is 2^31 steps of an index chain through the array instead, which no JIT",
            "  vectorises (C2 on JDK 21+ vectorises the seed's sum, so each call there is about 5x shorter).",
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

    /**
     * Nested int counted loops whose body depends on the step before (an index hopping through
     * the array): C2 cannot vectorise or unroll it away, so one round takes about as long on
     * every JDK (5.4 s on this project's machine, JDK 17 to 25).
     */
    public long dependent(int rounds, int steps) {
        long sum = 0;
        int k = 0;
        int mask = Integer.highestOneBit(arraySize) - 1;
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < steps; i++) {
                k = (k + array[k] + 7) & mask;
                sum += k;
            }
        }
        return sum;
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
        Options o = new Options("counted-loop", USAGE, args, "duration", "array-mb", "rounds", "shape", "trigger", "every");
        long duration = o.nanos("duration", "10s");
        int rounds = (int) o.integer("rounds", 600);
        String trigger = o.string("trigger", "gc");
        long every = o.nanos("every", "1s");
        if (!trigger.equals("gc") && !trigger.equals("threaddump") && !trigger.equals("none")) {
            o.fail("--trigger " + trigger + ": use gc, threaddump or none");
        }
        String shape = o.string("shape", "seed");
        if (!shape.equals("seed") && !shape.equals("dependent")) {
            o.fail("--shape " + shape + ": use seed or dependent");
        }
        boolean dependent = shape.equals("dependent");
        CountedLoop w = new CountedLoop((int) (o.integer("array-mb", 16) << 20));
        Latencies jitter = new Latencies();
        long end = System.nanoTime() + duration;

        Thread meter = new Thread(() -> {
            // The seed's MeasureJitter: lateness past a 1 ms sleep.
            long preSleep = System.nanoTime();
            while (true) {
                boolean last = false;
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    // The run's end. A sleep held by the loop's last safepoint returns as the
                    // interrupt comes: its lateness counts all the same (it was lost before).
                    last = true;
                }
                long wake = System.nanoTime();
                long late = wake - (preSleep + 1_000_000);
                if (last) {
                    if (late > 0) {
                        jitter.add(late);
                    }
                    return;
                }
                jitter.add(Math.max(0, late));
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
        if (dependent) {
            // Short calls first, so that the long ones run the method compiled whole: the one
            // compiled on stack replacement in the middle of a first long call still polls.
            long warm = System.nanoTime() + 300_000_000L;
            while (System.nanoTime() < warm) {
                sink = w.dependent(1, 1 << 16);
            }
        }
        while (System.nanoTime() < end) {
            sink = dependent ? w.dependent(rounds, Integer.MAX_VALUE) : w.invoke(rounds);
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
