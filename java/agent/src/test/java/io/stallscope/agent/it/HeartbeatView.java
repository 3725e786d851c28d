package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A reader of the heartbeat file written from docs/heartbeat.md alone, as the Rust sidecar reads it:
 * mapped read-only, fields little-endian, tick_count read with acquire before and after last_tick_ns.
 * It keeps the mapping, so it still sees the final state after the agent has removed the file.
 */
final class HeartbeatView {
    static final int SIZE = 4096;
    static final int STARTING = 0;
    static final int RUNNING = 1;
    static final int STOPPED = 2;
    static final int EXITED = 3;

    private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private final MappedByteBuffer map;

    private HeartbeatView(MappedByteBuffer map) {
        this.map = map;
    }

    /** Waits for the file to appear (it appears complete: the agent renames it into place). */
    static HeartbeatView await(Path file, Duration timeout, TargetJvm jvm) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!Files.exists(file)) {
            if (System.nanoTime() > deadline || !jvm.isAlive()) {
                fail("no heartbeat file " + file + " within " + timeout + jvm.describe());
            }
            Thread.sleep(10);
        }
        try (FileChannel channel = FileChannel.open(file)) {
            if (channel.size() != SIZE) {
                fail("heartbeat " + file + " has " + channel.size() + " bytes, not " + SIZE);
            }
            return new HeartbeatView(channel.map(FileChannel.MapMode.READ_ONLY, 0, SIZE));
        }
    }

    String magic() {
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) {
            b[i] = map.get(i);
        }
        return new String(b, StandardCharsets.US_ASCII);
    }

    int version() {
        return (int) INT.getAcquire(map, 8);
    }

    int pid() {
        return (int) INT.getAcquire(map, 12);
    }

    long procStartTime() {
        return (long) LONG.getAcquire(map, 16);
    }

    long resolutionNs() {
        return (long) LONG.getAcquire(map, 24);
    }

    long tickCount() {
        return (long) LONG.getAcquire(map, 40);
    }

    int state() {
        return (int) INT.getAcquire(map, 48);
    }

    int meterTid() {
        return (int) INT.getAcquire(map, 52);
    }

    long startNs() {
        return (long) LONG.getAcquire(map, 56);
    }

    long startEpochMs() {
        return (long) LONG.getAcquire(map, 64);
    }

    long intervalNs() {
        return (long) LONG.getAcquire(map, 72);
    }

    long delayNs() {
        return (long) LONG.getAcquire(map, 80);
    }

    boolean reservedIsZero() {
        for (int i = 88; i < SIZE; i++) {
            if (map.get(i) != 0) {
                return false;
            }
        }
        return true;
    }

    /** A consistent (tick_count, last_tick_ns) pair, read as docs/heartbeat.md prescribes. */
    long[] tick() {
        while (true) {
            long before = (long) LONG.getAcquire(map, 40);
            long last = (long) LONG.getAcquire(map, 32);
            long after = (long) LONG.getAcquire(map, 40);
            if (before == after) {
                return new long[] {before, last};
            }
        }
    }

    void awaitState(int state, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (state() != state) {
            if (System.nanoTime() > deadline) {
                fail("heartbeat state stayed " + state() + ", expected " + state + " within " + timeout);
            }
            Thread.sleep(10);
        }
    }

    /** Waits until at least {@code count} ticks are published. */
    void awaitTicks(long count, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (tickCount() < count) {
            if (System.nanoTime() > deadline) {
                fail("tick_count stayed at " + tickCount() + " (< " + count + ") for " + timeout);
            }
            Thread.sleep(10);
        }
    }
}
