package io.stallscope.agent.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * The JDKs every integration test runs the agent on: the one running the build (JDK 17 here,
 * {@code java.home}) and Temurin 25 under /usr/lib/jvm. A missing JDK fails the test that needs it,
 * with the place it was looked for; it never skips.
 */
enum Jdk {
    BUILD_JDK {
        @Override
        Path home() {
            return Paths.get(System.getProperty("java.home"));
        }
    },
    TEMURIN_25 {
        @Override
        Path home() {
            Path jvms = Paths.get("/usr/lib/jvm");
            try (DirectoryStream<Path> homes = Files.newDirectoryStream(jvms, "temurin-25-jdk*")) {
                for (Path home : homes) {
                    if (Files.isExecutable(home.resolve("bin/java"))) {
                        return home;
                    }
                }
            } catch (IOException e) {
                // reported below
            }
            return fail("Temurin 25 is missing: no /usr/lib/jvm/temurin-25-jdk*/bin/java. The agent must be "
                    + "tested on JDK 17 and 25; install Temurin 25 (e.g. apt-get install temurin-25-jdk "
                    + "from the Adoptium repository)");
        }
    };

    abstract Path home();

    Path java() {
        return home().resolve("bin/java");
    }

    /** The JDK's feature release, from its release file (e.g. 17, 25). */
    int feature() {
        try {
            for (String line : Files.readAllLines(home().resolve("release"))) {
                if (line.startsWith("JAVA_VERSION=")) {
                    String v = line.substring("JAVA_VERSION=".length()).replace("\"", "");
                    int dot = v.indexOf('.');
                    return Integer.parseInt(dot < 0 ? v : v.substring(0, dot));
                }
            }
        } catch (IOException | RuntimeException e) {
            // reported below
        }
        return fail("cannot tell the version of the JDK at " + home());
    }
}
