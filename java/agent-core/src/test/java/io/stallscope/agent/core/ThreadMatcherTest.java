package io.stallscope.agent.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.stallscope.agent.core.ThreadMatcher.JavaThreadInfo;
import io.stallscope.agent.core.ThreadMatcher.Match;
import io.stallscope.agent.core.ThreadMatcher.NativeThread;
import io.stallscope.agent.core.ThreadMatcher.Row;

import org.junit.jupiter.api.Test;

/**
 * The matching rules on hand-made inputs, including the cases a real JVM rarely shows on demand
 * (unknown CPU times, identical CPU times). ThreadTableIT checks the same rules on real JVMs.
 */
class ThreadMatcherTest {
    private final List<JavaThreadInfo> threads = new ArrayList<>();
    private final List<NativeThread> natives = new ArrayList<>();
    private final Map<Long, Long> javaCpu = new HashMap<>();
    private final Map<Integer, Long> nativeCpu = new HashMap<>();
    private final Map<Long, Integer> self = new HashMap<>();

    private final ThreadMatcher.CpuClocks clocks = new ThreadMatcher.CpuClocks() {
        @Override
        public long[] javaThreadsNs(long[] ids) {
            long[] ns = new long[ids.length];
            for (int i = 0; i < ids.length; i++) {
                ns[i] = javaCpu.getOrDefault(ids[i], -1L);
            }
            return ns;
        }

        @Override
        public long nativeThreadNs(int tid) {
            return nativeCpu.getOrDefault(tid, -1L);
        }
    };

    private void java(long id, String name, long cpuNs) {
        threads.add(new JavaThreadInfo(id, name, false));
        javaCpu.put(id, cpuNs);
    }

    private void task(int tid, String comm, long cpuNs) {
        natives.add(new NativeThread(tid, comm.getBytes(StandardCharsets.UTF_8)));
        nativeCpu.put(tid, cpuNs);
    }

    private Map<String, Row> match() {
        Map<String, Row> byName = new HashMap<>();
        for (Row r : ThreadMatcher.match(threads, natives, self, clocks)) {
            byName.put(r.thread.name, r);
        }
        return byName;
    }

    private static void assertRow(Row row, int tid, Match match) {
        assertEquals(tid, row.tid, row.thread.name);
        assertEquals(match, row.match, row.thread.name);
    }

    @Test
    void nativeNameIsModifiedUtf8CutAtFifteenBytes() {
        assertArrayEquals("pool-1-thread-1".getBytes(StandardCharsets.UTF_8), ThreadMatcher.nativeName("pool-1-thread-12"));
        assertArrayEquals("naïve-é-threa".getBytes(StandardCharsets.UTF_8), ThreadMatcher.nativeName("naïve-é-thread"));
        assertArrayEquals(new byte[] {'a', (byte) 0xC0, (byte) 0x80, 'b'}, ThreadMatcher.nativeName("a\0b"));
        // A cut may split a character, as HotSpot's byte-wise truncation does.
        assertArrayEquals(new byte[] {'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', (byte) 0xC3},
                ThreadMatcher.nativeName("xxxxxxxxxxxxxxé"));
    }

    @Test
    void uniquePrefixesMatchByNameAndSharedOnesByCpuTime() {
        java(1, "main", 500_000_000L);
        java(20, "pool-1-thread-1", 3_000_000L);
        java(21, "pool-1-thread-12", 7_000_000L);
        java(22, "a-thread-name-of-forty-characters-123456", 1_000L);
        task(100, "java", 10_000_000L);          // the launcher's primordial thread
        task(101, "java", 500_000_000L);         // main
        task(102, "GC Thread#0", 40_000_000L);
        task(110, "pool-1-thread-1", 7_000_000L);
        task(111, "pool-1-thread-1", 3_000_000L);
        task(112, "a-thread-name-o", 1_000L);
        Map<String, Row> rows = match();
        assertRow(rows.get("pool-1-thread-1"), 111, Match.CPUTIME);
        assertRow(rows.get("pool-1-thread-12"), 110, Match.CPUTIME);
        assertRow(rows.get("a-thread-name-of-forty-characters-123456"), 112, Match.COMM);
        assertRow(rows.get("main"), 101, Match.CPUTIME);
    }

    @Test
    void selfReportedTidsWinOverNames() {
        java(5, "stallscope-hiccup-meter", 9L);
        java(6, "stallscope-hiccup-log", 9L);
        task(200, "stallscope-hicc", 9L);
        task(201, "stallscope-hicc", 9L);
        self.put(5L, 201);
        self.put(6L, 200);
        Map<String, Row> rows = match();
        assertRow(rows.get("stallscope-hiccup-meter"), 201, Match.SELF);
        assertRow(rows.get("stallscope-hiccup-log"), 200, Match.SELF);
    }

    @Test
    void aRunningThreadMatchesWithinOneSchedulerTick() {
        java(1, "worker-a-long-name-1", 50_000_000L);
        java(2, "worker-a-long-name-2", 900_000_000L);
        task(10, "worker-a-long-n", 50_000_000L);
        task(11, "worker-a-long-n", 896_000_000L); // schedstat trails by 4 ms: running, not yet ticked
        Map<String, Row> rows = match();
        assertRow(rows.get("worker-a-long-name-1"), 10, Match.CPUTIME);
        assertRow(rows.get("worker-a-long-name-2"), 11, Match.CPUTIME);
    }

    @Test
    void indistinguishableThreadsAreAmbiguousWithTheNearestGuess() {
        java(1, "twin-thread-name-1", 5_000_000L);
        java(2, "twin-thread-name-2", 5_000_000L);
        task(10, "twin-thread-nam", 5_000_000L);
        task(11, "twin-thread-nam", 5_000_000L);
        java(3, "no-cpu-times-thread-1", -1L);
        java(4, "no-cpu-times-thread-2", -1L);
        task(20, "no-cpu-times-th", -1L);
        task(21, "no-cpu-times-th", -1L);
        java(5, "vanished", 1_000L);
        Map<String, Row> rows = match();
        assertEquals(Match.AMBIGUOUS, rows.get("twin-thread-name-1").match);
        assertEquals(Match.AMBIGUOUS, rows.get("twin-thread-name-2").match);
        assertEquals(10, rows.get("twin-thread-name-1").tid, "nearest candidate as the guess");
        assertRow(rows.get("no-cpu-times-thread-1"), 0, Match.AMBIGUOUS);
        assertRow(rows.get("no-cpu-times-thread-2"), 0, Match.AMBIGUOUS);
        assertEquals(Match.AMBIGUOUS, rows.get("vanished").match);
    }

    @Test
    void aThreadRenamedByAnotherKeepsItsOldNativeNameAndIsFoundByCpuTime() {
        java(1, "renamed-by-main", 12_345_678L);
        task(30, "original-name", 12_345_678L);
        task(31, "VM Thread", 99_000_000L);
        assertRow(match().get("renamed-by-main"), 30, Match.CPUTIME);
    }
}
