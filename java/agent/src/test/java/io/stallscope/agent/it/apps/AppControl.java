package io.stallscope.agent.it.apps;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.function.Predicate;

/**
 * How a test drives an application JVM: the application prints {@code ready <pid>}, then answers
 * command lines on stdin ({@code ping}, {@code alloc <thread>}, its own commands) until {@code exit} or
 * the end of input, when main returns and the JVM exits normally. A watchdog halts a forgotten JVM.
 */
public final class AppControl {
    private static final long WATCHDOG_MS = 180_000;

    private AppControl() {
    }

    /** Serves the common commands; {@code extra} gets the others and says whether it knew them. */
    public static void serve(Predicate<String> extra) throws IOException {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(WATCHDOG_MS);
                System.err.println("watchdog: no exit command in " + WATCHDOG_MS + " ms, halting");
                Runtime.getRuntime().halt(3);
            } catch (InterruptedException e) {
                // main returned
            }
        }, "app-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String command = line.trim();
            if (command.equals("exit")) {
                break;
            } else if (command.equals("ping")) {
                System.out.println("pong");
            } else if (command.startsWith("alloc ")) {
                System.out.println("alloc " + allocatedBytes(command.substring("alloc ".length())));
            } else if (!extra.test(command)) {
                System.out.println("unknown command " + command);
            }
        }
        watchdog.interrupt();
    }

    public static void serve() throws IOException {
        serve(command -> false);
    }

    /** Bytes the named thread has allocated so far (HotSpot's per-thread TLAB accounting), or -1. */
    static long allocatedBytes(String threadName) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        for (Thread t : allThreads()) {
            if (t.getName().equals(threadName)) {
                return mx.getThreadAllocatedBytes(t.getId());
            }
        }
        return -1;
    }

    static Thread[] allThreads() {
        ThreadGroup root = Thread.currentThread().getThreadGroup();
        while (root.getParent() != null) {
            root = root.getParent();
        }
        Thread[] threads = new Thread[root.activeCount() + 32];
        int n = root.enumerate(threads, true);
        return java.util.Arrays.copyOf(threads, n);
    }

    /** The calling thread's native tid, read from /proc/thread-self. */
    public static long currentTid() {
        try {
            String target = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString();
            return Long.parseLong(target.substring(target.lastIndexOf('/') + 1));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
