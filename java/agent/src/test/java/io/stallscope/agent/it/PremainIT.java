package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import io.stallscope.agent.it.apps.IdleApp;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The agent loaded with -javaagent: the heartbeat follows docs/heartbeat.md from start to exit. */
class PremainIT {
    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void heartbeatFollowsTheLayoutFromDelayToExit(Jdk jdk) throws Exception {
        Path runtimeDir = runtimeDir();
        Path deadPidFile = runtimeDir.resolve("stallscope-999999999.heartbeat");
        Path deadPidThreads = runtimeDir.resolve("stallscope-999999999.threads");
        Path reusedPidFile = runtimeDir.resolve("stallscope-" + ProcessHandle.current().pid() + ".heartbeat");
        Path unrelated = runtimeDir.resolve("stallscope-notes.txt");
        Files.write(deadPidFile, new byte[4096]);
        Files.writeString(deadPidThreads, "# stallscope threads v1 999999999 1\n");
        Files.write(reusedPidFile, heartbeatHeaderWithStartTime(1)); // this test JVM did not start at tick 1
        Files.writeString(unrelated, "not ours");

        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent("resolution=1ms,interval=1s,delay=2s,log=" + dir + "/hiccups-%pid.hlog")
                .start(IdleApp.class)) {
            Path file = runtimeDir.resolve("stallscope-" + jvm.pid() + ".heartbeat");
            HeartbeatView hb = HeartbeatView.await(file, Duration.ofSeconds(20), jvm);

            // During the delay: the header is there, the meter is not.
            assertEquals(HeartbeatView.STARTING, hb.state(), "state during the 2 s delay");
            assertEquals(0, hb.tickCount(), "ticks during the delay");
            assertEquals(0, hb.startNs(), "start_ns during the delay");
            assertEquals("STSCPHB1", hb.magic());
            assertEquals(1, hb.version());
            assertEquals(jvm.pid(), hb.pid());
            assertEquals(Proc.startTime(jvm.pid()), hb.procStartTime(), "proc_starttime is /proc/<pid>/stat field 22");
            assertEquals(1_000_000L, hb.resolutionNs());
            assertEquals(1_000_000_000L, hb.intervalNs());
            assertEquals(2_000_000_000L, hb.delayNs());
            assertTrue(hb.reservedIsZero(), "bytes 88..4095 are zero");
            assertEquals("rw-------", Proc.mode(file), "heartbeat mode");

            hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
            assertEquals("stallscope-hicc", Proc.comm(jvm.pid(), hb.meterTid()), "meter_tid names the meter thread");
            assertTrue(Math.abs(hb.startEpochMs() - System.currentTimeMillis()) < 60_000, "start_epoch_ms is now-ish");
            hb.awaitTicks(10, Duration.ofSeconds(20));
            long[] first = hb.tick();
            Thread.sleep(300);
            long[] second = hb.tick();
            long now = System.nanoTime();
            assertTrue(second[0] > first[0], "tick_count grows: " + first[0] + " then " + second[0]);
            assertTrue(second[1] >= hb.startNs(), "last_tick_ns after start_ns");
            assertTrue(Math.abs(now - second[1]) < 1_000_000_000L,
                    "last_tick_ns is on this JVM's System.nanoTime() clock: " + second[1] + " vs " + now);

            Path threads = runtimeDir.resolve("stallscope-" + jvm.pid() + ".threads");
            awaitFile(threads);
            assertEquals("rw-------", Proc.mode(threads), "thread table mode");
            ThreadTableFile table = ThreadTableFile.read(threads);
            assertEquals(jvm.pid(), table.pid);
            assertEquals("self", table.named("stallscope-hiccup-meter").match);
            assertEquals(hb.meterTid(), table.named("stallscope-hiccup-meter").tid);
            assertEquals("self", table.named("stallscope-thread-table").match);
            assertFalse(table.named("main").daemon);

            assertFalse(Files.exists(deadPidFile), "stale heartbeat of a dead pid removed");
            assertFalse(Files.exists(deadPidThreads), "stale thread table of a dead pid removed");
            assertFalse(Files.exists(reusedPidFile), "heartbeat of a reused pid (other start time) removed");
            assertTrue(Files.exists(unrelated), "files not named like ours are left alone");

            jvm.exitNormally();
            assertEquals(HeartbeatView.EXITED, hb.state(), "state after a normal exit, seen through the mapping");
            assertFalse(Files.exists(file), "heartbeat removed at exit");
            assertFalse(Files.exists(threads), "thread table removed at exit");
            HiccupLogFile log = HiccupLogFile.read(dir.resolve("hiccups-" + jvm.pid() + ".hlog"));
            assertFalse(log.intervals.isEmpty(), "intervals in the log");
            assertEquals(hb.startNs(), log.headerField("start_ns"), "the log names the heartbeat's start_ns");
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void defaultsAreDevShmAndTheWorkingDirectory(Jdk jdk) throws Exception {
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", dir.resolve("missing").toString())
                .agent("").start(IdleApp.class)) {
            Path file = Paths.get("/dev/shm/stallscope-" + jvm.pid() + ".heartbeat");
            try {
                HeartbeatView hb = HeartbeatView.await(file, Duration.ofSeconds(20), jvm);
                hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
                assertEquals(1_000_000L, hb.resolutionNs(), "default resolution");
                assertEquals(5_000_000_000L, hb.intervalNs(), "default interval");
                assertEquals(0, hb.delayNs(), "default delay");
                jvm.exitNormally();
                assertFalse(Files.exists(file), "heartbeat removed at exit");
            } finally {
                Files.deleteIfExists(file);
                Files.deleteIfExists(Paths.get("/dev/shm/stallscope-" + jvm.pid() + ".threads"));
            }
            String logName = "stallscope-" + jvm.pid() + "-";
            try (Stream<Path> files = Files.list(dir)) {
                List<Path> logs = files.filter(p -> p.getFileName().toString().startsWith(logName)
                        && p.getFileName().toString().matches(".*-[0-9]{8}-[0-9]{6}\\.hlog")).collect(Collectors.toList());
                assertEquals(1, logs.size(), "one stallscope-<pid>-<yyyyMMdd-HHmmss>.hlog in the working directory");
                assertFalse(HiccupLogFile.read(logs.get(0)).intervals.isEmpty(), "the last partial interval is logged");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void heartbeatOptionPlacesHeartbeatAndThreadTable(Jdk jdk) throws Exception {
        Path chosen = Files.createDirectory(dir.resolve("chosen"));
        Path runtimeDir = runtimeDir();
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent("heartbeat=" + chosen + "/beat-%pid.hb,log=" + dir.resolve("h.hlog")).start(IdleApp.class)) {
            Path file = chosen.resolve("beat-" + jvm.pid() + ".hb");
            HeartbeatView hb = HeartbeatView.await(file, Duration.ofSeconds(20), jvm);
            hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
            Path threads = chosen.resolve("beat-" + jvm.pid() + ".threads");
            awaitFile(threads);
            assertEquals("self", ThreadTableFile.read(threads).named("stallscope-hiccup-meter").match);
            try (Stream<Path> files = Files.list(runtimeDir)) {
                assertEquals(0, files.count(), "nothing in the default directory");
            }
            jvm.exitNormally();
            assertFalse(Files.exists(file), "heartbeat removed at exit");
            assertFalse(Files.exists(threads), "thread table removed at exit");
        }
    }

    private Path runtimeDir() throws IOException {
        return Files.createDirectory(dir.resolve("run"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    }

    private static byte[] heartbeatHeaderWithStartTime(long startTime) {
        ByteBuffer b = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
        b.put("STSCPHB1".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        b.putInt(8, 1).putInt(12, (int) ProcessHandle.current().pid()).putLong(16, startTime);
        return b.array();
    }

    private static void awaitFile(Path file) throws InterruptedException {
        for (int i = 0; i < 1000 && !Files.exists(file); i++) {
            Thread.sleep(10);
        }
        assertTrue(Files.exists(file), file + " exists");
    }
}
