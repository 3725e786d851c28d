package io.stallscope.agent.core;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Removes heartbeat and thread-table files left behind by JVMs that died without their shutdown hook
 * (SIGKILL, crash): files named {@code stallscope-<pid>.heartbeat} or {@code .threads} (or their
 * {@code .tmp}) whose pid no longer runs, or runs as another process (its start time differs from the
 * heartbeat's proc_starttime). Invariants: best effort, never throws; never touches this JVM's own files
 * or a live agent's, nor a file not named like ours.
 */
final class StaleFiles {
    private static final Pattern NAME = Pattern.compile("stallscope-([0-9]{1,10})\\.(heartbeat|threads)(\\.tmp)?");

    private StaleFiles() {
    }

    static void sweep(Path dir, long ownPid) {
        try {
            Map<Long, List<Path>> byPid = new LinkedHashMap<>();
            try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "stallscope-*")) {
                for (Path file : files) {
                    Matcher m = NAME.matcher(file.getFileName().toString());
                    if (m.matches()) {
                        byPid.computeIfAbsent(Long.parseLong(m.group(1)), k -> new ArrayList<>()).add(file);
                    }
                }
            }
            for (Map.Entry<Long, List<Path>> e : byPid.entrySet()) {
                long pid = e.getKey();
                if (pid != ownPid) {
                    sweepPid(dir, pid, e.getValue());
                }
            }
        } catch (IOException | RuntimeException e) {
            // Best effort: a directory we cannot list holds nothing we could remove.
        }
    }

    private static void sweepPid(Path dir, long pid, List<Path> files) {
        long startTime = ProcSelf.startTime(pid);
        if (startTime < 0) {
            deleteAll(files);
            return;
        }
        Path heartbeat = dir.resolve("stallscope-" + pid + ".heartbeat");
        long recorded = recordedStartTime(heartbeat);
        if (recorded >= 0 && recorded != startTime) {
            // The pid was reused: every file of the earlier process is stale, finished or not.
            deleteAll(files);
        } else if (recorded < 0 && !Files.exists(heartbeat)) {
            // A live agent writes its heartbeat before its thread table and removes it after, so a
            // thread table alone is stale; a .tmp may still be in the making and is left alone.
            for (Path file : files) {
                if (file.getFileName().toString().endsWith(".threads")) {
                    delete(file);
                }
            }
        }
    }

    /** proc_starttime from a heartbeat file, or -1 if it is missing or not a heartbeat. */
    private static long recordedStartTime(Path heartbeat) {
        try (FileChannel channel = FileChannel.open(heartbeat)) {
            ByteBuffer header = ByteBuffer.allocate(Heartbeat.OFF_PROC_STARTTIME + 8).order(ByteOrder.LITTLE_ENDIAN);
            while (header.hasRemaining() && channel.read(header) >= 0) {
                // read until the header is complete or the file ends
            }
            if (header.hasRemaining()) {
                return -1;
            }
            byte[] magic = Arrays.copyOfRange(header.array(), Heartbeat.OFF_MAGIC, Heartbeat.OFF_MAGIC + 8);
            return Arrays.equals(magic, Heartbeat.MAGIC) ? header.getLong(Heartbeat.OFF_PROC_STARTTIME) : -1;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    private static void deleteAll(List<Path> files) {
        for (Path file : files) {
            delete(file);
        }
    }

    private static void delete(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException | RuntimeException e) {
            // Another user's file, or already gone.
        }
    }
}
