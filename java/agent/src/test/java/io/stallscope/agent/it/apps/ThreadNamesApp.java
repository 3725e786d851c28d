package io.stallscope.agent.it.apps;

import java.util.concurrent.CountDownLatch;

/**
 * Threads whose names are hard to map to native threads: two whose names share the 15-byte native
 * prefix ({@code pool-1-thread-1}, {@code pool-1-thread-12}; the second spins, so its CPU time moves
 * while the table is built), a 40-character name, and names with a tab, a backslash and non-ASCII
 * characters. Each thread prints {@code tid <tid>\t<name escaped>} with its tid from /proc/thread-self,
 * the ground truth the thread table is checked against; main does the same.
 */
public final class ThreadNamesApp {
    public static final String[] NAMES = {
        "pool-1-thread-1",
        "pool-1-thread-12",
        "a-thread-name-of-forty-characters-123456",
        "tab\there",
        "back\\slash",
        "naïve-é-thread",
    };
    static volatile long sink;

    private ThreadNamesApp() {
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch started = new CountDownLatch(NAMES.length);
        for (String name : NAMES) {
            boolean spins = name.equals("pool-1-thread-12");
            Thread t = new Thread(() -> {
                System.out.println("tid " + AppControl.currentTid() + "\t"
                        + name.replace("\\", "\\\\").replace("\t", "\\t"));
                started.countDown();
                if (spins) {
                    long x = 0;
                    while (true) {
                        x += System.nanoTime() & 7;
                        sink = x;
                    }
                }
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, name);
            t.setDaemon(true);
            t.start();
        }
        started.await();
        System.out.println("tid " + AppControl.currentTid() + "\t" + Thread.currentThread().getName());
        AppControl.serve();
    }
}
