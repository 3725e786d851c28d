package io.stallscope.agent.core;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.HdrHistogram.SingleWriterRecorder;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Base64;
import java.util.concurrent.TimeUnit;
import java.util.zip.Deflater;

/**
 * The HdrHistogram interval log (.hlog) of the hiccup meter, in the format jHiccup writes: a header
 * (StartTime, BaseTime, legend), then one compressed interval histogram per interval, values in
 * nanoseconds, the max column in milliseconds. Interval timestamps are seconds since the meter's start
 * (BaseTime = StartTime = start_epoch_ms of the heartbeat), taken from System.nanoTime(), so
 * {@code start_ns + t * 1e9} is an interval edge on CLOCK_MONOTONIC.
 * Invariants: every interval is flushed when written, so a killed JVM leaves a readable log; after
 * {@link #finish} nothing more is written; intervals tile the time from start to finish without gaps.
 */
final class HiccupLog implements Runnable {
    static final String THREAD_NAME = "stallscope-hiccup-log";
    /** jHiccup's choice: histogram values in ns, the interval max shown in ms. */
    private static final double MAX_VALUE_UNIT_RATIO = 1e6;
    /** HdrHistogram's cookie of a V2 encoding compressed with deflate (what its log writer writes). */
    static final int V2_COMPRESSED_COOKIE = 0x1c849314;

    private final Path path;
    private final PrintStream out;
    private final HistogramLogWriter writer;
    private final SingleWriterRecorder recorder;
    private final MeterStart start;
    private final long intervalNs;
    private final String loggedWith;
    private final String identity;
    private final SelfTids selfTids;

    // Guarded by this: the log thread and finish() (shutdown hook or stop) both write.
    private boolean headerWritten;
    private boolean closed;
    private long intervalStartNs;
    private Histogram recycled;
    // The interval line's buffers, kept from one interval to the next (guarded by this).
    // Direct buffers in and out: a Deflater fed heap arrays holds them in a JNI critical region
    // (GetPrimitiveArrayCritical) for the whole call, and no collection can run meanwhile (the
    // GC locker): the observer must not hold the observed's collections back, even for µs.
    private final Deflater deflater = new Deflater(Deflater.BEST_SPEED);
    private ByteBuffer plain;
    private ByteBuffer deflated = ByteBuffer.allocateDirect(1024);
    private byte[] packed = new byte[1024];
    private final StringBuilder line = new StringBuilder(256);

    HiccupLog(Path path, PrintStream out, SingleWriterRecorder recorder, MeterStart start, long intervalNs,
            String loggedWith, String identity, SelfTids selfTids) {
        this.path = path;
        this.out = out;
        this.writer = new HistogramLogWriter(out);
        this.recorder = recorder;
        this.start = start;
        this.intervalNs = intervalNs;
        this.loggedWith = loggedWith;
        this.identity = identity;
        this.selfTids = selfTids;
    }

    @Override
    public void run() {
        try {
            selfTids.registerCurrentThread();
            if (!start.await()) {
                return;
            }
            long next = start.startNs() + intervalNs;
            while (true) {
                long now = System.nanoTime();
                if (now < next) {
                    TimeUnit.NANOSECONDS.sleep(next - now);
                    continue;
                }
                if (!writeInterval(now)) {
                    return;
                }
                // Boundaries stay on start + k * interval; one missed during a long stall is skipped.
                next += intervalNs * (1 + (now - next) / intervalNs);
            }
        } catch (InterruptedException e) {
            // finish() interrupts: it writes the last interval itself.
        } catch (Throwable t) {
            AgentLog.failure("the hiccup log " + path + " stopped", t);
        } finally {
            selfTids.unregisterCurrentThread();
        }
    }

    /** Writes the last, partial interval and closes the log. Safe to call more than once. */
    synchronized void finish() {
        if (closed) {
            return;
        }
        try {
            if (start.started()) {
                writeInterval(System.nanoTime());
            }
        } finally {
            close();
        }
    }

    /** False once the log is closed or has failed. */
    private synchronized boolean writeInterval(long endNs) {
        if (closed) {
            return false;
        }
        writeHeaderOnce();
        recycled = recorder.getIntervalHistogram(recycled);
        long startNs = start.startNs();
        out.print(intervalLine((intervalStartNs - startNs) / 1e9, (endNs - intervalStartNs) / 1e9, recycled));
        intervalStartNs = endNs;
        out.flush();
        if (out.checkError()) {
            AgentLog.line("writing " + path + " failed; the hiccup log stops here (the meter and heartbeat go on)");
            close();
            return false;
        }
        return true;
    }

    private void writeHeaderOnce() {
        if (headerWritten) {
            return;
        }
        headerWritten = true;
        intervalStartNs = start.startNs();
        writer.outputComment("[Logged with " + loggedWith + "]");
        writer.outputLogFormatVersion();
        writer.outputStartTime(start.startEpochMs());
        writer.setBaseTime(start.startEpochMs());
        writer.outputBaseTime(start.startEpochMs());
        // Ties this log to the heartbeat and to CLOCK_MONOTONIC; HdrHistogram readers skip comments.
        writer.outputComment("[stallscope " + identity + " start_ns=" + start.startNs() + " start_epoch_ms="
                + start.startEpochMs() + "]");
        writer.outputLegend();
    }

    /**
     * One interval as HistogramLogWriter writes it ({@code start,length,max_ms,histogram}: the
     * histogram's V2 encoding deflated, behind its cookie and length, in base64), built without
     * {@code String.format} and without a new Deflater per line: this thread runs once an interval,
     * so mostly in the interpreter, and those two were most of its cost.
     */
    String intervalLine(double startS, double lengthS, Histogram h) {
        int need = h.getNeededByteBufferCapacity();
        if (plain == null || plain.capacity() < need) {
            plain = ByteBuffer.allocateDirect(need);
        }
        plain.clear();
        int n = h.encodeIntoByteBuffer(plain);
        plain.position(0).limit(n);
        deflater.reset();
        deflater.setInput(plain);
        deflater.finish();
        deflated.clear();
        while (!deflater.finished()) {
            if (!deflated.hasRemaining()) {
                ByteBuffer bigger = ByteBuffer.allocateDirect(deflated.capacity() * 2);
                deflated.flip();
                bigger.put(deflated);
                deflated = bigger;
            }
            deflater.deflate(deflated);
        }
        deflated.flip();
        int len = 8 + deflated.remaining();
        if (packed.length < len) {
            packed = new byte[Math.max(len, packed.length * 2)];
        }
        deflated.get(packed, 8, len - 8);
        ByteBuffer.wrap(packed, 0, 8).putInt(V2_COMPRESSED_COOKIE).putInt(len - 8);
        line.setLength(0);
        fixed3(line, startS);
        line.append(',');
        fixed3(line, lengthS);
        line.append(',');
        fixed3(line, h.getMaxValueAsDouble() / MAX_VALUE_UNIT_RATIO);
        line.append(',').append(Base64.getEncoder().encodeToString(Arrays.copyOf(packed, len))).append('\n');
        return line.toString();
    }

    /** {@code x} (not negative) with three decimals, rounded half up as {@code %.3f} does. */
    static void fixed3(StringBuilder sb, double x) {
        long v = Math.round(x * 1000);
        long f = v % 1000;
        sb.append(v / 1000).append('.');
        if (f < 100) {
            sb.append('0');
        }
        if (f < 10) {
            sb.append('0');
        }
        sb.append(f);
    }

    private void close() {
        closed = true;
        deflater.end();
        out.close();
    }
}
