package io.stallscope.agent.core;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The native threads of this process as Linux lists them in {@code /proc/self/task}: tid, native name
 * ({@code comm}, at most 15 bytes) and CPU time ({@code schedstat}). Invariant: a thread that ends while
 * being read is left out, never reported half; reading never throws for a vanished thread.
 */
final class ProcTasks {
    private static final Path TASKS = Paths.get("/proc/self/task");

    private ProcTasks() {
    }

    static List<ThreadMatcher.NativeThread> list() throws IOException {
        List<ThreadMatcher.NativeThread> threads = new ArrayList<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
            for (Path task : tasks) {
                int tid;
                try {
                    tid = Integer.parseInt(task.getFileName().toString());
                } catch (NumberFormatException e) {
                    continue;
                }
                byte[] comm;
                try {
                    comm = Files.readAllBytes(task.resolve("comm"));
                } catch (IOException e) {
                    continue;
                }
                int length = comm.length > 0 && comm[comm.length - 1] == '\n' ? comm.length - 1 : comm.length;
                threads.add(new ThreadMatcher.NativeThread(tid, Arrays.copyOf(comm, length)));
            }
        }
        return threads;
    }

    /**
     * The first field of {@code schedstat}: the kernel's sum_exec_runtime in ns, the same clock
     * ThreadMXBean.getThreadCpuTime reads, but updated for a running thread only at scheduler ticks.
     * -1 if the thread is gone or the kernel keeps no schedstat.
     */
    static long cpuTimeNs(int tid) {
        try {
            byte[] b = Files.readAllBytes(TASKS.resolve(Integer.toString(tid)).resolve("schedstat"));
            long ns = 0;
            int i = 0;
            for (; i < b.length && b[i] >= '0' && b[i] <= '9'; i++) {
                ns = ns * 10 + (b[i] - '0');
            }
            return i > 0 ? ns : -1;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
