import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The host JVM of the overhead benchmark: {@code idle} (only sleeps), {@code busy} (one thread per core
 * doing fixed-size CPU work items, counted) or {@code sleeper} (idle, plus a thread named
 * {@value #SLEEPER} that does nothing but {@code TimeUnit.NANOSECONDS.sleep(1 ms)} in a loop: the CPU
 * floor of any sleep-based meter on this machine). It warms up, prints {@code start}, runs the measured window,
 * prints {@code end <work items done in the window>}, then waits for its stdin to close, so the driver
 * can read this process's /proc entries at both edges of the window.
 *
 * <p>Usage: {@code java Workload idle|busy|sleeper <warm-up seconds> <window seconds> [threads]}
 */
public final class Workload {
    static final String SLEEPER = "bare-sleep-loop";
    private static volatile boolean stop;

    private Workload() {
    }

    public static void main(String[] args) throws Exception {
        boolean busy = args[0].equals("busy");
        long warmupMs = (long) (Double.parseDouble(args[1]) * 1000);
        long windowMs = (long) (Double.parseDouble(args[2]) * 1000);
        int threads = args.length > 3 ? Integer.parseInt(args[3]) : Runtime.getRuntime().availableProcessors();

        AtomicLong[] done = new AtomicLong[busy ? threads : 0];
        Thread[] workers = new Thread[done.length];
        for (int t = 0; t < workers.length; t++) {
            AtomicLong count = done[t] = new AtomicLong();
            long seed = 0x9E3779B97F4A7C15L * (t + 1);
            workers[t] = new Thread(() -> {
                long x = seed;
                while (!stop) {
                    x = workItem(x);
                    count.lazySet(count.get() + 1);
                }
                sink(x);
            }, "work-" + t);
            workers[t].start();
        }

        if (args[0].equals("sleeper")) {
            // Runs until the JVM exits, so it is still there when the driver reads its CPU after "end".
            Thread sleeper = new Thread(() -> {
                try {
                    while (true) {
                        TimeUnit.NANOSECONDS.sleep(1_000_000);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, SLEEPER);
            sleeper.setDaemon(true);
            sleeper.start();
        }

        Thread.sleep(warmupMs);
        long before = sum(done);
        System.out.println("start");
        Thread.sleep(windowMs);
        long items = sum(done) - before;
        System.out.println("end " + items);
        stop = true;
        for (Thread w : workers) {
            w.join();
        }
        waitForStdinToClose();
    }

    /** About a microsecond of integer work that the JIT cannot skip. */
    static long workItem(long x) {
        for (int i = 0; i < 512; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    private static volatile long sinkValue;

    private static void sink(long x) {
        sinkValue = x;
    }

    private static long sum(AtomicLong[] counts) {
        long total = 0;
        for (AtomicLong c : counts) {
            total += c.get();
        }
        return total;
    }

    private static void waitForStdinToClose() throws IOException {
        while (System.in.read() >= 0) {
            // the driver closes stdin when it has read what it needs
        }
    }
}
