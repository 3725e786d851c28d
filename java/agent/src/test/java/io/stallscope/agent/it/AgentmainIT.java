package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

import com.sun.tools.attach.VirtualMachine;

import io.stallscope.agent.it.apps.IdleApp;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The agent loaded into a running JVM with the attach API, as the sidecar does: start, a second start
 * that is refused, {@code stop}, and a start again, all while the application keeps running.
 */
class AgentmainIT {
    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void attachStartsTheMeterAndStopRemovesIt(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString()).start(IdleApp.class)) {
            jvm.awaitLine("ready", Duration.ofSeconds(30));
            Path heartbeat = runtimeDir.resolve("stallscope-" + jvm.pid() + ".heartbeat");
            Path threads = runtimeDir.resolve("stallscope-" + jvm.pid() + ".threads");
            Path firstLog = dir.resolve("first.hlog");
            String options = "resolution=1ms,interval=1s,log=" + firstLog;

            attach(jvm, options);
            HeartbeatView hb = HeartbeatView.await(heartbeat, Duration.ofSeconds(20), jvm);
            hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
            hb.awaitTicks(100, Duration.ofSeconds(20));
            assertEquals(jvm.pid(), hb.pid());
            long[] tick = hb.tick();
            assertTrue(Math.abs(System.nanoTime() - tick[1]) < 1_000_000_000L, "last_tick_ns is recent");
            assertEquals("rw-------", Proc.mode(heartbeat));

            attach(jvm, options);
            List<String> refusals = jvm.stderrLines().stream().filter(l -> l.contains("already running"))
                    .collect(Collectors.toList());
            assertEquals(1, refusals.size(), "one line for a second start" + jvm.describe());
            assertTrue(refusals.get(0).startsWith("stallscope-agent: "), refusals.get(0));

            attach(jvm, "stop");
            assertEquals(HeartbeatView.STOPPED, hb.state(), "state after stop");
            assertFalse(Files.exists(heartbeat), "heartbeat removed by stop");
            assertFalse(Files.exists(threads), "thread table removed by stop");
            assertEquals("pong", jvm.ask("ping", "pong"), "the application runs on after stop");
            HiccupLogFile log = HiccupLogFile.read(firstLog);
            assertFalse(log.intervals.isEmpty(), "stop finished the log");
            long stoppedTicks = hb.tickCount();
            Thread.sleep(100);
            assertEquals(stoppedTicks, hb.tickCount(), "no ticks after stop");

            attach(jvm, "resolution=1ms,interval=1s,log=" + dir.resolve("second.hlog"));
            HeartbeatView again = HeartbeatView.await(heartbeat, Duration.ofSeconds(20), jvm);
            again.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
            again.awaitTicks(10, Duration.ofSeconds(20));

            jvm.exitNormally();
            assertEquals(HeartbeatView.EXITED, again.state());
            assertFalse(Files.exists(heartbeat), "heartbeat removed at exit");
            assertTrue(jvm.stderrLines().stream().noneMatch(l -> l.contains("not started") || l.contains("stopped")),
                    "no agent failures" + jvm.describe());
        }
    }

    static void attach(TargetJvm jvm, String options) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(Long.toString(jvm.pid()));
        try {
            vm.loadAgent(TargetJvm.AGENT_JAR.toString(), options);
        } finally {
            vm.detach();
        }
    }
}
