package io.stallscope.workloads;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;

/**
 * A JVM that needs fresh memory while its own page cache fills: the workload of the
 * memory-pressure scenario. One thread streams a file (dirty page cache, charged to the JVM's
 * memory cgroup); another takes native memory ({@code Unsafe.allocateMemory}, a fresh mapping
 * each time), writes a byte to each of its pages from Java code, and frees it; the main thread
 * asks for a safepoint (a thread dump) every {@code --every}. Each first write to a page is a
 * page fault in Java code, which no safepoint can interrupt: in a memory cgroup just above its
 * needs, that fault must reclaim (and wait for dirty pages to be written back) before it gets
 * its page; with headroom it takes microseconds. The time to each safepoint is timed by the
 * thread dump's latency.
 */
public final class MemorySqueeze {
    static final String USAGE = String.join("\n",
            "usage: memory-squeeze --file PATH [--duration 10s] [--file-mb 512] [--buffer-mb 32] [--every 10ms]",
            "  streams --file-mb MB to PATH again and again, touches every page of --buffer-mb of fresh native",
            "  memory again and again, and requests a safepoint (a thread dump) every --every, for --duration.",
            "  Run it in a memory cgroup to see reclaim. Prints a summary, then one JSON line.");

    static sun.misc.Unsafe unsafe() throws ReflectiveOperationException {
        Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        return (sun.misc.Unsafe) f.get(null);
    }

    public static void main(String[] args) throws Exception {
        Options o = new Options("memory-squeeze", USAGE, args, "file", "duration", "file-mb", "buffer-mb", "every");
        String file = o.string("file", null);
        if (file == null) {
            o.fail("--file is required");
        }
        long duration = o.nanos("duration", "10s");
        int fileMb = (int) o.integer("file-mb", 512);
        int bufferMb = (int) o.integer("buffer-mb", 32);
        long every = o.nanos("every", "10ms");
        long end = System.nanoTime() + duration;
        long[] written = new long[1];
        Thread writer = new Thread(() -> {
            byte[] chunk = new byte[1 << 20];
            try {
                while (System.nanoTime() < end) {
                    try (FileOutputStream f = new FileOutputStream(file)) {
                        for (int i = 0; i < fileMb && System.nanoTime() < end; i++) {
                            f.write(chunk);
                            written[0]++;
                            // Up to 1 GB/s: enough to keep the page cache full of dirty pages,
                            // not so much that it takes a CPU of its own.
                            Thread.sleep(1);
                        }
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "file-writer");
        writer.setDaemon(true);
        writer.start();
        long[] buffers = new long[1];
        sun.misc.Unsafe unsafe = unsafe();
        long bytes = (long) bufferMb << 20;
        Thread allocator = new Thread(() -> {
            while (System.nanoTime() < end) {
                long at = unsafe.allocateMemory(bytes);
                // A long index: the loop polls for safepoints between pages; only a fault holds it.
                for (long off = 0; off < bytes; off += 4096) {
                    unsafe.putByte(at + off, (byte) off);
                }
                unsafe.freeMemory(at);
                buffers[0]++;
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "allocator");
        allocator.start();
        Latencies safepoints = new Latencies();
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
            safepoints.add(System.nanoTime() - t0);
            long sleep = every - (System.nanoTime() - t0);
            if (sleep > 0) {
                Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
            }
        }
        allocator.join();
        System.out.println("memory-squeeze: " + written[0] + " MB written, " + buffers[0] + " fresh buffers of " + bufferMb + " MB touched");
        System.out.println("  safepoint requests took: " + safepoints.human());
        System.out.println("{\"workload\":\"memory-squeeze\"," + Latencies.jvm() + ",\"written_mb\":" + written[0] + ",\"buffers\":" + buffers[0]
                + ",\"safepoints\":" + safepoints.json() + "}");
    }
}
