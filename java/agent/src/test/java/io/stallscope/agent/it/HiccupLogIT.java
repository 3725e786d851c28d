package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import io.stallscope.agent.it.apps.IdleApp;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The .hlog as HdrHistogram's own HistogramLogReader and HistogramLogProcessor read it: from a JVM that
 * was frozen with SIGSTOP (the freeze is the log's largest hiccup, and the log covers the run), and from
 * a JVM killed with SIGKILL (every interval up to the kill is readable).
 */
class HiccupLogIT {
    private static final long MS = 1_000_000L;
    private static final long STOP_NS = 200 * MS;

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void killedJvmLeavesAReadableLogAndAHeartbeatTheNextAgentSweeps(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        Path hlog = dir.resolve("killed.hlog");
        Path heartbeat;
        long killedPid;
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString()).named("killed")
                .agent("interval=100ms,log=" + hlog).start(IdleApp.class)) {
            killedPid = jvm.pid();
            heartbeat = runtimeDir.resolve("stallscope-" + killedPid + ".heartbeat");
            HeartbeatView.await(heartbeat, Duration.ofSeconds(20), jvm).awaitState(HeartbeatView.RUNNING,
                    Duration.ofSeconds(20));
            Thread.sleep(1000);
            Proc.kill("KILL", killedPid);
            jvm.awaitExit(Duration.ofSeconds(20));
        }
        assertTrue(HiccupLogFile.read(hlog).intervals.size() >= 5, "intervals flushed before SIGKILL");
        assertTrue(Files.exists(heartbeat), "a killed JVM leaves its heartbeat behind");
        assertTrue(!Files.exists(Path.of("/proc/" + killedPid)), "and its pid is gone: the file is stale");

        try (TargetJvm next = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString()).named("next")
                .agent("log=" + dir.resolve("next.hlog")).start(IdleApp.class)) {
            HeartbeatView.await(runtimeDir.resolve("stallscope-" + next.pid() + ".heartbeat"), Duration.ofSeconds(20), next);
            assertTrue(!Files.exists(heartbeat), "the next agent in the directory removed the stale heartbeat");
            assertTrue(!Files.exists(runtimeDir.resolve("stallscope-" + killedPid + ".threads")),
                    "and the stale thread table");
            next.exitNormally();
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void sigstopPauseShowsInTheLogAsReadByHdrHistogram(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        Path hlog = dir.resolve("hiccups.hlog");
        long stoppedNs;
        long exitRequestedNs;
        long startNs;
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent("resolution=1ms,interval=1s,log=" + hlog).start(IdleApp.class)) {
            HeartbeatView hb = HeartbeatView.await(runtimeDir.resolve("stallscope-" + jvm.pid() + ".heartbeat"),
                    Duration.ofSeconds(20), jvm);
            hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));
            startNs = hb.startNs();
            Thread.sleep(1200);

            // Timed from the moment kill -STOP has returned to the moment kill -CONT is started, so the
            // freeze is at least that long; 2 ms more because the hiccup is the stretched sleep less the
            // shortest sleep (about one resolution), which the freeze may have partly overlapped.
            Proc.kill("STOP", jvm.pid());
            long frozen = System.nanoTime();
            while (System.nanoTime() - frozen < STOP_NS + 2 * MS) {
                Thread.sleep(1);
            }
            stoppedNs = System.nanoTime() - frozen;
            Proc.kill("CONT", jvm.pid());

            Thread.sleep(1500);
            exitRequestedNs = System.nanoTime();
            jvm.exitNormally();
        }

        HiccupLogFile log = HiccupLogFile.read(hlog);
        Histogram total = log.total();
        long maxNs = total.getMaxValue();
        System.out.println(jdk + ": max hiccup " + maxNs / 1e6 + " ms for a SIGSTOP held " + stoppedNs / 1e6
                + " ms; " + log.intervals.size() + " intervals, " + total.getTotalCount() + " values, p50 "
                + total.getValueAtPercentile(50) / 1e6 + " ms");
        assertTrue(maxNs >= STOP_NS && maxNs <= 2 * STOP_NS + 50 * MS,
                "max hiccup " + maxNs / 1e6 + " ms for a SIGSTOP of " + stoppedNs / 1e6 + " ms (200 ms asked)");

        double runSec = (exitRequestedNs - startNs) / 1e9;
        int expectedIntervals = (int) Math.ceil(runSec); // 1 s intervals, the last one partial
        assertTrue(Math.abs(log.intervals.size() - expectedIntervals) <= 2,
                log.intervals.size() + " intervals for a run of " + runSec + " s at 1 s per interval");
        for (int i = 1; i < log.intervals.size(); i++) {
            assertEquals(log.intervals.get(i - 1).endSec, log.intervals.get(i).startSec, 0.0015,
                    "interval " + i + " starts where the previous one ended");
        }
        assertEquals(0.0, log.intervals.get(0).startSec, 0.0015, "the first interval starts at StartTime");
        double loggedSec = log.intervals.get(log.intervals.size() - 1).endSec;
        assertTrue(loggedSec > runSec - 0.5 && loggedSec < runSec + 2, "log covers " + loggedSec + " s of " + runSec);

        // One value per resolution of run time, ticks missed in the freeze included (coordinated
        // omission correction); sleeps overshoot a little, so somewhat fewer.
        long expectedCount = (long) (runSec * 1000);
        assertTrue(total.getTotalCount() > expectedCount / 2 && total.getTotalCount() < expectedCount * 6 / 5,
                total.getTotalCount() + " values for " + expectedCount + " ms of run time at 1 ms");
        assertTrue(total.getValueAtPercentile(50) < 5 * MS,
                "median hiccup of an idle JVM: " + total.getValueAtPercentile(50) / 1e6 + " ms");

        HiccupLogFile.Processed processed = log.process(dir);
        assertEquals(log.intervals.size(), processed.intervalLines, "HistogramLogProcessor sees every interval");
        assertEquals(total.getTotalCount(), processed.totalCount, "HistogramLogProcessor's total count");
        // Both are the max's bucket, at the histogram's 2 significant digits: to within 1%.
        assertEquals(maxNs / 1e6, processed.maxMs, maxNs / 1e6 / 100, "HistogramLogProcessor's max (ms)");
    }
}
