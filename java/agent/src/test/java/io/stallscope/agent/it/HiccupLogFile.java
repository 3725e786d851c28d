package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogProcessor;
import org.HdrHistogram.HistogramLogReader;

/**
 * The agent's .hlog as HdrHistogram's own tools (from Maven Central, not the agent's shaded copy) read
 * it: every interval through HistogramLogReader, and the whole log through HistogramLogProcessor.
 */
final class HiccupLogFile {
    /** One interval line: times in seconds since the log's StartTime, values in ns. */
    static final class Interval {
        final double startSec;
        final double endSec;
        final Histogram histogram;

        Interval(double startSec, double endSec, Histogram histogram) {
            this.startSec = startSec;
            this.endSec = endSec;
            this.histogram = histogram;
        }
    }

    final Path path;
    final List<Interval> intervals = new ArrayList<>();
    final double startTimeSec;

    private HiccupLogFile(Path path, double startTimeSec) {
        this.path = path;
        this.startTimeSec = startTimeSec;
    }

    static HiccupLogFile read(Path path) throws IOException {
        if (!Files.exists(path)) {
            fail("no .hlog at " + path);
        }
        List<EncodableHistogram> raw = new ArrayList<>();
        double startTimeSec;
        HistogramLogReader reader = new HistogramLogReader(path.toFile());
        try {
            for (EncodableHistogram h; (h = reader.nextIntervalHistogram()) != null; ) {
                raw.add(h);
            }
            startTimeSec = reader.getStartTimeSec();
        } finally {
            reader.close();
        }
        HiccupLogFile log = new HiccupLogFile(path, startTimeSec);
        for (EncodableHistogram h : raw) {
            log.intervals.add(new Interval(h.getStartTimeStamp() / 1000.0 - startTimeSec,
                    h.getEndTimeStamp() / 1000.0 - startTimeSec, (Histogram) h));
        }
        return log;
    }

    Histogram total() {
        Histogram total = new Histogram(1_000, 3_600_000_000_000L, 3);
        for (Interval i : intervals) {
            total.add(i.histogram);
        }
        return total;
    }

    /** The value of a {@code #[stallscope ... key=value ...]} header field. */
    long headerField(String key) throws IOException {
        Matcher m = Pattern.compile("^#\\[stallscope .*\\b" + key + "=([0-9]+)\\b.*\\]$", Pattern.MULTILINE)
                .matcher(Files.readString(path));
        if (!m.find()) {
            fail("no " + key + " in the #[stallscope ...] header of " + path);
        }
        return Long.parseLong(m.group(1));
    }

    /** What HistogramLogProcessor makes of the log. */
    static final class Processed {
        final int intervalLines;
        final double maxMs;
        final long totalCount;

        Processed(int intervalLines, double maxMs, long totalCount) {
            this.intervalLines = intervalLines;
            this.maxMs = maxMs;
            this.totalCount = totalCount;
        }
    }

    Processed process(Path outputDir) throws IOException {
        Path out = outputDir.resolve(path.getFileName() + ".processed");
        new HistogramLogProcessor(new String[] {"-i", path.toString(), "-o", out.toString()}).run();
        int intervalLines = 0;
        for (String line : Files.readAllLines(out)) {
            if (line.matches("^\\s*[0-9.]+: I:[0-9]+ .*")) {
                intervalLines++;
            }
        }
        String hgrm = Files.readString(Path.of(out + ".hgrm"));
        Matcher m = Pattern.compile("#\\[Max\\s*=\\s*([0-9.]+), Total count\\s*=\\s*([0-9]+)\\]").matcher(hgrm);
        assertNotNull(m.find() ? m : null, "HistogramLogProcessor wrote no Max/Total count line:\n" + hgrm);
        return new Processed(intervalLines, Double.parseDouble(m.group(1)), Long.parseLong(m.group(2)));
    }
}
