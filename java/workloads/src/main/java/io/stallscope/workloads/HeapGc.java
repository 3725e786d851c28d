package io.stallscope.workloads;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Full GCs of a live heap, timed: the workload of the swap and slow-log scenarios. It builds
 * {@code --live} MB of long-lived arrays (touching every page), then runs {@code --gcs} full GCs
 * ({@code System.gc()}) {@code --every} apart and times each. With {@code --ready FILE} and
 * {@code --go FILE} it announces that the heap is built and waits for a signal before the GCs:
 * the swap scenario squeezes the JVM's memory cgroup in between, pushing the idle heap out to
 * swap, so that the GCs must page it back in.
 */
public final class HeapGc {
    static final String USAGE = String.join("\n",
            "usage: heap-gc [--live 256] [--gcs 3] [--every 500ms] [--ready FILE --go FILE] [--wait 60s]",
            "  builds --live MB of long-lived arrays, then runs --gcs full GCs (System.gc()) --every apart and",
            "  times each. With --ready and --go: creates --ready once the heap is built, then waits (at most",
            "  --wait) for --go to exist before the GCs. Run it with -XX:+UseParallelGC for stop-the-world full",
            "  GCs. Prints a summary, then one JSON line.");

    /** The live heap: kept reachable until the end. */
    static long[][] live;

    public static void main(String[] args) throws Exception {
        Options o = new Options("heap-gc", USAGE, args, "live", "gcs", "every", "ready", "go", "wait");
        int liveMb = (int) o.integer("live", 256);
        int gcs = (int) o.integer("gcs", 3);
        long every = o.nanos("every", "500ms");
        String ready = o.string("ready", null);
        String go = o.string("go", null);
        long wait = o.nanos("wait", "60s");
        if ((ready == null) != (go == null)) {
            o.fail("--ready and --go go together");
        }
        // 1 MB arrays, every page written: the whole heap resident.
        live = new long[liveMb][];
        for (int i = 0; i < liveMb; i++) {
            long[] a = new long[(1 << 17) - 4];
            for (int j = 0; j < a.length; j += 512) {
                a[j] = i + j;
            }
            live[i] = a;
        }
        if (ready != null) {
            Files.write(Paths.get(ready), new byte[0]);
            Path g = Paths.get(go);
            long until = System.nanoTime() + wait;
            while (!Files.exists(g)) {
                if (System.nanoTime() > until) {
                    System.err.println("heap-gc: " + go + " never appeared within --wait");
                    System.exit(3);
                }
                Thread.sleep(10);
            }
        }
        Latencies pauses = new Latencies();
        for (int g = 0; g < gcs; g++) {
            if (g > 0) {
                Thread.sleep(every / 1_000_000);
            }
            long t0 = System.nanoTime();
            System.gc();
            pauses.add(System.nanoTime() - t0);
        }
        long sum = 0;
        for (long[] a : live) {
            sum += a[0];
        }
        System.out.println("heap-gc: " + liveMb + " MB live, " + gcs + " full GCs: " + pauses.human());
        System.out.println("{\"workload\":\"heap-gc\"," + Latencies.jvm() + ",\"live_mb\":" + liveMb + ",\"gcs\":" + pauses.json() + ",\"check\":" + sum + "}");
    }
}
