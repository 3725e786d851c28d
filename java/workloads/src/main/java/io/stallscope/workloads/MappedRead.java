package io.stallscope.workloads;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

/**
 * Seed 000 (LongTTSP): a reader thread reads a file through a {@code MappedByteBuffer} while the
 * main thread requests safepoints and times each one. A read of a page that is not in the page
 * cache is a major fault: one machine instruction that waits for the disk, so the thread cannot
 * reach the safepoint and the whole JVM waits with it.
 *
 * <p>Modes: {@code mmap} (the seed), {@code pread} ({@code FileChannel.read}: a native call, so
 * the thread is safepoint-safe while it waits) and {@code prefault} (the page cache is warmed
 * with safepoint-safe reads before the mapped reads begin).
 */
public final class MappedRead {
    static final String USAGE = String.join("\n",
            "usage: mapped-read --file PATH [--mode mmap|pread|prefault] [--map read-only|read-write] [--stride 1m]",
            "                   [--reads 8] [--chunk 1] [--safepoint threaddump|gc] [--every 50ms]",
            "  A reader thread reads --chunk bytes (1, as the seed; a bulk get of e.g. 512k is one copy that faults",
            "  once per readahead window, with no safepoint poll inside) every --stride bytes, --reads times, from",
            "  --file; meanwhile the main thread requests a safepoint every --every and times it. --mode prefault",
            "  first warms the regions to be read with native reads, off the critical path. Evict the file first",
            "  (stallscope inject evict) and put it on a slow disk (stallscope inject slowfs) to see the seed's stall.",
            "  --map read-write maps the file READ_WRITE (a shared writable mapping, as a broker maps its indexes)",
            "  and still only reads it: each fault is a read, not a write.",
            "  Prints a summary, then one JSON line.");

    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Options o = new Options("mapped-read", USAGE, args, "file", "mode", "map", "stride", "reads", "safepoint", "every", "chunk");
        String file = o.string("file", null);
        if (file == null) {
            o.fail("--file is required");
        }
        String mode = o.string("mode", "mmap");
        if (!mode.equals("mmap") && !mode.equals("pread") && !mode.equals("prefault")) {
            o.fail("--mode " + mode + ": use mmap, pread or prefault");
        }
        String mapping = o.string("map", "read-only");
        if (!mapping.equals("read-only") && !mapping.equals("read-write")) {
            o.fail("--map " + mapping + ": use read-only or read-write");
        }
        boolean writable = mapping.equals("read-write");
        long stride = parseSize(o, o.string("stride", "1m"));
        int chunk = (int) parseSize(o, o.string("chunk", "1"));
        // (prefault warms chunk bytes at each read position, before the reads begin)
        if (chunk < 1 || chunk > stride) {
            o.fail("--chunk must be between 1 and --stride");
        }
        int reads = (int) o.integer("reads", 8);
        String kind = o.string("safepoint", "threaddump");
        long every = o.nanos("every", "50ms");
        Path path = Paths.get(file);
        Latencies readTimes = new Latencies();
        Latencies safepoints = new Latencies();
        StandardOpenOption[] open = writable
                ? new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE}
                : new StandardOpenOption[] {StandardOpenOption.READ};
        try (FileChannel ch = FileChannel.open(path, open)) {
            long size = ch.size();
            if (size < stride * reads) {
                o.fail(file + " has " + size + " bytes, fewer than --reads × --stride = " + stride * reads);
            }
            if (mode.equals("prefault")) {
                // Warm the page cache off the critical path, with native (safepoint-safe) reads
                // of exactly the regions the reader will touch.
                ByteBuffer warm = ByteBuffer.allocateDirect(chunk);
                for (int i = 0; i < reads; i++) {
                    warm.clear();
                    while (warm.hasRemaining() && ch.read(warm, i * stride + warm.position()) > 0) {
                        // fill it
                    }
                }
            }
            MappedByteBuffer map = ch.map(writable ? FileChannel.MapMode.READ_WRITE : FileChannel.MapMode.READ_ONLY, 0, size);
            Thread reader = new Thread(() -> {
                ByteBuffer direct = ByteBuffer.allocateDirect(chunk);
                byte[] heap = new byte[chunk];
                for (int i = 0; i < reads; i++) {
                    long pos = i * stride;
                    long t0 = System.nanoTime();
                    if (mode.equals("pread")) {
                        direct.clear();
                        try {
                            while (direct.hasRemaining() && ch.read(direct, pos + direct.position()) > 0) {
                                // a native read: the thread is safepoint-safe while it waits
                            }
                        } catch (IOException e) {
                            System.err.println("mapped-read: " + e);
                            return;
                        }
                        sink += direct.get(0);
                    } else if (chunk == 1) {
                        sink += map.get((int) pos);
                    } else {
                        ByteBuffer view = map.duplicate();
                        view.position((int) pos);
                        view.get(heap, 0, chunk);
                        sink += heap[chunk - 1];
                    }
                    readTimes.add(System.nanoTime() - t0);
                }
            }, "reader-thread");
            reader.start();
            while (reader.isAlive()) {
                long t0 = System.nanoTime();
                if (kind.equals("gc")) {
                    System.gc();
                } else {
                    ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
                }
                safepoints.add(System.nanoTime() - t0);
                Thread.sleep(every / 1_000_000);
            }
            reader.join();
        }
        System.out.println("mapped-read (" + mode + ", " + mapping + "): " + reads + " reads of " + file + " every " + stride + " bytes");
        System.out.println("  reads took:               " + readTimes.human());
        System.out.println("  safepoints (" + kind + ") took: " + safepoints.human());
        System.out.println("{\"workload\":\"mapped-read\"," + Latencies.jvm() + ",\"mode\":\"" + mode + "\",\"map\":\"" + mapping + "\",\"file\":\"" + file.replace("\"", "\\\"") + "\",\"stride\":" + stride
                + ",\"chunk\":" + chunk + ",\"reads\":" + readTimes.json() + ",\"safepoint\":\"" + kind + "\",\"safepoints\":" + safepoints.json() + "}");
    }

    static long parseSize(Options o, String v) {
        String s = v.toLowerCase();
        long mult = 1;
        if (s.endsWith("k")) {
            mult = 1 << 10;
        } else if (s.endsWith("m")) {
            mult = 1 << 20;
        } else if (s.endsWith("g")) {
            mult = 1L << 30;
        }
        try {
            return Long.parseLong(mult == 1 ? s : s.substring(0, s.length() - 1)) * mult;
        } catch (NumberFormatException e) {
            o.fail(v + " is not a size (use e.g. 4k, 1m)");
            return 0;
        }
    }
}
