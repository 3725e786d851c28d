package io.stallscope.agent.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Paths;
import java.util.List;

import org.junit.jupiter.api.Test;

/** The thread table's text: header, one tab-separated row per Java thread, escaped names. */
class ThreadTableTest {
    @Test
    void rendersRowsWithEscapedNames() {
        List<ThreadMatcher.Row> rows = List.of(
                new ThreadMatcher.Row(101, new ThreadMatcher.JavaThreadInfo(1, "main", false), ThreadMatcher.Match.CPUTIME),
                new ThreadMatcher.Row(0, new ThreadMatcher.JavaThreadInfo(7, "a\tb\\c\nd", true), ThreadMatcher.Match.AMBIGUOUS));
        assertEquals("# stallscope threads v1 42 123456789\n"
                + "101\t1\tcputime\t0\tmain\n"
                + "0\t7\tambiguous\t1\ta\\tb\\\\c\\nd\n", ThreadTable.render(42, 123456789L, rows));
    }

    @Test
    void liesBesideTheHeartbeatWithItsExtensionReplaced() {
        assertEquals(Paths.get("/dev/shm/stallscope-7.threads"),
                ThreadTable.besideHeartbeat(Paths.get("/dev/shm/stallscope-7.heartbeat")));
        assertEquals(Paths.get("/tmp/hb.threads"), ThreadTable.besideHeartbeat(Paths.get("/tmp/hb")));
        assertEquals(Paths.get("/tmp/.hb.threads"), ThreadTable.besideHeartbeat(Paths.get("/tmp/.hb")));
    }
}
