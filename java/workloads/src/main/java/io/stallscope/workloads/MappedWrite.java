package io.stallscope.workloads;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.locks.LockSupport;

/**
 * Write faults on a file the application maps shared (issue 28): a writer thread keeps a small
 * state file up to date through a {@code MappedByteBuffer} opened {@code READ_WRITE} (a counter
 * per page, as a journal's header, a metrics file or a queue's index does), while a flusher
 * thread makes it durable with {@code force()} every {@code --force-every}, and the main thread
 * requests a safepoint every {@code --every} and times it.
 *
 * <p>{@code force()} starts writeback of the dirty pages and waits for it (natively, so the
 * flusher is safepoint-safe). Meanwhile the pages are write-protected and under writeback: the
 * writer's next store to one is a write fault that waits for that page's writeback to end (a
 * stable page: FUSE, NFS, and block devices with integrity checks always wait). That store is
 * one instruction in Java code, so the writer cannot reach the safepoint, and the whole JVM
 * waits for the disk with it.
 *
 * <p>Modes: {@code mmap} (the stall) and {@code channel} (the same updates with
 * {@code FileChannel.write}: a native call, safepoint-safe while it waits).
 */
public final class MappedWrite {
    static final String USAGE = String.join("\n",
            "usage: mapped-write --file PATH [--mode mmap|channel] [--pages 16] [--write-every 1ms]",
            "                    [--force-every 150ms] [--every 50ms] [--duration 5s]",
            "  A writer thread (journal-writer) updates a counter in each of --pages pages of --file, one page every",
            "  --write-every, through a READ_WRITE MappedByteBuffer (mmap) or FileChannel.write (channel); a flusher",
            "  thread calls force() every --force-every; the main thread requests a safepoint (a thread dump) every",
            "  --every and times it, for --duration. Put the file on a disk whose writes are slow (stallscope inject",
            "  slowfs --write-delay 300ms) to see the writer's store wait for the page's writeback.",
            "  Prints a summary, then one JSON line.");

    static final int PAGE = 4096;

    public static void main(String[] args) throws Exception {
        Options o = new Options("mapped-write", USAGE, args, "file", "mode", "pages", "write-every", "force-every",
                "every", "duration");
        String file = o.string("file", null);
        if (file == null) {
            o.fail("--file is required");
        }
        String mode = o.string("mode", "mmap");
        if (!mode.equals("mmap") && !mode.equals("channel")) {
            o.fail("--mode " + mode + ": use mmap or channel");
        }
        int pages = (int) o.integer("pages", 16);
        if (pages < 1 || pages > 65536) {
            o.fail("--pages must be between 1 and 65536");
        }
        long writeEvery = o.nanos("write-every", "1ms");
        long forceEvery = o.nanos("force-every", "150ms");
        long every = o.nanos("every", "50ms");
        long duration = o.nanos("duration", "5s");
        Path path = Paths.get(file);
        Latencies writes = new Latencies();
        Latencies forces = new Latencies();
        Latencies safepoints = new Latencies();
        long end = System.nanoTime() + duration;
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE,
                StandardOpenOption.CREATE)) {
            long size = (long) pages * PAGE;
            if (ch.size() < size) {
                ch.write(ByteBuffer.allocate(1), size - 1);
            }
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
            // The pages are in memory and dirty before the clock starts.
            for (int p = 0; p < pages; p++) {
                map.putLong(p * PAGE, 0);
            }
            map.force();
            Thread writer = new Thread(() -> {
                ByteBuffer one = ByteBuffer.allocateDirect(Long.BYTES);
                long n = 0;
                while (System.nanoTime() < end) {
                    int at = (int) (n % pages) * PAGE;
                    long t0 = System.nanoTime();
                    if (mode.equals("mmap")) {
                        update(map, at, n);
                    } else {
                        one.clear();
                        one.putLong(0, n);
                        try {
                            ch.write(one, at);
                        } catch (IOException e) {
                            System.err.println("mapped-write: " + e);
                            return;
                        }
                    }
                    writes.add(System.nanoTime() - t0);
                    n++;
                    LockSupport.parkNanos(writeEvery);
                }
            }, "journal-writer");
            Thread flusher = new Thread(() -> {
                while (System.nanoTime() < end) {
                    LockSupport.parkNanos(forceEvery);
                    long t0 = System.nanoTime();
                    if (mode.equals("mmap")) {
                        map.force();
                    } else {
                        try {
                            ch.force(false);
                        } catch (IOException e) {
                            System.err.println("mapped-write: " + e);
                            return;
                        }
                    }
                    forces.add(System.nanoTime() - t0);
                }
            }, "journal-flusher");
            flusher.setDaemon(true);
            writer.start();
            flusher.start();
            while (writer.isAlive()) {
                long t0 = System.nanoTime();
                ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
                safepoints.add(System.nanoTime() - t0);
                Thread.sleep(every / 1_000_000);
            }
            writer.join();
            flusher.join(10_000);
        }
        System.out.println("mapped-write (" + mode + "): " + writes.count() + " updates of " + pages + " pages of " + file
                + ", force() every " + Latencies.ms(forceEvery));
        System.out.println("  updates took:             " + writes.human());
        System.out.println("  force() took:             " + forces.human());
        System.out.println("  safepoints (threaddump) took: " + safepoints.human());
        System.out.println("{\"workload\":\"mapped-write\"," + Latencies.jvm() + ",\"mode\":\"" + mode + "\",\"file\":\""
                + file.replace("\\", "\\\\").replace("\"", "\\\"") + "\",\"pages\":" + pages + ",\"writes\":" + writes.json()
                + ",\"forces\":" + forces.json() + ",\"safepoints\":" + safepoints.json() + "}");
    }

    /** The store the writer waits in: one instruction in compiled code, no safepoint poll. */
    static void update(MappedByteBuffer map, int at, long n) {
        map.putLong(at, n);
    }
}
