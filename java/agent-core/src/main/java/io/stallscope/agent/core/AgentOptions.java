package io.stallscope.agent.core;

import java.math.BigDecimal;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The agent argument string ({@code -javaagent:stallscope-agent.jar=<options>} or the attach API's
 * options), parsed and checked: comma-separated {@code key=value} pairs and the flags {@code help} and
 * {@code stop}. Invariant: an instance only exists for a valid string; every value is within its range.
 */
final class AgentOptions {
    static final long NS_PER_US = 1_000L;
    static final long NS_PER_MS = 1_000_000L;
    static final long NS_PER_S = 1_000_000_000L;

    static final long DEFAULT_RESOLUTION_NS = NS_PER_MS;
    static final long DEFAULT_INTERVAL_NS = 5 * NS_PER_S;
    static final long DEFAULT_DELAY_NS = 0;
    static final String DEFAULT_LOG = "stallscope-%pid-%date.hlog";

    private static final long MIN_RESOLUTION_NS = NS_PER_US;
    private static final long MAX_RESOLUTION_NS = NS_PER_S;
    private static final long MIN_INTERVAL_NS = 100 * NS_PER_MS;
    private static final long MAX_INTERVAL_NS = 3600 * NS_PER_S;
    private static final long MAX_DELAY_NS = 86_400 * NS_PER_S;

    private static final List<String> KEYS =
            List.of("resolution", "interval", "delay", "log", "heartbeat", "help", "stop");
    private static final Pattern DURATION = Pattern.compile("([0-9]+(?:\\.[0-9]+)?)(ns|us|ms|s)");

    final long resolutionNs;
    final long intervalNs;
    final long delayNs;
    /** The log path as given, before {@code %pid} and {@code %date} are replaced. */
    final String logTemplate;
    /** The heartbeat path as given, or null for the default location. */
    final String heartbeatTemplate;
    final boolean help;
    final boolean stop;

    private AgentOptions(long resolutionNs, long intervalNs, long delayNs, String logTemplate,
            String heartbeatTemplate, boolean help, boolean stop) {
        this.resolutionNs = resolutionNs;
        this.intervalNs = intervalNs;
        this.delayNs = delayNs;
        this.logTemplate = logTemplate;
        this.heartbeatTemplate = heartbeatTemplate;
        this.help = help;
        this.stop = stop;
    }

    /**
     * @param text     the agent argument string; null or blank means all defaults
     * @param attached true when loaded into a running JVM (agentmain), where {@code stop} is allowed
     */
    static AgentOptions parse(String text, boolean attached) throws InvalidOption {
        Map<String, String> given = new HashMap<>();
        if (text != null) {
            for (String item : text.split(",")) {
                String token = item.trim();
                if (token.isEmpty()) {
                    continue;
                }
                int eq = token.indexOf('=');
                String key = (eq < 0 ? token : token.substring(0, eq)).trim();
                String value = eq < 0 ? null : token.substring(eq + 1).trim();
                if (!KEYS.contains(key)) {
                    throw new InvalidOption(token + " is not an option (options: " + String.join(", ", KEYS) + ")");
                }
                if (given.containsKey(key)) {
                    throw new InvalidOption(key + " is given twice (" + key + "=" + given.get(key) + ", " + token
                            + "); give it once");
                }
                given.put(key, value);
            }
        }

        boolean help = flag(given, "help");
        boolean stop = flag(given, "stop");
        if (stop && !attached) {
            throw new InvalidOption("stop only stops an agent in a running JVM (load the agent again with "
                    + "the attach API and the option stop)");
        }
        long resolution = duration(given, "resolution", DEFAULT_RESOLUTION_NS, MIN_RESOLUTION_NS,
                MAX_RESOLUTION_NS, "1ms, 500us");
        long interval = duration(given, "interval", DEFAULT_INTERVAL_NS, MIN_INTERVAL_NS, MAX_INTERVAL_NS,
                "5s, 500ms");
        long delay = duration(given, "delay", DEFAULT_DELAY_NS, 0, MAX_DELAY_NS, "0s, 30s");
        if (interval < resolution) {
            throw new InvalidOption("interval=" + given.get("interval") + " is shorter than resolution="
                    + given.get("resolution") + " (the interval must be at least the resolution)");
        }
        String log = path(given, "log", DEFAULT_LOG, "log=/var/log/app/stallscope-%pid.hlog");
        String heartbeat = path(given, "heartbeat", null, "heartbeat=/dev/shm/stallscope-%pid.heartbeat");
        if (heartbeat != null && heartbeat.endsWith(".threads")) {
            throw new InvalidOption("heartbeat=" + heartbeat + " ends in .threads, the name of the thread "
                    + "table beside it (use e.g. heartbeat=/dev/shm/stallscope-%pid.heartbeat)");
        }
        return new AgentOptions(resolution, interval, delay, log, heartbeat, help, stop);
    }

    private static boolean flag(Map<String, String> given, String key) throws InvalidOption {
        if (!given.containsKey(key)) {
            return false;
        }
        String value = given.get(key);
        if (value != null) {
            throw new InvalidOption(key + "=" + value + " takes no value (write just " + key + ")");
        }
        return true;
    }

    private static long duration(Map<String, String> given, String key, long defaultNs, long minNs, long maxNs,
            String examples) throws InvalidOption {
        if (!given.containsKey(key)) {
            return defaultNs;
        }
        String value = given.get(key);
        String range = "from " + format(minNs) + " to " + format(maxNs);
        if (value == null || value.isEmpty()) {
            throw new InvalidOption(key + " needs a duration (use e.g. " + key + "=" + format(defaultNs)
                    + "; units ns, us, ms, s; " + range + ")");
        }
        Matcher m = DURATION.matcher(value);
        if (!m.matches()) {
            throw new InvalidOption(key + "=" + value + " is not a duration (use e.g. " + examples
                    + "; units ns, us, ms, s; " + range + ")");
        }
        BigDecimal ns = new BigDecimal(m.group(1)).multiply(BigDecimal.valueOf(unitNs(m.group(2))));
        if (ns.compareTo(BigDecimal.valueOf(minNs)) < 0 || ns.compareTo(BigDecimal.valueOf(maxNs)) > 0) {
            throw new InvalidOption(key + "=" + value + " is out of range (use " + range + ")");
        }
        if (ns.stripTrailingZeros().scale() > 0) {
            throw new InvalidOption(key + "=" + value + " is not a whole number of nanoseconds (use e.g. "
                    + examples + ")");
        }
        return ns.longValueExact();
    }

    private static long unitNs(String unit) {
        switch (unit) {
            case "ns": return 1;
            case "us": return NS_PER_US;
            case "ms": return NS_PER_MS;
            default: return NS_PER_S;
        }
    }

    private static String path(Map<String, String> given, String key, String defaultPath, String example)
            throws InvalidOption {
        if (!given.containsKey(key)) {
            return defaultPath;
        }
        String value = given.get(key);
        if (value == null || value.isEmpty()) {
            throw new InvalidOption(key + " needs a file path (use e.g. " + example
                    + "; %pid and %date are replaced)");
        }
        return value;
    }

    /** A duration in the largest unit that shows it exactly, e.g. 1ms, 500us, 5s. */
    static String format(long ns) {
        if (ns != 0 && ns % NS_PER_S == 0) {
            return ns / NS_PER_S + "s";
        }
        if (ns != 0 && ns % NS_PER_MS == 0) {
            return ns / NS_PER_MS + "ms";
        }
        if (ns != 0 && ns % NS_PER_US == 0) {
            return ns / NS_PER_US + "us";
        }
        return ns == 0 ? "0s" : ns + "ns";
    }

    static String usage(String version) {
        return "stallscope-agent " + version + ": a hiccup meter with a heartbeat for the stallscope sidecar\n"
                + "usage: -javaagent:stallscope-agent.jar[=option,option...]\n"
                + "   or: the attach API, VirtualMachine.loadAgent(jar, \"option,option...\")\n"
                + "options:\n"
                + "  resolution=<duration>  how long the meter sleeps per tick (default "
                + format(DEFAULT_RESOLUTION_NS) + ", " + format(MIN_RESOLUTION_NS) + " to "
                + format(MAX_RESOLUTION_NS) + ")\n"
                + "  interval=<duration>    length of one .hlog interval (default " + format(DEFAULT_INTERVAL_NS)
                + ", " + format(MIN_INTERVAL_NS) + " to " + format(MAX_INTERVAL_NS) + ")\n"
                + "  delay=<duration>       wait this long before measuring (default " + format(DEFAULT_DELAY_NS)
                + ", up to " + format(MAX_DELAY_NS) + ")\n"
                + "  log=<path>             the HdrHistogram interval log (default " + DEFAULT_LOG
                + " in the working directory)\n"
                + "  heartbeat=<path>       the heartbeat file (default $XDG_RUNTIME_DIR or /dev/shm,\n"
                + "                         stallscope-<pid>.heartbeat); the thread table goes beside it,\n"
                + "                         its extension replaced by .threads\n"
                + "  help                   print this and do not start\n"
                + "  stop                   (attach only) stop the running meter, finish its log, remove its files\n"
                + "durations: a number and a unit, ns, us, ms or s (e.g. 1ms, 500us, 2.5s)\n"
                + "paths: %pid is replaced by the process id, %date by the start time, yyyyMMdd-HHmmss\n";
    }
}
