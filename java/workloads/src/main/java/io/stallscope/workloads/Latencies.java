package io.stallscope.workloads;

import java.util.Arrays;

/**
 * A growable record of durations in nanoseconds with exact percentiles (nearest rank). The
 * workloads keep at most a few million values, so sorting at the end is cheap and exact.
 */
final class Latencies {
    private long[] v = new long[1024];
    private int n;

    synchronized void add(long ns) {
        if (n == v.length) {
            v = Arrays.copyOf(v, n * 2);
        }
        v[n++] = ns;
    }

    synchronized int count() {
        return n;
    }

    /** The value at quantile q (0..1), nearest rank; 0 when empty. */
    synchronized long quantile(double q) {
        if (n == 0) {
            return 0;
        }
        long[] s = Arrays.copyOf(v, n);
        Arrays.sort(s);
        int rank = (int) Math.ceil(q * n);
        return s[Math.max(0, Math.min(n - 1, rank - 1))];
    }

    synchronized long max() {
        long m = 0;
        for (int i = 0; i < n; i++) {
            m = Math.max(m, v[i]);
        }
        return m;
    }

    /** {@code {"count":…,"p50_ns":…,"p90_ns":…,"p99_ns":…,"p99_9_ns":…,"max_ns":…}} */
    String json() {
        return "{\"count\":" + count() + ",\"p50_ns\":" + quantile(0.5) + ",\"p90_ns\":" + quantile(0.9) + ",\"p99_ns\":" + quantile(0.99)
                + ",\"p99_9_ns\":" + quantile(0.999) + ",\"max_ns\":" + max() + "}";
    }

    /** p50/p99/max for people. */
    String human() {
        return "n=" + count() + " p50 " + ms(quantile(0.5)) + " p99 " + ms(quantile(0.99)) + " max " + ms(max());
    }

    static String ms(long ns) {
        return String.format("%.3f ms", ns / 1e6);
    }

    static String jvm() {
        return "\"jvm\":\"" + System.getProperty("java.vm.version") + "\",\"gc\":\"" + gcName() + "\"";
    }

    static String gcName() {
        StringBuilder b = new StringBuilder();
        for (java.lang.management.GarbageCollectorMXBean g : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
            if (b.length() > 0) {
                b.append('+');
            }
            b.append(g.getName());
        }
        return b.toString();
    }
}
