package io.stallscope.lucene;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.store.MMapDirectory;

/**
 * A search service in small: {@code index DIR} writes an index of random text (one compound
 * segment), {@code search DIR} searches it through {@link MMapDirectory} from query threads while
 * the main thread asks for a safepoint every {@code --every} and times each. On a slow disk with
 * the index out of the page cache, a query thread's read of the mapping is a major fault that the
 * whole JVM waits for at the next safepoint.
 */
public final class LuceneSearch {
    static final String USAGE = String.join("\n",
            "usage: LuceneSearch index DIR [--docs 200000]",
            "       LuceneSearch search DIR [--threads 2] [--queries 40] [--every 50ms]",
            "  index: writes an index of --docs documents of random words into DIR (one compound segment).",
            "  search: --threads query threads (search-0, search-1, ...) each run --queries term queries through",
            "  MMapDirectory, while the main thread dumps the threads (a safepoint) every --every and times it.",
            "  Prints one JSON line.");

    static final int WORDS = 50_000;

    static String word(Random r) {
        return "w" + Integer.toString(r.nextInt(WORDS), 36);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || !(args[0].equals("index") || args[0].equals("search"))) {
            System.err.println(USAGE);
            System.exit(2);
        }
        Path dir = Paths.get(args[1]);
        if (args[0].equals("index")) {
            index(dir, (int) flag(args, "--docs", 200_000));
        } else {
            search(dir, (int) flag(args, "--threads", 2), (int) flag(args, "--queries", 40),
                    flag(args, "--every", 50));
        }
    }

    /** A numeric flag's value (for --every, milliseconds, an optional "ms" suffix). */
    static long flag(String[] args, String name, long dflt) {
        for (int i = 2; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                String v = args[i + 1].endsWith("ms") ? args[i + 1].substring(0, args[i + 1].length() - 2) : args[i + 1];
                try {
                    return Long.parseLong(v);
                } catch (NumberFormatException e) {
                    System.err.println(name + " " + args[i + 1] + ": not a number\n" + USAGE);
                    System.exit(2);
                }
            }
        }
        return dflt;
    }

    static void index(Path dir, int docs) throws Exception {
        Random r = new Random(42);
        IndexWriterConfig cfg = new IndexWriterConfig(new StandardAnalyzer()).setUseCompoundFile(true);
        try (Directory d = FSDirectory.open(dir); IndexWriter w = new IndexWriter(d, cfg)) {
            StringBuilder body = new StringBuilder();
            for (int i = 0; i < docs; i++) {
                body.setLength(0);
                for (int k = 0; k < 20; k++) {
                    body.append(word(r)).append(' ');
                }
                Document doc = new Document();
                doc.add(new StringField("id", Integer.toString(i), Field.Store.YES));
                doc.add(new TextField("body", body.toString(), Field.Store.NO));
                w.addDocument(doc);
            }
            w.forceMerge(1);
        }
        System.out.println("{\"workload\":\"lucene-index\",\"docs\":" + docs + "}");
    }

    static void search(Path dir, int threads, int queries, long everyMs) throws Exception {
        AtomicLong hits = new AtomicLong();
        long maxSafepointNs = 0;
        int safepoints = 0;
        try (Directory d = new MMapDirectory(dir); DirectoryReader reader = DirectoryReader.open(d)) {
            IndexSearcher searcher = new IndexSearcher(reader);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Random r = new Random(t);
                Thread th = new Thread(() -> {
                    for (int q = 0; q < queries; q++) {
                        hits.addAndGet(query(searcher, word(r)));
                    }
                }, "search-" + t);
                th.start();
                ts.add(th);
            }
            while (ts.stream().anyMatch(Thread::isAlive)) {
                Thread.sleep(everyMs);
                long t0 = System.nanoTime();
                ManagementFactory.getThreadMXBean().dumpAllThreads(false, false);
                maxSafepointNs = Math.max(maxSafepointNs, System.nanoTime() - t0);
                safepoints++;
            }
            for (Thread th : ts) {
                th.join();
            }
        }
        System.out.println("{\"workload\":\"lucene-search\",\"threads\":" + threads + ",\"queries\":" + queries
                + ",\"hits\":" + hits.get() + ",\"safepoints\":" + safepoints + ",\"max_safepoint_ns\":" + maxSafepointNs + "}");
    }

    /** One term query: the user's own code, from which Lucene reads the mapped index. */
    static long query(IndexSearcher searcher, String word) {
        try {
            return searcher.search(new TermQuery(new Term("body", word)), 10).totalHits.value;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
