package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

import io.stallscope.agent.it.apps.OwnHdrHistogramApp;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Nothing of the agent reaches the application: the jar shows the class loader only its bootstrap, and
 * an application with another HdrHistogram version keeps using its own while the agent runs.
 */
class IsolationIT {
    private static final Path APP_HDRHISTOGRAM = Paths.get(System.getProperty("stallscope.appHdrHistogramJar"));

    @TempDir
    Path dir;

    @Test
    void jarShowsTheClassPathOnlyTheBootstrap() throws Exception {
        List<String> classes = new ArrayList<>();
        try (JarFile jar = new JarFile(TargetJvm.AGENT_JAR.toFile())) {
            Collections.list(jar.entries()).forEach(e -> {
                assertTrue(!e.getName().startsWith("org/HdrHistogram"), "unrelocated " + e.getName());
                if (e.getName().endsWith(".class")) {
                    classes.add(e.getName());
                }
            });
            Collections.sort(classes);
            assertEquals(List.of("io/stallscope/agent/Bootstrap.class", "io/stallscope/agent/CoreClassLoader.class"),
                    classes, "the only classes the system class loader can load from the agent jar");

            Attributes manifest = jar.getManifest().getMainAttributes();
            assertEquals("io.stallscope.agent.Bootstrap", manifest.getValue("Premain-Class"));
            assertEquals("io.stallscope.agent.Bootstrap", manifest.getValue("Agent-Class"));
            assertEquals("false", manifest.getValue("Can-Retransform-Classes"));

            ZipEntry core = jar.getEntry("io/stallscope/agent/stallscope-agent-core.jar");
            assertTrue(core != null, "the core jar is stored inside the agent jar");
            boolean relocated = false;
            try (InputStream in = jar.getInputStream(core); ZipInputStream nested = new ZipInputStream(in)) {
                for (ZipEntry e; (e = nested.getNextEntry()) != null; ) {
                    assertTrue(!e.getName().startsWith("org/"), "core jar holds unrelocated " + e.getName());
                    relocated |= e.getName().equals("io/stallscope/agent/shaded/org/HdrHistogram/SingleWriterRecorder.class");
                }
            }
            assertTrue(relocated, "HdrHistogram is relocated to io.stallscope.agent.shaded.org.HdrHistogram");
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Jdk.class)
    void applicationKeepsItsOwnHdrHistogram(Jdk jdk) throws Exception {
        Path runtimeDir = Files.createDirectory(dir.resolve("run"));
        try (TargetJvm jvm = TargetJvm.on(jdk, dir).env("XDG_RUNTIME_DIR", runtimeDir.toString())
                .classPath(APP_HDRHISTOGRAM).agent("log=" + dir.resolve("h.hlog"))
                .start(OwnHdrHistogramApp.class)) {
            jvm.awaitLine("ready", Duration.ofSeconds(30));
            HeartbeatView hb = HeartbeatView.await(runtimeDir.resolve("stallscope-" + jvm.pid() + ".heartbeat"),
                    Duration.ofSeconds(20), jvm);
            hb.awaitState(HeartbeatView.RUNNING, Duration.ofSeconds(20));

            List<String> out = jvm.stdoutLines();
            assertTrue(out.contains("p50 500"), "the application's HdrHistogram works" + jvm.describe());
            String from = jvm.awaitLine("histogram-from ", Duration.ofSeconds(1));
            assertTrue(from.endsWith(APP_HDRHISTOGRAM.getFileName().toString()),
                    "org.HdrHistogram.Histogram comes from the application's jar: " + from);
            for (String name : OwnHdrHistogramApp.AGENT_CLASSES) {
                assertTrue(out.contains("hidden " + name), name + " is hidden from Class.forName" + jvm.describe());
                assertTrue(out.contains("hidden-from-system-loader " + name), name + " is hidden from the system loader");
            }
            jvm.exitNormally();
        }
    }
}
