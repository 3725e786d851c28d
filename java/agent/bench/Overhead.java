import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

/**
 * The overhead and accuracy benchmark of stallscope-agent.jar (run by overhead.sh). It measures, each
 * beside its reference in the same invocation:
 * <ul>
 * <li>CPU used by the agent's threads (comm {@code stallscope-*}) in an idle and in a busy JVM, as a
 * percentage of one core, from /proc/&lt;pid&gt;/task/&lt;tid&gt;/stat utime+stime (schedstat, in ns, beside it),
 * against a bare 1 ms sleep loop in an idle JVM without the agent (the floor of any sleep-based meter),
 * and against jHiccup at the same 1 ms resolution in the same idle JVM (its {@code Hiccup*} threads),
 * when its jar is given;</li>
 * <li>the busy JVM's throughput with the agent divided by its throughput without, run in pairs, with
 * the load the rest of the machine put on the CPUs meanwhile (from /proc/stat, less the JVM's own CPU,
 * hypervisor steal included), so a run disturbed by something else shows as such;</li>
 * <li>the agent's p99 and max hiccup next to an idle JVM, against cyclictest's p99 and max wake-up
 * latency measured at the same time (1 ms interval, no real-time priority).</li>
 * </ul>
 * Every figure is the median over the runs, with the runs listed.
 *
 * <p>Usage: {@code java -cp <classes>:HdrHistogram.jar Overhead <agent.jar> <java> <clk_tck> <window s>
 * <warm-up s> <runs> <work dir> [<jHiccup.jar>]}
 */
public final class Overhead {
    /** Below this much load from the rest of the machine, a busy pair's ratio is the agent's alone. */
    private static final double QUIET_CORES = 0.1;

    private final Path agentJar;
    private final String java;
    private final long clockTicksPerSecond;
    private final double windowSec;
    private final double warmupSec;
    private final int runs;
    private final Path work;
    private final String classPath;
    /** jHiccup's jar, the peer the agent's idle cost is measured against; null when not given. */
    private final Path jHiccupJar;

    private Overhead(String[] a) {
        agentJar = Paths.get(a[0]).toAbsolutePath();
        java = a[1];
        clockTicksPerSecond = Long.parseLong(a[2]);
        windowSec = Double.parseDouble(a[3]);
        warmupSec = Double.parseDouble(a[4]);
        runs = Integer.parseInt(a[5]);
        work = Paths.get(a[6]);
        jHiccupJar = a.length > 7 ? Paths.get(a[7]).toAbsolutePath() : null;
        classPath = System.getProperty("java.class.path");
    }

    public static void main(String[] args) throws Exception {
        new Overhead(args).run();
    }

    private void run() throws Exception {
        System.out.printf(Locale.ROOT, "stallscope-agent overhead: %s, %d cores, %.0f s windows after %.0f s warm-up, "
                + "%d runs, medians [runs]%n", javaVersion(), Runtime.getRuntime().availableProcessors(),
                windowSec, warmupSec, runs);
        String agent = "-javaagent:" + agentJar + "=resolution=1ms,interval=1s,heartbeat=" + work
                + "/stallscope-%pid.heartbeat,log=";

        List<Double> idleCpu = new ArrayList<>();
        List<Double> idleSched = new ArrayList<>();
        List<Double> floorCpu = new ArrayList<>();
        List<Double> floorSched = new ArrayList<>();
        List<Double> peerCpu = new ArrayList<>();
        List<Double> peerSched = new ArrayList<>();
        for (int r = 0; r < runs; r++) {
            Run idle = launch("idle", agent + work.resolve("idle-" + r + ".hlog"), "stallscope-");
            idleCpu.add(idle.cpuPercent);
            idleSched.add(idle.schedPercent);
            Run floor = launch("sleeper", null, "bare-sleep-loop");
            floorCpu.add(floor.cpuPercent);
            floorSched.add(floor.schedPercent);
            if (jHiccupJar != null) {
                // jHiccup's own defaults but its log: 1 ms resolution (-r 1), an interval log.
                Run peer = launch("idle", "-javaagent:" + jHiccupJar + "=-l," + work.resolve("jhiccup-" + r + ".hlog") + ",-r,1", "Hiccup");
                peerCpu.add(peer.cpuPercent);
                peerSched.add(peer.schedPercent);
            }
        }
        System.out.printf(Locale.ROOT, "idle JVM:  agent threads use %s%% of one core (schedstat %s%%) %s%n",
                f2(median(idleCpu)), f2(median(idleSched)), list(idleCpu));
        System.out.printf(Locale.ROOT, "  reference: a bare 1 ms sleep loop uses %s%% (schedstat %s%%) %s%n",
                f2(median(floorCpu)), f2(median(floorSched)), list(floorCpu));
        if (jHiccupJar != null) {
            System.out.printf(Locale.ROOT, "  peer: jHiccup at 1 ms (%s, its Hiccup* threads) uses %s%% (schedstat %s%%) %s; agent / jHiccup: %s (schedstat %s)%n",
                    jHiccupJar.getFileName(), f2(median(peerCpu)), f2(median(peerSched)), list(peerCpu),
                    f2(median(idleCpu) / median(peerCpu)), f2(median(idleSched) / median(peerSched)));
        }

        List<Double> busyCpu = new ArrayList<>();
        List<Double> ratios = new ArrayList<>();
        List<Double> without = new ArrayList<>();
        List<Double> otherLoad = new ArrayList<>();
        for (int r = 0; r < runs; r++) {
            // Alternate which goes first, so drift in the machine's speed does not favour one side.
            Run plain;
            Run measured;
            if (r % 2 == 0) {
                plain = launch("busy", null, "stallscope-");
                measured = launch("busy", agent + work.resolve("busy-" + r + ".hlog"), "stallscope-");
            } else {
                measured = launch("busy", agent + work.resolve("busy-" + r + ".hlog"), "stallscope-");
                plain = launch("busy", null, "stallscope-");
            }
            busyCpu.add(measured.cpuPercent);
            without.add(plain.itemsPerSecond);
            otherLoad.add(Math.max(plain.otherCores, measured.otherCores));
            ratios.add(measured.itemsPerSecond / plain.itemsPerSecond);
        }
        System.out.printf(Locale.ROOT, "busy JVM (%d threads):  agent threads use %s%% of one core %s%n",
                Runtime.getRuntime().availableProcessors(), f2(median(busyCpu)), list(busyCpu));
        System.out.printf(Locale.ROOT, "busy JVM throughput, with agent / without: %s %s (without: %.3g items/s)%n",
                f3(median(ratios)), list3(ratios), median(without));
        System.out.printf(Locale.ROOT, "  other load on the machine during each pair, in cores: %s%n", list(otherLoad));
        List<Double> clean = new ArrayList<>();
        for (int r = 0; r < ratios.size(); r++) {
            if (otherLoad.get(r) < QUIET_CORES) {
                clean.add(ratios.get(r));
            }
        }
        if (clean.size() == ratios.size()) {
            System.out.println("  (every pair ran on a quiet machine)");
        } else if (clean.isEmpty()) {
            System.out.printf(Locale.ROOT, "  no pair ran on a quiet machine (other load < %.1f core): the ratio above "
                    + "measures the neighbour too; run again when the machine is idle%n", QUIET_CORES);
        } else {
            System.out.printf(Locale.ROOT, "  over the %d pairs on a quiet machine (other load < %.1f core) only: %s %s%n",
                    clean.size(), QUIET_CORES, f3(median(clean)), list3(clean));
        }

        compareWithCyclictest(agent);
    }

    private void compareWithCyclictest(String agent) throws Exception {
        Path hlog = work.resolve("cyclictest-neighbour.hlog");
        Process jvm = start("idle", agent + hlog, Math.max(windowSec, 1) + 1);
        try {
            BufferedReader out = reader(jvm);
            await(out, "start", jvm);
            long cyclicStart = System.nanoTime();
            Process cyclic = new ProcessBuilder("cyclictest", "-i", "1000", "-D", Long.toString((long) windowSec),
                    "-q", "-h", "20000").redirectErrorStream(true).start();
            String report = new String(cyclic.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            cyclic.waitFor();
            double cyclicSec = (System.nanoTime() - cyclicStart) / 1e9;
            await(out, "end", jvm);
            jvm.getOutputStream().close();
            jvm.waitFor(30, TimeUnit.SECONDS);

            long[] cyclicP99Max = cyclictestP99AndMax(report);
            Histogram hiccups = hiccups(hlog, warmupSec - 0.5);
            System.out.printf(Locale.ROOT, "hiccups next to an idle JVM, %.0f s: cyclictest -i 1000 p99 %d us, max %d us "
                    + "| agent at 1 ms: p99 %d us, max %d us (%d values)%n", cyclicSec, cyclicP99Max[0],
                    cyclicP99Max[1], hiccups.getValueAtPercentile(99) / 1000, hiccups.getMaxValue() / 1000,
                    hiccups.getTotalCount());
            System.out.printf(Locale.ROOT, "  (cyclictest: wake-up latency past the timer, min %d us; agent: sleep "
                    + "length less the shortest sleep seen)%n", cyclicP99Max[2]);
        } finally {
            jvm.destroyForcibly();
        }
    }

    /** One workload run: CPU of the threads watched (0 if there are none), and work done. */
    private static final class Run {
        double cpuPercent;
        double schedPercent;
        double itemsPerSecond;
        /** CPUs kept busy by everything but this JVM (steal included), on average over the window. */
        double otherCores;
    }

    /** Runs the workload once, watching the CPU of the threads whose native name starts with {@code threads}. */
    private Run launch(String mode, String agentArg, String threads) throws Exception {
        Process jvm = start(mode, agentArg, windowSec);
        try {
            BufferedReader out = reader(jvm);
            await(out, "start", jvm);
            long t0 = System.nanoTime();
            long[] cpu0 = threadCpu(jvm.pid(), threads);
            long machine0 = machineBusyTicks();
            long process0 = processTicks(jvm.pid());
            String end = await(out, "end ", jvm);
            long t1 = System.nanoTime();
            long[] cpu1 = threadCpu(jvm.pid(), threads);
            long machine1 = machineBusyTicks();
            long process1 = processTicks(jvm.pid());
            jvm.getOutputStream().close();
            if (!jvm.waitFor(30, TimeUnit.SECONDS)) {
                throw new IOException("workload " + jvm.pid() + " did not exit");
            }
            double sec = (t1 - t0) / 1e9;
            Run run = new Run();
            run.cpuPercent = 100.0 * (cpu1[0] - cpu0[0]) / clockTicksPerSecond / sec;
            run.schedPercent = 100.0 * (cpu1[1] - cpu0[1]) / 1e9 / sec;
            run.itemsPerSecond = Long.parseLong(end.substring("end ".length())) / windowSec;
            run.otherCores = Math.max(0, (machine1 - machine0) - (process1 - process0)) / (double) clockTicksPerSecond / sec;
            return run;
        } finally {
            jvm.destroyForcibly();
        }
    }

    private Process start(String mode, String agentArg, double window) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(java);
        if (agentArg != null) {
            command.add(agentArg);
        }
        command.add("-cp");
        command.add(classPath);
        command.add("Workload");
        command.add(mode);
        command.add(Double.toString(warmupSec));
        command.add(Double.toString(window));
        return new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static BufferedReader reader(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    }

    private static String await(BufferedReader out, String prefix, Process p) throws IOException {
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith(prefix)) {
                return line;
            }
        }
        throw new IOException("workload " + p.pid() + " ended before printing '" + prefix + "'");
    }

    /** utime+stime (clock ticks) and schedstat run time (ns) summed over the threads named {@code prefix}*. */
    private static long[] threadCpu(long pid, String prefix) throws IOException {
        long ticks = 0;
        long ns = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/" + pid + "/task"))) {
            for (Path task : tasks) {
                try {
                    if (!Files.readString(task.resolve("comm")).startsWith(prefix)) {
                        continue;
                    }
                    String stat = Files.readString(task.resolve("stat"));
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                    ticks += Long.parseLong(f[14 - 3]) + Long.parseLong(f[15 - 3]);
                    ns += Long.parseLong(Files.readString(task.resolve("schedstat")).split(" ")[0]);
                } catch (IOException e) {
                    // the thread ended meanwhile
                }
            }
        }
        return new long[] {ticks, ns};
    }

    /** Busy time of all CPUs, in clock ticks, from the first line of /proc/stat (everything but idle and iowait). */
    private static long machineBusyTicks() throws IOException {
        String[] f = Files.readAllLines(Paths.get("/proc/stat")).get(0).trim().split("\\s+");
        long busy = 0;
        for (int i = 1; i < f.length && i <= 8; i++) { // user nice system idle iowait irq softirq steal
            if (i != 4 && i != 5) {
                busy += Long.parseLong(f[i]);
            }
        }
        return busy;
    }

    /** utime+stime of the whole process, in clock ticks. */
    private static long processTicks(long pid) throws IOException {
        String stat = Files.readString(Paths.get("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(f[14 - 3]) + Long.parseLong(f[15 - 3]);
    }

    /** p99, max and min from cyclictest's -h histogram (µs buckets, overflows counted above the last). */
    private static long[] cyclictestP99AndMax(String report) {
        List<long[]> buckets = new ArrayList<>();
        long total = 0;
        long overflows = 0;
        long max = -1;
        long min = -1;
        for (String line : report.split("\n")) {
            Matcher bucket = Pattern.compile("^([0-9]+) ([0-9]+)$").matcher(line.trim());
            if (bucket.matches()) {
                long count = Long.parseLong(bucket.group(2));
                if (count > 0) {
                    buckets.add(new long[] {Long.parseLong(bucket.group(1)), count});
                    total += count;
                }
            } else if (line.startsWith("# Max Latencies:")) {
                max = Long.parseLong(line.replaceAll("[^0-9]", ""));
            } else if (line.startsWith("# Min Latencies:")) {
                min = Long.parseLong(line.replaceAll("[^0-9]", ""));
            } else if (line.startsWith("# Histogram Overflows:")) {
                overflows = Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        if (total + overflows == 0) {
            throw new IllegalStateException("no histogram in cyclictest's output:\n" + report);
        }
        long rank = (long) Math.ceil(0.99 * (total + overflows));
        long seen = 0;
        long p99 = max;
        for (long[] b : buckets) {
            seen += b[1];
            if (seen >= rank) {
                p99 = b[0];
                break;
            }
        }
        return new long[] {p99, max, min};
    }

    /** All values of the intervals that start after {@code fromSec} (seconds since the log's start). */
    private static Histogram hiccups(Path hlog, double fromSec) throws IOException {
        Histogram total = new Histogram(1_000, 3_600_000_000_000L, 3);
        HistogramLogReader reader = new HistogramLogReader(hlog.toFile());
        try {
            for (EncodableHistogram h; (h = reader.nextIntervalHistogram()) != null; ) {
                if (h.getStartTimeStamp() / 1000.0 - reader.getStartTimeSec() >= fromSec) {
                    total.add((Histogram) h);
                }
            }
        } finally {
            reader.close();
        }
        return total;
    }

    private String javaVersion() throws IOException, InterruptedException {
        Process p = new ProcessBuilder(java, "-version").redirectErrorStream(true).start();
        String first = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).split("\n")[0];
        p.waitFor();
        return first.trim();
    }

    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private static String f2(double v) {
        return String.format(Locale.ROOT, "%.2f", v);
    }

    private static String f3(double v) {
        return String.format(Locale.ROOT, "%.3f", v);
    }

    private static String list(List<Double> values) {
        List<String> s = new ArrayList<>();
        values.forEach(v -> s.add(f2(v)));
        return "[" + String.join(" ", s) + "]";
    }

    private static String list3(List<Double> values) {
        List<String> s = new ArrayList<>();
        values.forEach(v -> s.add(f3(v)));
        return "[" + String.join(" ", s) + "]";
    }
}
