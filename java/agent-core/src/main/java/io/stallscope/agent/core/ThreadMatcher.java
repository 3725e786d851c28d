package io.stallscope.agent.core;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which native thread (tid) runs which Java thread, found without native code. In order of certainty:
 * <ol>
 * <li>{@code self}: the agent's own threads read their tid from /proc/thread-self;</li>
 * <li>{@code comm}: HotSpot names each native thread after the first 15 bytes of its Java name (modified
 * UTF-8); a prefix shared by exactly one Java thread and one native thread is a match;</li>
 * <li>{@code cputime}: otherwise the Java thread's CPU time (ThreadMXBean) is compared with each
 * candidate's schedstat: equal for a sleeping thread, and for a running one between the Java reading
 * before and after, less the kernel's tick-granular update lag; a match must be the only one both ways;</li>
 * <li>{@code ambiguous}: the rest, with the nearest candidate by CPU time, or tid 0.</li>
 * </ol>
 * Invariants: a tid is given to at most one Java thread except in ambiguous rows (a guess, marked so);
 * the function reads no state besides what is passed in.
 */
final class ThreadMatcher {
    /** HotSpot truncates native thread names to 15 bytes (16 with the NUL, the Linux limit). */
    static final int NATIVE_NAME_BYTES = 15;
    /**
     * How far schedstat may trail the CPU time ThreadMXBean reports for a running thread: the kernel
     * adds the current run to sum_exec_runtime only at scheduler ticks (at most 10 ms even at HZ=100).
     */
    static final long SCHEDSTAT_LAG_NS = 20_000_000L;

    enum Match {
        SELF("self"), COMM("comm"), CPUTIME("cputime"), AMBIGUOUS("ambiguous");

        final String label;

        Match(String label) {
            this.label = label;
        }
    }

    static final class JavaThreadInfo {
        final long id;
        final String name;
        final boolean daemon;

        JavaThreadInfo(long id, String name, boolean daemon) {
            this.id = id;
            this.name = name;
            this.daemon = daemon;
        }
    }

    static final class NativeThread {
        final int tid;
        final byte[] comm;

        NativeThread(int tid, byte[] comm) {
            this.tid = tid;
            this.comm = comm;
        }
    }

    static final class Row {
        final int tid;
        final JavaThreadInfo thread;
        final Match match;

        Row(int tid, JavaThreadInfo thread, Match match) {
            this.tid = tid;
            this.thread = thread;
            this.match = match;
        }
    }

    /** Where CPU times come from; -1 means unknown (thread gone, or CPU time not measured). */
    interface CpuClocks {
        long[] javaThreadsNs(long[] javaIds);

        long nativeThreadNs(int tid);
    }

    private final List<JavaThreadInfo> threads;
    private final CpuClocks clocks;
    private final int[] tidOf;
    private final Match[] how;
    private final Set<Integer> freeTids = new LinkedHashSet<>();
    private final Map<Integer, String> commOf = new LinkedHashMap<>();

    private ThreadMatcher(List<JavaThreadInfo> threads, List<NativeThread> natives, CpuClocks clocks) {
        this.threads = threads;
        this.clocks = clocks;
        this.tidOf = new int[threads.size()];
        this.how = new Match[threads.size()];
        for (NativeThread n : natives) {
            freeTids.add(n.tid);
            commOf.put(n.tid, key(n.comm));
        }
    }

    static List<Row> match(List<JavaThreadInfo> threads, List<NativeThread> natives, Map<Long, Integer> selfTids,
            CpuClocks clocks) {
        ThreadMatcher m = new ThreadMatcher(threads, natives, clocks);
        m.matchSelf(selfTids);
        Map<String, List<Integer>> groups = m.groupUnmatchedByNativeName();
        m.matchUniqueNames(groups);
        for (Map.Entry<String, List<Integer>> group : groups.entrySet()) {
            m.matchByCpuTime(m.unmatched(group.getValue()), m.freeTidsNamed(group.getKey()));
        }
        // Threads whose native name is not their Java name's prefix: the main thread (named after the
        // launcher), threads attached from native code, threads renamed by another thread.
        m.matchByCpuTime(m.unmatched(null), new ArrayList<>(m.freeTids));
        List<Row> rows = new ArrayList<>(threads.size());
        for (int j = 0; j < threads.size(); j++) {
            rows.add(new Row(m.tidOf[j], threads.get(j), m.how[j] == null ? Match.AMBIGUOUS : m.how[j]));
        }
        return rows;
    }

    /** The native name HotSpot gives a Java thread: its name in modified UTF-8, cut at 15 bytes. */
    static byte[] nativeName(String javaName) {
        byte[] out = new byte[NATIVE_NAME_BYTES];
        int n = 0;
        for (int i = 0; i < javaName.length() && n < out.length; i++) {
            char c = javaName.charAt(i);
            byte[] encoded;
            if (c >= 0x01 && c <= 0x7F) {
                encoded = new byte[] {(byte) c};
            } else if (c <= 0x7FF) {
                encoded = new byte[] {(byte) (0xC0 | (c >> 6)), (byte) (0x80 | (c & 0x3F))};
            } else {
                encoded = new byte[] {(byte) (0xE0 | (c >> 12)), (byte) (0x80 | ((c >> 6) & 0x3F)),
                        (byte) (0x80 | (c & 0x3F))};
            }
            for (int k = 0; k < encoded.length && n < out.length; k++) {
                out[n++] = encoded[k];
            }
        }
        return Arrays.copyOf(out, n);
    }

    private static String key(byte[] nativeName) {
        return new String(nativeName, StandardCharsets.ISO_8859_1);
    }

    private void matchSelf(Map<Long, Integer> selfTids) {
        for (int j = 0; j < threads.size(); j++) {
            Integer tid = selfTids.get(threads.get(j).id);
            if (tid != null && freeTids.remove(tid)) {
                assign(j, tid, Match.SELF);
            }
        }
    }

    private Map<String, List<Integer>> groupUnmatchedByNativeName() {
        Map<String, List<Integer>> groups = new LinkedHashMap<>();
        for (int j = 0; j < threads.size(); j++) {
            if (how[j] == null) {
                groups.computeIfAbsent(key(nativeName(threads.get(j).name)), k -> new ArrayList<>()).add(j);
            }
        }
        return groups;
    }

    private void matchUniqueNames(Map<String, List<Integer>> groups) {
        for (Map.Entry<String, List<Integer>> group : groups.entrySet()) {
            List<Integer> candidates = freeTidsNamed(group.getKey());
            if (group.getValue().size() == 1 && candidates.size() == 1) {
                freeTids.remove(candidates.get(0));
                assign(group.getValue().get(0), candidates.get(0), Match.COMM);
            }
        }
    }

    private List<Integer> freeTidsNamed(String key) {
        List<Integer> tids = new ArrayList<>();
        for (Integer tid : freeTids) {
            if (commOf.get(tid).equals(key)) {
                tids.add(tid);
            }
        }
        return tids;
    }

    /** The still unmatched among {@code js}, or among all Java threads when {@code js} is null. */
    private List<Integer> unmatched(List<Integer> js) {
        List<Integer> out = new ArrayList<>();
        if (js == null) {
            for (int j = 0; j < threads.size(); j++) {
                if (how[j] == null) {
                    out.add(j);
                }
            }
        } else {
            for (int j : js) {
                if (how[j] == null) {
                    out.add(j);
                }
            }
        }
        return out;
    }

    private void matchByCpuTime(List<Integer> js, List<Integer> tids) {
        if (js.isEmpty() || tids.isEmpty()) {
            return;
        }
        long[] ids = new long[js.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = threads.get(js.get(i)).id;
        }
        // Java before, schedstat, Java after: a sleeping thread's three readings are equal; a running
        // thread's schedstat lies below the after reading and at most one scheduler tick below the before.
        long[] before = clocks.javaThreadsNs(ids);
        long[] sched = new long[tids.size()];
        for (int c = 0; c < sched.length; c++) {
            sched[c] = clocks.nativeThreadNs(tids.get(c));
        }
        long[] after = clocks.javaThreadsNs(ids);

        boolean[][] exact = new boolean[ids.length][sched.length];
        boolean[][] fits = new boolean[ids.length][sched.length];
        for (int i = 0; i < ids.length; i++) {
            for (int c = 0; c < sched.length; c++) {
                boolean known = before[i] >= 0 && after[i] >= 0 && sched[c] >= 0;
                fits[i][c] = known && sched[c] <= after[i] && sched[c] >= before[i] - SCHEDSTAT_LAG_NS;
                exact[i][c] = fits[i][c] && sched[c] >= before[i];
            }
        }
        boolean[] takenJ = new boolean[ids.length];
        boolean[] takenC = new boolean[sched.length];
        boolean progress = true;
        while (progress) {
            progress = assignOnlyPairs(exact, takenJ, takenC, js, tids) | assignOnlyPairs(fits, takenJ, takenC, js, tids);
        }
        for (int i = 0; i < ids.length; i++) {
            if (!takenJ[i]) {
                noteNearest(js.get(i), before[i], sched, takenC, tids);
            }
        }
    }

    /** Assigns every pair (i, c) where c is i's only candidate and i is c's only claimant. */
    private boolean assignOnlyPairs(boolean[][] ok, boolean[] takenJ, boolean[] takenC, List<Integer> js,
            List<Integer> tids) {
        boolean progress = false;
        for (int i = 0; i < takenJ.length; i++) {
            if (takenJ[i]) {
                continue;
            }
            int only = -1;
            int count = 0;
            for (int c = 0; c < takenC.length; c++) {
                if (!takenC[c] && ok[i][c]) {
                    only = c;
                    count++;
                }
            }
            if (count != 1) {
                continue;
            }
            int claimants = 0;
            for (int k = 0; k < takenJ.length; k++) {
                if (!takenJ[k] && ok[k][only]) {
                    claimants++;
                }
            }
            if (claimants == 1) {
                takenJ[i] = true;
                takenC[only] = true;
                freeTids.remove(tids.get(only));
                assign(js.get(i), tids.get(only), Match.CPUTIME);
                progress = true;
            }
        }
        return progress;
    }

    /** Remembers the free candidate nearest in CPU time, for an ambiguous row; keeps an earlier guess. */
    private void noteNearest(int j, long javaNs, long[] sched, boolean[] takenC, List<Integer> tids) {
        if (tidOf[j] != 0 || javaNs < 0) {
            return;
        }
        long best = Long.MAX_VALUE;
        for (int c = 0; c < sched.length; c++) {
            if (!takenC[c] && sched[c] >= 0 && Math.abs(javaNs - sched[c]) < best) {
                best = Math.abs(javaNs - sched[c]);
                tidOf[j] = tids.get(c);
            }
        }
    }

    private void assign(int j, int tid, Match match) {
        tidOf[j] = tid;
        how[j] = match;
    }
}
