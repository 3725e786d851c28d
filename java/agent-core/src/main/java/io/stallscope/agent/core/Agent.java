package io.stallscope.agent.core;

import org.HdrHistogram.SingleWriterRecorder;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.LocalDateTime;
import java.util.Set;

/**
 * The agent's life in one JVM: start the meter, its log, its heartbeat and the thread table; stop them
 * on request ({@code stop} through the attach API) or when the JVM exits normally. The entry point the
 * bootstrap calls is {@link #run}. Invariants: at most one agent runs per JVM; every thread it starts
 * is a daemon; no exception leaves {@link #run}; a failed start leaves no thread, hook or heartbeat
 * behind.
 */
public final class Agent {
    private static final Object LOCK = new Object();
    private static Agent running; // guarded by LOCK

    private final Path logPath;
    private final Heartbeat heartbeat; // null when it could not be created
    private final HiccupMeter meter;
    private final HiccupLog log;
    private final ThreadTable threadTable; // null without a heartbeat
    private final Thread meterThread;
    private final Thread logThread;
    private final Thread threadTableThread;
    private final Thread shutdownHook;

    private Agent(Path logPath, Heartbeat heartbeat, HiccupMeter meter, HiccupLog log,
            ThreadTable threadTable) {
        this.logPath = logPath;
        this.heartbeat = heartbeat;
        this.meter = meter;
        this.log = log;
        this.threadTable = threadTable;
        this.meterThread = daemon(meter, HiccupMeter.THREAD_NAME);
        this.logThread = daemon(log, HiccupLog.THREAD_NAME);
        this.threadTableThread = threadTable == null ? null : daemon(threadTable, ThreadTable.THREAD_NAME);
        this.shutdownHook = new Thread(null, this::onJvmExit, "stallscope-shutdown", 0, false);
    }

    /**
     * Called by the bootstrap for premain ({@code attached} false) and agentmain (true).
     *
     * @param version the agent jar's version, for help and the log header
     */
    public static void run(String optionText, boolean attached, String version) {
        try {
            AgentOptions options = AgentOptions.parse(optionText, attached);
            if (options.help) {
                AgentLog.block(AgentOptions.usage(version));
            } else if (options.stop) {
                stopRunning();
            } else {
                start(options, version);
            }
        } catch (InvalidOption e) {
            AgentLog.line(e.getMessage() + "; the agent is not started");
            if (attached) {
                leaveFailureNote(e.getMessage());
            }
        } catch (Throwable t) {
            AgentLog.failure("the agent is not started", t);
            if (attached) {
                leaveFailureNote("the agent is not started: " + t);
            }
        }
    }

    /**
     * Loaded by a tool ({@code stallscope attach}), the agent's stderr is the application's, which the
     * tool cannot see: why it did not start is also left, one line, in
     * {@code stallscope-PID.failed} beside where the heartbeat would be, for the tool to read and
     * remove. Created new (never through a link, never over a file), mode 0600; when that fails the
     * stderr line above is all there is.
     */
    private static void leaveFailureNote(String why) {
        try {
            Path note = defaultHeartbeatDirectory().resolve("stallscope-" + ProcSelf.pid() + ".failed");
            Set<OpenOption> how = Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
            try (SeekableByteChannel c = Files.newByteChannel(note, how,
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
                c.write(ByteBuffer.wrap((why.replace('\n', ' ').replace('\r', ' ') + "\n").getBytes(StandardCharsets.UTF_8)));
            }
        } catch (Throwable ignored) {
            // The stderr line stands alone.
        }
    }

    private static void start(AgentOptions options, String version) throws InvalidOption {
        synchronized (LOCK) {
            if (running != null) {
                AgentLog.line("already running (log " + running.logPath + (running.heartbeat == null ? ""
                        : ", heartbeat " + running.heartbeat.path()) + "); this start is ignored");
                return;
            }
            long pid = ProcSelf.pid();
            long procStartTime = Math.max(0, ProcSelf.startTime(pid)); // 0: unknown, as readers expect
            String date = startDate();
            Path logPath = absolute(substitute(options.logTemplate, pid, date));
            Path heartbeatPath = options.heartbeatTemplate != null
                    ? absolute(substitute(options.heartbeatTemplate, pid, date))
                    : defaultHeartbeatDirectory().resolve("stallscope-" + pid + ".heartbeat");

            PrintStream out;
            try {
                // Larger than any interval line, so each flush is one write(2): a killed JVM cannot
                // leave half a line.
                // Never through a symbolic link (O_NOFOLLOW): a link planted where the log goes
                // must not make the JVM, often root's, overwrite what it points to.
                out = new PrintStream(new BufferedOutputStream(Files.newOutputStream(logPath, StandardOpenOption.CREATE,
                        StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), 1 << 16),
                        false, StandardCharsets.US_ASCII);
            } catch (IOException | RuntimeException e) {
                throw new InvalidOption("log=" + options.logTemplate + " cannot be written (" + whyUnwritable(logPath, e)
                        + "); give a writable path, e.g. log=/tmp/stallscope-%pid.hlog");
            }

            StaleFiles.sweep(heartbeatPath.getParent(), pid);
            Heartbeat heartbeat = null;
            try {
                heartbeat = Heartbeat.create(heartbeatPath, pid, procStartTime, options.resolutionNs,
                        options.intervalNs, options.delayNs);
            } catch (IOException | RuntimeException e) {
                AgentLog.line("heartbeat " + heartbeatPath + " cannot be created (" + e
                        + "); the meter runs without heartbeat and thread table");
            }

            Agent agent;
            try {
                SelfTids selfTids = new SelfTids();
                MeterStart meterStart = new MeterStart();
                SingleWriterRecorder recorder = HiccupMeter.newRecorder();
                HiccupMeter meter = new HiccupMeter(options.resolutionNs, options.delayNs, recorder, heartbeat,
                        meterStart, selfTids);
                String identity = "pid=" + pid + " proc_starttime=" + procStartTime + " resolution_ns="
                        + options.resolutionNs + " interval_ns=" + options.intervalNs;
                HiccupLog log = new HiccupLog(logPath, out, recorder, meterStart, options.intervalNs,
                        "stallscope-agent " + version, identity, selfTids);
                ThreadTable threadTable = heartbeat == null ? null
                        : new ThreadTable(ThreadTable.besideHeartbeat(heartbeatPath), pid, selfTids);
                agent = new Agent(logPath, heartbeat, meter, log, threadTable);
                Runtime.getRuntime().addShutdownHook(agent.shutdownHook);
            } catch (Throwable t) {
                out.close();
                if (heartbeat != null) {
                    heartbeat.finish(Heartbeat.STATE_STOPPED);
                }
                throw t;
            }
            agent.meterThread.start();
            agent.logThread.start();
            if (agent.threadTableThread != null) {
                agent.threadTableThread.start();
            }
            running = agent;
        }
    }

    private static void stopRunning() {
        synchronized (LOCK) {
            if (running == null) {
                AgentLog.line("stop: the agent is not running in this JVM");
                return;
            }
            Agent agent = running;
            running = null;
            try {
                Runtime.getRuntime().removeShutdownHook(agent.shutdownHook);
            } catch (IllegalStateException e) {
                // The JVM is already exiting; the hook will find nothing left to do.
            }
            agent.shutDown(Heartbeat.STATE_STOPPED);
        }
    }

    private void onJvmExit() {
        try {
            synchronized (LOCK) {
                if (running != this) {
                    return;
                }
                running = null;
                shutDown(Heartbeat.STATE_EXITED);
            }
        } catch (Throwable t) {
            AgentLog.failure("shutting down", t);
        }
    }

    /**
     * Publishes the final state first, so a sidecar never mistakes the meter's last silence for a
     * stall; then stops the meter, so the log's last interval holds every recorded tick; removes the
     * heartbeat file last, which tells a reader that the logs are complete.
     */
    private void shutDown(int finalState) {
        if (heartbeat != null) {
            heartbeat.state(finalState);
        }
        meter.requestStop();
        meterThread.interrupt();
        try {
            meterThread.join(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        log.finish();
        logThread.interrupt();
        if (threadTable != null) {
            threadTable.close();
            threadTableThread.interrupt();
        }
        if (heartbeat != null) {
            heartbeat.finish(finalState);
        }
    }

    private static Thread daemon(Runnable body, String name) {
        // No inherited thread-locals: the agent must not hold on to the application's objects.
        Thread t = new Thread(null, body, name, 0, false);
        t.setDaemon(true);
        t.setContextClassLoader(null);
        return t;
    }

    /** $XDG_RUNTIME_DIR when it is a writable directory, else /dev/shm. */
    static Path defaultHeartbeatDirectory() {
        String xdg = System.getenv("XDG_RUNTIME_DIR");
        if (xdg != null && !xdg.isEmpty()) {
            Path dir = Paths.get(xdg);
            if (dir.isAbsolute() && Files.isDirectory(dir) && Files.isWritable(dir)) {
                return dir;
            }
        }
        return Paths.get("/dev/shm");
    }

    private static String whyUnwritable(Path path, Exception e) {
        Path dir = path.getParent();
        if (dir != null && !Files.isDirectory(dir)) {
            return "no directory " + dir;
        }
        if (Files.isDirectory(path)) {
            return path + " is a directory";
        }
        return e.getMessage(); // FileNotFoundException: "<path> (<reason>)"
    }

    static String substitute(String template, long pid, String date) {
        return template.replace("%pid", Long.toString(pid)).replace("%date", date);
    }

    private static Path absolute(String path) {
        return Paths.get(path).toAbsolutePath().normalize();
    }

    /** yyyyMMdd-HHmmss, local time; built by hand to keep locale and formatter machinery out of premain. */
    private static String startDate() {
        LocalDateTime t = LocalDateTime.now();
        StringBuilder sb = new StringBuilder(15);
        pad(sb, t.getYear(), 4);
        pad(sb, t.getMonthValue(), 2);
        pad(sb, t.getDayOfMonth(), 2);
        sb.append('-');
        pad(sb, t.getHour(), 2);
        pad(sb, t.getMinute(), 2);
        pad(sb, t.getSecond(), 2);
        return sb.toString();
    }

    private static void pad(StringBuilder sb, int value, int width) {
        String s = Integer.toString(value);
        for (int i = s.length(); i < width; i++) {
            sb.append('0');
        }
        sb.append(s);
    }
}
