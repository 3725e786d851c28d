package io.stallscope.agent.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Locale;
import java.util.Random;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.junit.jupiter.api.Test;

/** The interval line is what HdrHistogram's own log writer writes, to the histogram. */
class HiccupLogTest {
    private static HiccupLog log() {
        return new HiccupLog(Path.of("/dev/null"), new PrintStream(new ByteArrayOutputStream()),
                HiccupMeter.newRecorder(), new MeterStart(), 1_000_000_000L, "test", "test", new SelfTids());
    }

    private static String writers(double start, double end, Histogram h) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        PrintStream p = new PrintStream(b, true, StandardCharsets.US_ASCII);
        new HistogramLogWriter(p).outputIntervalHistogram(start, end, h, 1e6);
        return b.toString(StandardCharsets.US_ASCII);
    }

    @Test
    void linesDecodeToTheSameHistogramsAndTimesAsHdrHistogramWrites() throws Exception {
        HiccupLog log = log();
        Random r = new Random(42);
        for (int round = 0; round < 200; round++) {
            Histogram h = new Histogram(HiccupMeter.LOWEST_NS, HiccupMeter.HIGHEST_NS, HiccupMeter.SIGNIFICANT_DIGITS);
            int n = round == 0 ? 0 : r.nextInt(5000);
            for (int i = 0; i < n; i++) {
                long v = (long) Math.exp(r.nextDouble() * Math.log(HiccupMeter.HIGHEST_NS / 2.0)) + HiccupMeter.LOWEST_NS;
                h.recordValueWithExpectedInterval(Math.min(v, HiccupMeter.HIGHEST_NS), 1_000_000);
            }
            double start = round * 1.0005 + r.nextDouble() / 1000;
            double end = start + 1 + r.nextDouble() / 100;
            String ours = log.intervalLine(start, end - start, h);
            String theirs = writers(start, end, h);
            String[] o = ours.trim().split(",");
            String[] t = theirs.trim().split(",");
            assertEquals(t[0], o[0], "start");
            assertEquals(Double.parseDouble(t[1]), Double.parseDouble(o[1]), 0.0011, "length");
            assertEquals(t[2], o[2], "max");
            ByteBuffer b = ByteBuffer.wrap(Base64.getDecoder().decode(o[3]));
            assertEquals(HiccupLog.V2_COMPRESSED_COOKIE, b.getInt(0));
            Histogram back = Histogram.decodeFromCompressedByteBuffer(b, 0);
            Histogram theirsBack = Histogram.decodeFromCompressedByteBuffer(
                    ByteBuffer.wrap(Base64.getDecoder().decode(t[3])), 0);
            assertEquals(theirsBack, back, "round " + round);
            assertEquals(h.getTotalCount(), back.getTotalCount());
            if (n > 0) {
                assertEquals(h.getMaxValue(), back.getMaxValue());
                assertEquals(h.getValueAtPercentile(99.9), back.getValueAtPercentile(99.9));
            }
        }
    }

    @Test
    void threeDecimalsRoundAsFormatDoes() {
        for (double x : new double[] {0, 0.0004, 0.0005, 0.9995, 1.5, 12.3456, 999.9999, 86400.123}) {
            StringBuilder sb = new StringBuilder();
            HiccupLog.fixed3(sb, x);
            assertEquals(String.format(Locale.US, "%.3f", x), sb.toString(), "" + x);
        }
    }
}
