package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import io.stallscope.agent.it.apps.QuickApp;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A bad option costs the application nothing: one stderr line names the option and what is allowed,
 * the agent does not start (no heartbeat), and the application runs and exits 0.
 */
class BadOptionsIT {
    @TempDir
    Path dir;

    static Stream<Arguments> badOptions() {
        String[][] cases = {
            {"resolution=abc", "resolution=abc is not a duration (use e.g. 1ms, 500us; units ns, us, ms, s; from 1us to 1s)"},
            {"resolution=0ms", "resolution=0ms is out of range (use from 1us to 1s)"},
            {"resolution", "resolution needs a duration (use e.g. resolution=1ms"},
            {"interval=5", "interval=5 is not a duration (use e.g. 5s, 500ms"},
            {"interval=200ms,resolution=500ms", "interval=200ms is shorter than resolution=500ms"},
            {"delay=-1s", "delay=-1s is not a duration (use e.g. 0s, 30s"},
            {"frequency=3", "frequency=3 is not an option (options: resolution, interval, delay, log, heartbeat, help, stop)"},
            {"resolution=1ms,resolution=2ms", "resolution is given twice"},
            {"log=", "log needs a file path (use e.g. log="},
            {"log=/nonexistent-dir/h.hlog", "log=/nonexistent-dir/h.hlog cannot be written"},
            {"help=yes", "help=yes takes no value"},
            {"stop", "stop only stops an agent in a running JVM"},
        };
        List<Arguments> args = new ArrayList<>();
        for (Jdk jdk : Jdk.values()) {
            for (String[] c : cases) {
                args.add(Arguments.of(jdk, c[0], c[1]));
            }
        }
        return args.stream();
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("badOptions")
    void badOptionGivesOneLineAndTheAppRuns(Jdk jdk, String options, String expected) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent(options).start(QuickApp.class)) {
            assertEquals(0, jvm.awaitExit(Duration.ofSeconds(30)), "exit status" + jvm.describe());
            assertEquals(List.of("app ran"), jvm.stdoutLines(), "the application ran");
            List<String> err = jvm.stderrLines();
            assertEquals(1, err.size(), "one stderr line" + jvm.describe());
            String line = err.get(0);
            assertTrue(line.startsWith("stallscope-agent: "), line);
            assertTrue(line.contains(expected), "'" + line + "' should contain '" + expected + "'");
            assertTrue(line.endsWith("; the agent is not started"), line);
            try (Stream<Path> files = Files.list(runtimeDir)) {
                assertEquals(0, files.count(), "no heartbeat or thread table");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void helpPrintsUsageAndDoesNotStart(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent("help").start(QuickApp.class)) {
            assertEquals(0, jvm.awaitExit(Duration.ofSeconds(30)), "exit status" + jvm.describe());
            assertEquals(List.of("app ran"), jvm.stdoutLines());
            String usage = String.join("\n", jvm.stderrLines());
            assertTrue(usage.startsWith("stallscope-agent 0.1.0: "), usage);
            for (String option : List.of("resolution=", "interval=", "delay=", "log=", "heartbeat=", "help", "stop")) {
                assertTrue(usage.contains("  " + option), "usage explains " + option + ":\n" + usage);
            }
            try (Stream<Path> files = Files.list(runtimeDir)) {
                assertEquals(0, files.count(), "help starts nothing");
            }
        }
    }
}
