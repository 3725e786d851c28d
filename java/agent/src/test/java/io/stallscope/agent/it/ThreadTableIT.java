package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import io.stallscope.agent.it.apps.ThreadNamesApp;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The thread table maps Java threads to native tids right, checked against the tid each thread read
 * from /proc/thread-self itself: unique 15-byte prefixes by native name, a shared prefix (one thread
 * sleeping, one spinning) and main (native name "java") by CPU time, the agent's threads by their own
 * account; names with tab, backslash and non-ASCII characters come back intact.
 */
class ThreadTableIT {
    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void everyThreadGetsItsOwnTid(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .agent("log=" + dir.resolve("h.hlog")).start(ThreadNamesApp.class)) {
            jvm.awaitLine("ready", Duration.ofSeconds(30));
            Map<String, Long> truth = new HashMap<>();
            for (String line : jvm.stdoutLines()) {
                if (line.startsWith("tid ")) {
                    String[] f = line.substring(4).split("\t", 2);
                    truth.put(ThreadTableFile.unescape(f[1]), Long.parseLong(f[0]));
                }
            }
            assertEquals(ThreadNamesApp.NAMES.length + 1, truth.size(), "threads that reported their tid" + jvm.describe());

            Path threads = runtimeDir.resolve("stallscope-" + jvm.pid() + ".threads");
            ThreadTableFile table = awaitTableWith(threads, truth.keySet(), jvm);
            for (Map.Entry<String, Long> t : truth.entrySet()) {
                ThreadTableFile.Row row = table.named(t.getKey());
                assertEquals((long) t.getValue(), row.tid, "tid of '" + t.getKey() + "' (" + row.match + ") in " + table.rows);
            }
            for (String name : ThreadNamesApp.NAMES) {
                String comm = Proc.comm(jvm.pid(), truth.get(name));
                byte[] prefix = name.getBytes(StandardCharsets.UTF_8);
                assertEquals(new String(prefix, 0, Math.min(15, prefix.length), StandardCharsets.UTF_8), comm,
                        "HotSpot's native name of '" + name + "'");
            }

            assertEquals("cputime", table.named("pool-1-thread-1").match, "shared prefix, sleeping");
            assertEquals("cputime", table.named("pool-1-thread-12").match, "shared prefix, spinning");
            assertNotEquals(table.named("pool-1-thread-1").tid, table.named("pool-1-thread-12").tid);
            assertEquals("comm", table.named("a-thread-name-of-forty-characters-123456").match);
            assertEquals("comm", table.named("tab\there").match);
            assertEquals("comm", table.named("back\\slash").match);
            assertEquals("comm", table.named("naïve-é-thread").match);
            assertEquals("cputime", table.named("main").match, "main's native name is the launcher's");
            assertEquals("self", table.named("stallscope-hiccup-meter").match);
            assertEquals("self", table.named("stallscope-hiccup-log").match);
            assertEquals("self", table.named("stallscope-thread-table").match);
            assertTrue(table.named("pool-1-thread-1").daemon);
            assertTrue(!table.named("main").daemon);

            Set<Long> tids = new HashSet<>();
            for (ThreadTableFile.Row row : table.rows) {
                if (!row.match.equals("ambiguous")) {
                    assertTrue(tids.add(row.tid), "tid " + row.tid + " given twice in " + table.rows);
                }
            }
            jvm.exitNormally();
        }
    }

    private static ThreadTableFile awaitTableWith(Path file, Set<String> names, TargetJvm jvm) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        String last = "no file";
        while (System.nanoTime() < deadline) {
            if (Files.exists(file)) {
                ThreadTableFile table = ThreadTableFile.read(file);
                Set<String> present = new HashSet<>();
                table.rows.forEach(r -> present.add(r.name));
                if (present.containsAll(names) && present.contains("stallscope-thread-table")) {
                    return table;
                }
                last = table.rows.toString();
            }
            Thread.sleep(50);
        }
        return fail("thread table " + file + " never listed " + names + "; last: " + last + jvm.describe());
    }
}
