package io.stallscope.agent.core;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;

/**
 * The thread table: a text file beside the heartbeat mapping each Java thread to its native tid, so
 * the sidecar can give the culprit of a stall its full Java name (the kernel keeps only 15 bytes).
 * Format: docs/heartbeat.md. Invariants: the file is replaced atomically (written as .tmp, then
 * renamed), so a reader sees a whole snapshot or the previous one; nothing here brings the JVM to a
 * safepoint (no stack traces, no thread dumps: only thread enumeration, counters and CPU times); after
 * {@link #close} the file is gone and never written again.
 */
final class ThreadTable implements Runnable {
    static final String THREAD_NAME = "stallscope-thread-table";
    private static final long POLL_MS = 200;
    /** Every this many polls, names are compared too: a rename changes no thread count. */
    private static final int POLLS_PER_NAME_CHECK = 25;

    private final Path path;
    private final Path tmp;
    private final long pid;
    private final SelfTids selfTids;
    private final Object fileLock = new Object();
    private boolean closed; // guarded by fileLock
    private volatile boolean stopRequested;

    ThreadTable(Path path, long pid, SelfTids selfTids) {
        this.path = path;
        this.tmp = path.resolveSibling(path.getFileName() + ".tmp");
        this.pid = pid;
        this.selfTids = selfTids;
    }

    /** The path of the thread table that goes with a heartbeat file: its extension becomes .threads. */
    static Path besideHeartbeat(Path heartbeat) {
        String name = heartbeat.getFileName().toString();
        int dot = name.lastIndexOf('.');
        return heartbeat.resolveSibling((dot > 0 ? name.substring(0, dot) : name) + ".threads");
    }

    @Override
    public void run() {
        try {
            selfTids.registerCurrentThread();
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            long lastStarted = -1;
            int lastLive = -1;
            int lastSelfVersion = -1;
            List<String> lastNames = List.of();
            boolean lastHadAmbiguous = false;
            boolean retried = false;
            for (int poll = 0; !stopRequested; poll++) {
                long started = mx.getTotalStartedThreadCount();
                int live = mx.getThreadCount();
                int selfVersion = selfTids.version();
                boolean changed = started != lastStarted || live != lastLive || selfVersion != lastSelfVersion;
                // A thread caught between its start and HotSpot naming its native thread is ambiguous
                // for a moment: such a table is rebuilt once at the next poll, then at each name check.
                boolean retry = !changed && lastHadAmbiguous && (!retried || poll % POLLS_PER_NAME_CHECK == 0);
                if (!changed && !retry && poll % POLLS_PER_NAME_CHECK == 0) {
                    changed = !names(javaThreads()).equals(lastNames);
                }
                if (changed || retry) {
                    lastStarted = started;
                    lastLive = live;
                    lastSelfVersion = selfVersion;
                    long snapshotNs = System.nanoTime();
                    Thread[] threads = javaThreads();
                    lastNames = names(threads);
                    List<ThreadMatcher.Row> rows = ThreadMatcher.match(describe(threads), ProcTasks.list(),
                            selfTids.snapshot(), new MxCpuClocks(mx));
                    publish(render(pid, snapshotNs, rows));
                    lastHadAmbiguous = hasAmbiguous(rows);
                    retried = retry;
                }
                Thread.sleep(POLL_MS);
            }
        } catch (InterruptedException e) {
            // close() interrupts.
        } catch (Throwable t) {
            AgentLog.failure("the thread table " + path + " stopped", t);
        } finally {
            selfTids.unregisterCurrentThread();
        }
    }

    /** Removes the file; the thread stops at its next poll. */
    void close() {
        stopRequested = true;
        synchronized (fileLock) {
            closed = true;
            try {
                Files.deleteIfExists(tmp);
                Files.deleteIfExists(path);
            } catch (IOException | RuntimeException e) {
                AgentLog.failure("could not remove " + path, e);
            }
        }
    }

    private static boolean hasAmbiguous(List<ThreadMatcher.Row> rows) {
        for (ThreadMatcher.Row row : rows) {
            if (row.match == ThreadMatcher.Match.AMBIGUOUS) {
                return true;
            }
        }
        return false;
    }

    private static Thread[] javaThreads() {
        ThreadGroup root = Thread.currentThread().getThreadGroup();
        while (root.getParent() != null) {
            root = root.getParent();
        }
        Thread[] threads = new Thread[root.activeCount() + 16];
        int n;
        while ((n = root.enumerate(threads, true)) == threads.length) {
            threads = new Thread[threads.length * 2];
        }
        return Arrays.copyOf(threads, n);
    }

    private static List<String> names(Thread[] threads) {
        List<String> names = new ArrayList<>(threads.length);
        for (Thread t : threads) {
            names.add(t.getId() + "/" + t.getName());
        }
        return names;
    }

    private static List<ThreadMatcher.JavaThreadInfo> describe(Thread[] threads) {
        List<ThreadMatcher.JavaThreadInfo> out = new ArrayList<>(threads.length);
        for (Thread t : threads) {
            out.add(new ThreadMatcher.JavaThreadInfo(t.getId(), t.getName(), t.isDaemon()));
        }
        return out;
    }

    static String render(long pid, long snapshotNs, List<ThreadMatcher.Row> rows) {
        StringBuilder sb = new StringBuilder(64 + rows.size() * 48);
        sb.append("# stallscope threads v1 ").append(pid).append(' ').append(snapshotNs).append('\n');
        for (ThreadMatcher.Row row : rows) {
            sb.append(row.tid).append('\t')
                    .append(row.thread.id).append('\t')
                    .append(row.match.label).append('\t')
                    .append(row.thread.daemon ? '1' : '0').append('\t');
            escapeInto(sb, row.thread.name);
            sb.append('\n');
        }
        return sb.toString();
    }

    private static void escapeInto(StringBuilder sb, String name) {
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            switch (c) {
                case '\\': sb.append("\\\\"); break;
                case '\t': sb.append("\\t"); break;
                case '\n': sb.append("\\n"); break;
                default: sb.append(c);
            }
        }
    }

    private void publish(String content) throws IOException {
        byte[] bytes = content.getBytes(StandardCharsets.UTF_8);
        synchronized (fileLock) {
            if (closed) {
                return;
            }
            Files.deleteIfExists(tmp);
            try (SeekableByteChannel out = Files.newByteChannel(tmp,
                    EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
                ByteBuffer buffer = ByteBuffer.wrap(bytes);
                while (buffer.hasRemaining()) {
                    out.write(buffer);
                }
            }
            Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /** CPU times from ThreadMXBean (one bulk call where the JDK offers it) and from schedstat. */
    private static final class MxCpuClocks implements ThreadMatcher.CpuClocks {
        private final ThreadMXBean mx;

        MxCpuClocks(ThreadMXBean mx) {
            this.mx = mx;
        }

        @Override
        public long[] javaThreadsNs(long[] javaIds) {
            if (mx instanceof com.sun.management.ThreadMXBean) {
                return ((com.sun.management.ThreadMXBean) mx).getThreadCpuTime(javaIds);
            }
            long[] ns = new long[javaIds.length];
            for (int i = 0; i < ns.length; i++) {
                ns[i] = mx.getThreadCpuTime(javaIds[i]);
            }
            return ns;
        }

        @Override
        public long nativeThreadNs(int tid) {
            return ProcTasks.cpuTimeNs(tid);
        }
    }
}
