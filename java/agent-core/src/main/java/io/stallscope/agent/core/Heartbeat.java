package io.stallscope.agent.core;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;

/**
 * The heartbeat: a 4096-byte memory-mapped file the sidecar polls to tell a live hiccup meter from a
 * stopped world. Layout and reading rules: docs/heartbeat.md. Invariants: the file appears under its
 * name only with magic, version, pid, proc_starttime, resolution, interval and delay written; start_ns,
 * start_epoch_ms and meter_tid are written before state becomes running; every tick_count is published
 * (release) after the last_tick_ns it belongs to; a tick costs two stores and no system call.
 */
final class Heartbeat {
    static final int SIZE = 4096;
    static final byte[] MAGIC = "STSCPHB1".getBytes(StandardCharsets.US_ASCII);
    static final int VERSION = 1;

    static final int STATE_STARTING = 0;
    static final int STATE_RUNNING = 1;
    static final int STATE_STOPPED = 2;
    static final int STATE_EXITED = 3;

    static final int OFF_MAGIC = 0;
    static final int OFF_VERSION = 8;
    static final int OFF_PID = 12;
    static final int OFF_PROC_STARTTIME = 16;
    static final int OFF_RESOLUTION_NS = 24;
    static final int OFF_LAST_TICK_NS = 32;
    static final int OFF_TICK_COUNT = 40;
    static final int OFF_STATE = 48;
    static final int OFF_METER_TID = 52;
    static final int OFF_START_NS = 56;
    static final int OFF_START_EPOCH_MS = 64;
    static final int OFF_INTERVAL_NS = 72;
    static final int OFF_DELAY_NS = 80;

    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private final Path path;
    private final MappedByteBuffer map;
    /** Only the meter thread ticks, so the count lives here and the file is never read back. */
    private long ticks;

    private Heartbeat(Path path, MappedByteBuffer map) {
        this.path = path;
        this.map = map;
    }

    static Heartbeat create(Path path, long pid, long procStartTime, long resolutionNs, long intervalNs,
            long delayNs) throws IOException {
        // Built under a temporary name and renamed, so a reader never sees a half-written header.
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        MappedByteBuffer map;
        try (FileChannel channel = FileChannel.open(tmp,
                EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
            map = channel.map(FileChannel.MapMode.READ_WRITE, 0, SIZE);
        }
        try {
            for (int i = 0; i < MAGIC.length; i++) {
                map.put(OFF_MAGIC + i, MAGIC[i]);
            }
            INTS.set(map, OFF_VERSION, VERSION);
            INTS.set(map, OFF_PID, (int) pid);
            LONGS.set(map, OFF_PROC_STARTTIME, procStartTime);
            LONGS.set(map, OFF_RESOLUTION_NS, resolutionNs);
            LONGS.set(map, OFF_INTERVAL_NS, intervalNs);
            LONGS.set(map, OFF_DELAY_NS, delayNs);
            INTS.setRelease(map, OFF_STATE, STATE_STARTING);
            Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        return new Heartbeat(path, map);
    }

    Path path() {
        return path;
    }

    /** Written by the meter thread as it starts, while the state is still starting. */
    void meterTid(int tid) {
        INTS.setOpaque(map, OFF_METER_TID, tid);
    }

    /** Ends the start delay: the header is complete, then the state says running. */
    void running(long startNs, long startEpochMs) {
        LONGS.set(map, OFF_START_NS, startNs);
        LONGS.set(map, OFF_START_EPOCH_MS, startEpochMs);
        // A reader that sees running and no tick yet still gets a meaningful age for the meter.
        LONGS.setOpaque(map, OFF_LAST_TICK_NS, startNs);
        INTS.setRelease(map, OFF_STATE, STATE_RUNNING);
    }

    /** One meter wake-up; {@code nowNs} is System.nanoTime() (CLOCK_MONOTONIC on Linux). */
    void tick(long nowNs) {
        LONGS.setOpaque(map, OFF_LAST_TICK_NS, nowNs);
        LONGS.setRelease(map, OFF_TICK_COUNT, ++ticks);
    }

    void state(int state) {
        INTS.setRelease(map, OFF_STATE, state);
    }

    /**
     * Sets the final state and removes the file. A reader that still has it mapped sees the state; a
     * reader that opens the path afterwards finds nothing.
     */
    void finish(int finalState) {
        state(finalState);
        try {
            Files.deleteIfExists(path);
        } catch (IOException | RuntimeException e) {
            AgentLog.failure("could not remove " + path, e);
        }
    }
}
