package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** The thread table (stallscope-<pid>.threads) parsed as docs/heartbeat.md describes it. */
final class ThreadTableFile {
    static final class Row {
        final long tid;
        final long javaId;
        final String match;
        final boolean daemon;
        final String name;

        Row(long tid, long javaId, String match, boolean daemon, String name) {
            this.tid = tid;
            this.javaId = javaId;
            this.match = match;
            this.daemon = daemon;
            this.name = name;
        }

        @Override
        public String toString() {
            return tid + "/" + javaId + "/" + match + "/" + (daemon ? 1 : 0) + "/" + name;
        }
    }

    final long pid;
    final long snapshotNs;
    final List<Row> rows = new ArrayList<>();

    private ThreadTableFile(long pid, long snapshotNs) {
        this.pid = pid;
        this.snapshotNs = snapshotNs;
    }

    static ThreadTableFile read(Path file) throws IOException {
        String text = new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
        assertTrue(text.endsWith("\n"), "thread table does not end in a newline");
        String[] lines = text.split("\n");
        String[] header = lines[0].split(" ");
        assertEquals("# stallscope threads v1", String.join(" ", header[0], header[1], header[2], header[3]),
                "header of " + file);
        ThreadTableFile table = new ThreadTableFile(Long.parseLong(header[4]), Long.parseLong(header[5]));
        for (int i = 1; i < lines.length; i++) {
            String[] f = lines[i].split("\t", -1);
            assertEquals(5, f.length, "fields in line " + (i + 1) + ": " + lines[i]);
            table.rows.add(new Row(Long.parseLong(f[0]), Long.parseLong(f[1]), f[2], f[3].equals("1"), unescape(f[4])));
        }
        return table;
    }

    Row named(String name) {
        for (Row r : rows) {
            if (r.name.equals(name)) {
                return r;
            }
        }
        throw new AssertionError("no thread named '" + name + "' in " + rows);
    }

    static String unescape(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length()) {
                char n = s.charAt(++i);
                sb.append(n == 't' ? '\t' : n == 'n' ? '\n' : n);
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }
}
