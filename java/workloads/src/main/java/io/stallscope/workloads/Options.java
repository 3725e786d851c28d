package io.stallscope.workloads;

import java.util.HashMap;
import java.util.Map;

/**
 * {@code --name value} options with defaults and units ({@code 300ms}, {@code 10s}); one
 * clear line and exit code 2 for anything wrong.
 */
final class Options {
    private final String workload;
    private final Map<String, String> values = new HashMap<>();
    private final String usage;

    Options(String workload, String usage, String[] args, String... known) {
        this.workload = workload;
        this.usage = usage;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--help") || a.equals("-help") || a.equals("-h")) {
                System.out.println(usage);
                System.exit(0);
            }
            if (!a.startsWith("--")) {
                fail("unexpected argument '" + a + "'");
            }
            String key = a.substring(2);
            String value = null;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            }
            boolean ok = false;
            for (String k : known) {
                ok |= k.equals(key);
            }
            if (!ok) {
                fail("unknown option --" + key);
            }
            if (value == null) {
                value = (i + 1 < args.length && !args[i + 1].startsWith("--")) ? args[++i] : "true";
            }
            values.put(key, value);
        }
    }

    void fail(String message) {
        System.err.println(workload + ": " + message + " (see --help)");
        System.exit(2);
    }

    String string(String key, String dflt) {
        return values.getOrDefault(key, dflt);
    }

    boolean flag(String key) {
        return Boolean.parseBoolean(values.getOrDefault(key, "false"));
    }

    long integer(String key, long dflt) {
        String v = values.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            fail("--" + key + " " + v + " is not a whole number");
            return dflt;
        }
    }

    /** A duration in nanoseconds: {@code 250us}, {@code 300ms}, {@code 10s}, {@code 2m}. */
    long nanos(String key, String dflt) {
        String v = values.getOrDefault(key, dflt);
        String num = v.replaceAll("[a-z]+$", "");
        String unit = v.substring(num.length());
        long mult;
        switch (unit) {
            case "ns": mult = 1; break;
            case "us": mult = 1_000; break;
            case "ms": mult = 1_000_000; break;
            case "s": mult = 1_000_000_000L; break;
            case "m": mult = 60_000_000_000L; break;
            default:
                fail("--" + key + " " + v + " is not a duration (use e.g. 300ms, 10s)");
                return 0;
        }
        try {
            return Math.round(Double.parseDouble(num) * mult);
        } catch (NumberFormatException e) {
            fail("--" + key + " " + v + " is not a duration (use e.g. 300ms, 10s)");
            return 0;
        }
    }
}
