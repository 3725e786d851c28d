package io.stallscope.workloads;

import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;

/**
 * A huge {@code Unsafe.setMemory}: a thread fills a large off-heap region again and again. The
 * fill runs inside the VM (not in Java code) and never polls for a safepoint, so every safepoint
 * asked for meanwhile waits for the whole fill: the "huge copy" half of the no-safepoint-poll
 * cause, and the case async-profiler's time-to-safepoint mode is known for. A trigger asks for a
 * safepoint every period.
 */
public final class SetMemory {
    static final String USAGE = String.join("\n",
            "usage: set-memory [--duration 5s] [--size-mb 1024] [--trigger threaddump|gc] [--every 200ms]",
            "  A thread fills --size-mb of off-heap memory with Unsafe.setMemory, again and again, until --duration;",
            "  every --every a safepoint is requested and waits for the fill in progress.",
            "  Prints a summary, then one JSON line (fills done: the throughput).");

    private static final sun.misc.Unsafe UNSAFE = unsafe();

    private static sun.misc.Unsafe unsafe() {
        try {
            Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (sun.misc.Unsafe) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("sun.misc.Unsafe is not reachable", e);
        }
    }

    /** The culprit's method: one fill of the whole region. */
    static void fill(long address, long bytes, byte value) {
        UNSAFE.setMemory(address, bytes, value);
    }

    public static void main(String[] args) throws Exception {
        Options o = new Options("set-memory", USAGE, args, "duration", "size-mb", "trigger", "every");
        long duration = o.nanos("duration", "5s");
        long bytes = o.integer("size-mb", 1024) << 20;
        String trigger = o.string("trigger", "threaddump");
        long every = o.nanos("every", "200ms");
        if (!trigger.equals("gc") && !trigger.equals("threaddump")) {
            o.fail("--trigger " + trigger + ": use threaddump or gc");
        }
        long address = UNSAFE.allocateMemory(bytes);
        long end = System.nanoTime() + duration;
        Latencies triggered = new Latencies();
        Thread trig = new Thread(() -> {
            while (System.nanoTime() < end) {
                try {
                    Thread.sleep(Math.max(1, every / 1_000_000));
                } catch (InterruptedException e) {
                    return;
                }
                long t0 = System.nanoTime();
                if (trigger.equals("gc")) {
                    System.gc();
                } else {
                    ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
                }
                triggered.add(System.nanoTime() - t0);
            }
        }, "safepoint-trigger");
        trig.setDaemon(true);
        trig.start();
        Latencies fills = new Latencies();
        long n = 0;
        Thread.currentThread().setName("set-memory");
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            fill(address, bytes, (byte) n);
            fills.add(System.nanoTime() - t0);
            n++;
        }
        trig.interrupt();
        UNSAFE.freeMemory(address);
        System.out.println("set-memory: " + n + " fills of " + (bytes >> 20) + " MB");
        System.out.println("  fills took: " + fills.human());
        System.out.println("  safepoint requests (" + trigger + ") took: " + triggered.human());
        System.out.println("{\"workload\":\"set-memory\"," + Latencies.jvm() + ",\"duration_ns\":" + duration + ",\"bytes\":" + bytes + ",\"calls\":" + n
                + ",\"fills\":" + fills.json() + ",\"trigger\":\"" + trigger + "\",\"requests\":" + triggered.json() + "}");
    }
}
