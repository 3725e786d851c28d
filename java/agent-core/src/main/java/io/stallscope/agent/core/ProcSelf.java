package io.stallscope.agent.core;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Facts about processes and the calling thread that only Linux {@code /proc} tells: a process's start
 * time in clock ticks since boot (which, with the pid, names one process incarnation) and the calling
 * thread's native tid. Invariant: never throws; an unknown value is {@code -1}.
 */
final class ProcSelf {
    private static final Path THREAD_SELF = Paths.get("/proc/thread-self");

    private ProcSelf() {
    }

    static long pid() {
        return ProcessHandle.current().pid();
    }

    /** Field 22 of {@code /proc/<pid>/stat}, or -1 if the process does not exist. */
    static long startTime(long pid) {
        try {
            return startTimeFromStat(new String(Files.readAllBytes(Paths.get("/proc", Long.toString(pid), "stat")),
                    StandardCharsets.ISO_8859_1));
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    static long startTimeFromStat(String stat) {
        // The command name (field 2) may hold spaces and parentheses; the fields after its closing
        // parenthesis are fixed, starting with field 3.
        int close = stat.lastIndexOf(')');
        if (close < 0) {
            return -1;
        }
        String[] fields = stat.substring(close + 1).trim().split(" ");
        final int field22 = 22 - 3;
        return fields.length > field22 ? Long.parseLong(fields[field22]) : -1;
    }

    static boolean exists(long pid) {
        return Files.exists(Paths.get("/proc", Long.toString(pid)));
    }

    /** The calling thread's native tid from {@code /proc/thread-self -> <pid>/task/<tid>}, or -1. */
    static int currentTid() {
        try {
            String target = Files.readSymbolicLink(THREAD_SELF).toString();
            return Integer.parseInt(target.substring(target.lastIndexOf('/') + 1));
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
