package io.stallscope.agent.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;

/** What the tests read from /proc and the file system to check the agent from outside. */
final class Proc {
    private Proc() {
    }

    /** Field 22 of /proc/<pid>/stat: the process start time in clock ticks since boot. */
    static long startTime(long pid) throws IOException {
        String stat = Files.readString(Paths.get("/proc/" + pid + "/stat"), StandardCharsets.ISO_8859_1);
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(fields[22 - 3]);
    }

    /** The native name of a thread, as raw bytes without the newline, decoded as UTF-8. */
    static String comm(long pid, long tid) throws IOException {
        return Files.readString(Paths.get("/proc/" + pid + "/task/" + tid + "/comm"), StandardCharsets.UTF_8).strip();
    }

    static String mode(Path file) throws IOException {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(file));
    }

    static void kill(String signal, long pid) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
        if (kill.waitFor() != 0) {
            throw new IOException("kill -" + signal + " " + pid + " failed");
        }
    }
}
