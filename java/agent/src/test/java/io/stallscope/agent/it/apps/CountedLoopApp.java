package io.stallscope.agent.it.apps;

/**
 * The counted-loop time-to-safepoint pathology: a thread sums a 16 MiB array in nested int-counted
 * loops, which C2 compiles without safepoint polls under -XX:-UseCountedLoopSafepoints, while main asks
 * for a GC every second; every GC then waits for the loop to finish its call. Run with
 * -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints. Prints {@code done} after the given seconds, once
 * the summing thread has finished its last call (so no long safepoint waits after the meter stops).
 */
public final class CountedLoopApp {
    static volatile boolean stop;
    static volatile long sink;

    private CountedLoopApp() {
    }

    static long sum(byte[] a) {
        long s = 0;
        for (int i = 0; i < 600; i++) {
            for (int j = 0; j < a.length; j++) {
                s += a[j];
            }
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        int seconds = Integer.parseInt(args[0]);
        byte[] array = new byte[16 << 20];
        for (int i = 0; i < array.length; i++) {
            array[i] = (byte) i;
        }
        Thread summer = new Thread(() -> {
            while (!stop) {
                sink += sum(array);
            }
        }, "counted-loop");
        summer.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        for (int s = 0; s < seconds; s++) {
            Thread.sleep(1000);
            System.gc();
        }
        stop = true;
        summer.join();
        System.out.println("done");
    }
}
