package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A JVM started by a test, running one of the test applications (io.stallscope.agent.it.apps) with or
 * without the agent. Its stdout and stderr go to files in the test's directory, so a chatty JVM never
 * blocks on a full pipe and a failing test can show both. Invariant: {@link #close} kills the JVM
 * whatever state it is in; tests use try-with-resources so no JVM outlives its test.
 */
final class TargetJvm implements AutoCloseable {
    static final Path AGENT_JAR = Paths.get(System.getProperty("stallscope.agentJar", "target/stallscope-agent.jar"));
    static final Path TEST_CLASSES = Paths.get(System.getProperty("stallscope.testClasses", "target/test-classes"));

    private final Process process;
    private final OutputStream stdin;
    private final Path stdout;
    private final Path stderr;

    private TargetJvm(Process process, Path stdout, Path stderr) {
        this.process = process;
        this.stdin = process.getOutputStream();
        this.stdout = stdout;
        this.stderr = stderr;
    }

    static Builder on(Jdk jdk, Path dir) {
        return new Builder(jdk, dir);
    }

    static final class Builder {
        private final Jdk jdk;
        private final Path dir;
        private final List<String> jvmArgs = new ArrayList<>();
        private final List<Path> classPath = new ArrayList<>(List.of(TEST_CLASSES));
        private final Map<String, String> env = new java.util.HashMap<>();
        private final List<String> envRemoved = new ArrayList<>();
        private String name = "jvm";

        private Builder(Jdk jdk, Path dir) {
            this.jdk = jdk;
            this.dir = dir;
        }

        /** Loads the agent at startup: -javaagent:stallscope-agent.jar=options. */
        Builder agent(String options) {
            jvmArgs.add("-javaagent:" + AGENT_JAR + (options.isEmpty() ? "" : "=" + options));
            return this;
        }

        Builder jvmArgs(String... args) {
            jvmArgs.addAll(Arrays.asList(args));
            return this;
        }

        Builder classPath(Path entry) {
            classPath.add(entry);
            return this;
        }

        Builder env(String key, String value) {
            env.put(key, value);
            return this;
        }

        Builder withoutEnv(String key) {
            envRemoved.add(key);
            return this;
        }

        /** Names the output files (name.out, name.err) when a test starts several JVMs. */
        Builder named(String name) {
            this.name = name;
            return this;
        }

        TargetJvm start(Class<?> main, String... args) throws IOException {
            List<String> command = new ArrayList<>();
            command.add(jdk.java().toString());
            command.addAll(jvmArgs);
            command.add("-cp");
            command.add(String.join(":", classPath.stream().map(Path::toString).toArray(String[]::new)));
            command.add(main.getName());
            command.addAll(Arrays.asList(args));
            Path out = dir.resolve(name + ".out");
            Path err = dir.resolve(name + ".err");
            ProcessBuilder pb = new ProcessBuilder(command).directory(dir.toFile())
                    .redirectOutput(out.toFile()).redirectError(err.toFile());
            pb.environment().putAll(env);
            envRemoved.forEach(pb.environment()::remove);
            return new TargetJvm(pb.start(), out, err);
        }
    }

    long pid() {
        return process.pid();
    }

    /** Waits for a stdout line starting with {@code prefix} and returns it. */
    String awaitLine(String prefix, Duration timeout) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            for (String line : stdoutLines()) {
                if (line.startsWith(prefix)) {
                    return line;
                }
            }
            if (!process.isAlive()) {
                break;
            }
            Thread.sleep(20);
        }
        return fail("no line starting with '" + prefix + "' from pid " + pid() + " within " + timeout + describe());
    }

    /** Sends one command line to the application (see apps.AppControl). */
    void send(String command) throws IOException {
        stdin.write((command + "\n").getBytes(StandardCharsets.UTF_8));
        stdin.flush();
    }

    /** Sends a command and returns the first new stdout line that starts with {@code replyPrefix}. */
    String ask(String command, String replyPrefix) throws IOException, InterruptedException {
        int seen = stdoutLines().size();
        send(command);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            List<String> lines = stdoutLines();
            for (int i = seen; i < lines.size(); i++) {
                if (lines.get(i).startsWith(replyPrefix)) {
                    return lines.get(i);
                }
            }
            Thread.sleep(20);
        }
        return fail("no reply '" + replyPrefix + "' to '" + command + "'" + describe());
    }

    int awaitExit(Duration timeout) throws InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            fail("pid " + pid() + " did not exit within " + timeout + describe());
        }
        return process.exitValue();
    }

    /** Asks the application to return from main, and checks that the JVM exits with status 0. */
    void exitNormally() throws IOException, InterruptedException {
        send("exit");
        int status = awaitExit(Duration.ofSeconds(30));
        assertTrue(status == 0, "exit status " + status + describe());
    }

    boolean isAlive() {
        return process.isAlive();
    }

    List<String> stdoutLines() throws IOException {
        return Files.readAllLines(stdout, StandardCharsets.UTF_8);
    }

    List<String> stderrLines() throws IOException {
        return Files.readAllLines(stderr, StandardCharsets.UTF_8);
    }

    /** stdout and stderr, for assertion messages. */
    String describe() {
        try {
            return "\n--- stdout of pid " + pid() + ":\n" + Files.readString(stdout) + "--- stderr:\n"
                    + Files.readString(stderr);
        } catch (IOException e) {
            return " (output unreadable: " + e + ")";
        }
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the kill is sent; JUnit sees the interrupt
        }
        try {
            stdin.close();
        } catch (IOException e) {
            // the process is gone
        }
    }
}
