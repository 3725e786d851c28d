package io.stallscope.workloads;

import java.util.Random;
import java.util.zip.Deflater;

/**
 * The GC locker: a thread in a JNI critical region for hundreds of ms while another allocates.
 * {@code Deflater.deflate} on a heap array holds it ({@code GetPrimitiveArrayCritical}) for the
 * whole native call, so deflating {@code --mb} MB at level 9 in one call keeps collections out
 * that long (JDK 11-21; JDK 22 on, G1 pins regions instead). The allocator times its allocations:
 * those that wait for the collection held back are the stalls the application sees.
 */
public final class GcLocker {
    static final String USAGE = String.join("\n",
            "usage: gc-locker [--mb 24] [--for 4s] [--pause 200ms]",
            "  a thread deflates --mb MB (level 9, one call: one JNI critical region) every --pause, while",
            "  another allocates 4 KB arrays, for --for. Run it with a small young generation (-Xmn16m) so",
            "  that the allocator needs collections while the region is held. Prints the regions' and the",
            "  allocator's longest waits, then one JSON line.");

    static volatile Object sink;

    public static void main(String[] args) throws Exception {
        Options o = new Options("gc-locker", USAGE, args, "mb", "for", "pause");
        int mb = (int) o.integer("mb", 24);
        long runFor = o.nanos("for", "4s");
        long pause = o.nanos("pause", "200ms");
        byte[] in = new byte[mb << 20];
        Random r = new Random(1);
        for (int i = 0; i < in.length; i++) {
            in[i] = (byte) ('a' + r.nextInt(16));
        }
        byte[] out = new byte[in.length + 1024];
        Latencies regions = new Latencies();
        Latencies waits = new Latencies();
        long end = System.nanoTime() + runFor;
        Thread deflater = new Thread(() -> {
            while (System.nanoTime() < end) {
                Deflater z = new Deflater(9);
                z.setInput(in);
                z.finish();
                long t0 = System.nanoTime();
                z.deflate(out);
                regions.add(System.nanoTime() - t0);
                z.end();
                try {
                    Thread.sleep(pause / 1_000_000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "deflater");
        Thread allocator = new Thread(() -> {
            long last = System.nanoTime();
            while (last < end) {
                sink = new byte[4096];
                long now = System.nanoTime();
                if (now - last > 1_000_000) {
                    waits.add(now - last);
                }
                last = now;
            }
        }, "allocator");
        deflater.start();
        allocator.start();
        deflater.join();
        allocator.join();
        System.out.println("gc-locker: critical regions " + regions.human() + "; allocations over 1 ms " + waits.human());
        System.out.println("{\"workload\":\"gc-locker\"," + Latencies.jvm() + ",\"mb\":" + mb + ",\"regions\":" + regions.json() + ",\"allocation_waits\":" + waits.json() + "}");
    }
}
