package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.stallscope.agent.it.apps.IdleApp;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The agent's promises to its host, checked from inside the host: the meter allocates nothing per
 * tick (HotSpot's per-thread allocation counter moves by less than one byte per tick over ten thousand
 * ticks, where any object per tick would add at least eight), and rebuilding
 * the thread table while threads start, end and rename brings the JVM to no safepoint of its own
 * (no thread dump or stack-trace operation in -Xlog:safepoint).
 */
class QuietnessIT {
    private static final Pattern OPERATION = Pattern.compile("Safepoint \"([A-Za-z0-9_]+)\"");
    /** VM operations a careless thread table would cause (Thread.getAllStackTraces, dumps, deadlock checks). */
    private static final List<String> FORBIDDEN =
            List.of("ThreadDump", "GetAllStackTraces", "GetThreadListStackTraces", "FindDeadlocks", "PrintThreads");

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void noAllocationPerTickAndNoSafepointsOfItsOwn(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        Path safepoints = dir.resolve("safepoint.log");
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .jvmArgs("-Xlog:safepoint:file=" + safepoints + ":uptime")
                .agent("resolution=100us,log=" + dir.resolve("h.hlog")).start(IdleApp.class)) {
            jvm.awaitLine("ready", Duration.ofSeconds(30));
            HeartbeatView hb = HeartbeatView.await(runtimeDir.resolve("stallscope-" + jvm.pid() + ".heartbeat"),
                    Duration.ofSeconds(20), jvm);
            // Until C2 has compiled the tick, the interpreter allocates: JDK 21+'s Thread.sleep creates a
            // JFR event object per call that only escape analysis removes. So first wait for the counter
            // to stand still for half a second; a meter that allocates per tick never gets past this.
            awaitNoAllocation(jvm, Duration.ofSeconds(40));

            long allocatedBefore = allocated(jvm);
            long ticksBefore = hb.tickCount();
            Thread.sleep(2000);
            long allocatedAfter = allocated(jvm);
            long ticks = hb.tickCount() - ticksBefore;
            long bytes = allocatedAfter - allocatedBefore;
            System.out.println(jdk + ": meter thread allocated " + bytes + " bytes over " + ticks + " ticks");
            assertTrue(ticks > 1000, ticks + " ticks in 2 s at 100 us");
            assertTrue(bytes < ticks, bytes + " bytes allocated by the meter thread over " + ticks + " ticks");

            Path threads = runtimeDir.resolve("stallscope-" + jvm.pid() + ".threads");
            long snapshotBefore = ThreadTableFile.read(threads).snapshotNs;
            jvm.ask("churn", "churned");
            Thread.sleep(500);
            assertNotEquals(snapshotBefore, ThreadTableFile.read(threads).snapshotNs, "the churn rebuilt the table");
            jvm.exitNormally();
        }

        Set<String> operations = new TreeSet<>();
        Matcher m = OPERATION.matcher(Files.readString(safepoints));
        while (m.find()) {
            operations.add(m.group(1));
        }
        for (String op : FORBIDDEN) {
            assertTrue(!operations.contains(op), "safepoint operation " + op + " seen; all: " + operations);
        }
    }

    private static void awaitNoAllocation(TargetJvm jvm, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        long previous = allocated(jvm);
        while (System.nanoTime() < deadline) {
            Thread.sleep(500);
            long now = allocated(jvm);
            if (now == previous) {
                return;
            }
            previous = now;
        }
        fail("the meter thread kept allocating for " + timeout + " (now " + previous + " bytes)");
    }

    private static long allocated(TargetJvm jvm) throws Exception {
        String reply = jvm.ask("alloc stallscope-hiccup-meter", "alloc ");
        long bytes = Long.parseLong(reply.substring("alloc ".length()));
        assertTrue(bytes >= 0, "meter thread found" + jvm.describe());
        return bytes;
    }
}
