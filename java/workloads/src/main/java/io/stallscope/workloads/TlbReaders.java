package io.stallscope.workloads;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Seed 002 (tlb-shootdown): the seed's CreateDataFiles, MMapReader and BufferPoolReader. Many
 * threads read random records from many one-page files, either by mapping each file (and
 * unmapping it, which makes every other CPU running the process flush its TLB) or by reading
 * it into pooled buffers.
 *
 * <p>Data: one 4 KiB page per file, 102 records per page, each a 4-byte big-endian length (36)
 * and the 36-byte {@code UUID.nameUUIDFromBytes} of the record's global index, so every file
 * differs and every read is verified. The seed's pool did not {@code clear()} its buffers
 * before reuse, so most of its reads read nothing; this pool clears them, and a reader that
 * skips reads fails verification.
 */
public final class TlbReaders {
    static final String USAGE = String.join("\n",
            "usage: tlb-readers create --dir DIR [--files 2000]",
            "       tlb-readers read --dir DIR [--files 2000] [--threads 2] [--reads 100] [--mode mmap|pool]",
            "  create writes the data files; read reads --reads random records from each file, verifying each,",
            "  and reports the elapsed time and the per-CPU TLB shootdowns (/proc/interrupts) it caused.",
            "  Prints a summary, then one JSON line.");

    static final int PAGE = 4096;
    static final int RECORDS = 102;
    static final int RECORD = 40;

    static byte[] uuid(long globalIndex) {
        return UUID.nameUUIDFromBytes(Long.toString(globalIndex).getBytes(StandardCharsets.US_ASCII)).toString().getBytes(StandardCharsets.US_ASCII);
    }

    static Path file(Path dir, int i) {
        return dir.resolve("data-" + i);
    }

    static void create(Path dir, int files) throws IOException {
        Files.createDirectories(dir);
        ByteBuffer page = ByteBuffer.allocate(PAGE);
        for (int f = 0; f < files; f++) {
            page.clear();
            for (int r = 0; r < RECORDS; r++) {
                page.putInt(36);
                page.put(uuid((long) f * RECORDS + r));
            }
            while (page.hasRemaining()) {
                page.put((byte) 0);
            }
            page.flip();
            try (FileChannel ch = FileChannel.open(file(dir, f), StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                while (page.hasRemaining()) {
                    ch.write(page);
                }
            }
        }
    }

    /** The TLB row of /proc/interrupts: shootdowns received per CPU. */
    static long[] tlbShootdowns() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/interrupts"))) {
                String t = line.trim();
                if (t.startsWith("TLB:")) {
                    String[] f = t.substring(4).trim().split("\\s+");
                    List<Long> v = new ArrayList<>();
                    for (String x : f) {
                        try {
                            v.add(Long.parseLong(x));
                        } catch (NumberFormatException e) {
                            break;
                        }
                    }
                    long[] out = new long[v.size()];
                    for (int i = 0; i < out.length; i++) {
                        out[i] = v.get(i);
                    }
                    return out;
                }
            }
        } catch (IOException e) {
            // No /proc/interrupts: report no counts rather than fail the run.
        }
        return new long[0];
    }

    /** Unmaps a mapping now, as a database would, instead of whenever the GC gets to it. */
    static final class Unmapper {
        private final Object unsafe;
        private final java.lang.reflect.Method invokeCleaner;

        Unmapper() throws ReflectiveOperationException {
            Class<?> c = Class.forName("sun.misc.Unsafe");
            Field f = c.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            unsafe = f.get(null);
            invokeCleaner = c.getMethod("invokeCleaner", ByteBuffer.class);
        }

        void unmap(MappedByteBuffer b) throws ReflectiveOperationException {
            invokeCleaner.invoke(unsafe, b);
        }
    }

    /**
     * The expected UUID of every record, computed before the timed reads (MD5 is slow), in one
     * flat array: as five million small arrays (50,000 files) they made G1 copy 300 MB of live
     * objects into fresh memory, young pauses of 60-126 ms that had nothing to do with the seed.
     */
    static byte[] expected(int files) {
        byte[] e = new byte[Math.multiplyExact(files * RECORDS, 36)];
        for (int i = 0; i < files * RECORDS; i++) {
            System.arraycopy(uuid(i), 0, e, i * 36, 36);
        }
        return e;
    }

    static boolean verify(ByteBuffer page, int file, int record, byte[] expected) {
        int base = record * RECORD;
        if (page.getInt(base) != 36) {
            return false;
        }
        int want = (file * RECORDS + record) * 36;
        for (int i = 0; i < 36; i++) {
            if (page.get(base + 4 + i) != expected[want + i]) {
                return false;
            }
        }
        return true;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !(args[0].equals("create") || args[0].equals("read"))) {
            System.out.println(USAGE);
            System.exit(args.length == 0 || args[0].contains("help") ? 0 : 2);
        }
        String verb = args[0];
        String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
        Options o = new Options("tlb-readers", USAGE, rest, "dir", "files", "threads", "reads", "mode");
        String dirArg = o.string("dir", null);
        if (dirArg == null) {
            o.fail("--dir is required");
        }
        Path dir = Paths.get(dirArg);
        int files = (int) o.integer("files", 2000);
        if (verb.equals("create")) {
            long t0 = System.nanoTime();
            create(dir, files);
            System.out.println("tlb-readers: created " + files + " files in " + dir);
            System.out.println("{\"workload\":\"tlb-readers\",\"verb\":\"create\",\"files\":" + files + ",\"elapsed_ns\":" + (System.nanoTime() - t0) + "}");
            return;
        }
        int threads = (int) o.integer("threads", 2);
        int reads = (int) o.integer("reads", 100);
        String mode = o.string("mode", "mmap");
        if (!mode.equals("mmap") && !mode.equals("pool")) {
            o.fail("--mode " + mode + ": use mmap or pool");
        }
        if (!Files.exists(file(dir, files - 1))) {
            o.fail(file(dir, files - 1) + " is missing: run tlb-readers create --dir " + dir + " --files " + files + " first");
        }
        Unmapper unmapper = mode.equals("mmap") ? new Unmapper() : null;
        byte[] expected = expected(files);
        ArrayBlockingQueue<ByteBuffer> pool = new ArrayBlockingQueue<>(threads);
        for (int i = 0; i < threads; i++) {
            pool.add(ByteBuffer.allocateDirect(PAGE));
        }
        AtomicLong verified = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        ExecutorService ex = Executors.newFixedThreadPool(threads);
        long[] before = tlbShootdowns();
        long t0 = System.nanoTime();
        List<Future<?>> tasks = new ArrayList<>(files);
        for (int f = 0; f < files; f++) {
            final int fi = f;
            tasks.add(ex.submit(() -> {
                try (FileChannel ch = FileChannel.open(file(dir, fi), StandardOpenOption.READ)) {
                    ByteBuffer page;
                    MappedByteBuffer map = null;
                    if (unmapper != null) {
                        map = ch.map(FileChannel.MapMode.READ_ONLY, 0, PAGE);
                        page = map;
                    } else {
                        page = pool.take();
                        // The seed forgot this, and so read nothing into reused buffers.
                        page.clear();
                        while (page.hasRemaining() && ch.read(page, page.position()) > 0) {
                            // read the whole page
                        }
                    }
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    for (int r = 0; r < reads; r++) {
                        if (verify(page, fi, rnd.nextInt(RECORDS), expected)) {
                            verified.incrementAndGet();
                        } else {
                            failed.incrementAndGet();
                        }
                    }
                    if (map != null) {
                        unmapper.unmap(map);
                    } else {
                        pool.put(page);
                    }
                }
                return null;
            }));
        }
        for (Future<?> t : tasks) {
            t.get();
        }
        long elapsed = System.nanoTime() - t0;
        long[] after = tlbShootdowns();
        ex.shutdown();
        StringBuilder delta = new StringBuilder("[");
        long total = 0;
        for (int i = 0; i < Math.min(before.length, after.length); i++) {
            long d = after[i] - before[i];
            total += d;
            delta.append(i == 0 ? "" : ",").append(d);
        }
        delta.append(']');
        System.out.println("tlb-readers (" + mode + "): " + files + " files × " + reads + " reads on " + threads + " threads in " + Latencies.ms(elapsed));
        System.out.println("  verified " + verified.get() + ", failed " + failed.get() + "; TLB shootdowns per CPU " + delta + " (" + total + " in all)");
        System.out.println("{\"workload\":\"tlb-readers\",\"verb\":\"read\"," + Latencies.jvm() + ",\"mode\":\"" + mode + "\",\"files\":" + files + ",\"threads\":" + threads
                + ",\"reads_per_file\":" + reads + ",\"elapsed_ns\":" + elapsed + ",\"verified\":" + verified.get() + ",\"failed\":" + failed.get()
                + ",\"tlb_shootdowns\":" + delta + ",\"tlb_shootdowns_total\":" + total + "}");
        if (failed.get() > 0) {
            System.err.println("tlb-readers: " + failed.get() + " reads failed verification");
            System.exit(1);
        }
    }
}
