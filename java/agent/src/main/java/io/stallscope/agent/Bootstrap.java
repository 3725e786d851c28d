package io.stallscope.agent;

import java.io.IOException;
import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * The agent's entry point ({@code Premain-Class} and {@code Agent-Class}) and, with
 * {@link CoreClassLoader}, the only code of the agent the application's class loader can see. It
 * defines the real agent and the HdrHistogram it uses from the jar stored inside this one, in a class
 * loader of their own, so nothing the agent needs can clash with, or be found by, the application.
 * Invariants: the core is defined once per JVM, however often the agent is loaded (so {@code stop} and
 * a second start reach the running agent); no exception or error leaves premain or agentmain.
 */
public final class Bootstrap {
    static final String CORE_JAR_RESOURCE = "stallscope-agent-core.jar";
    private static final String CORE_ENTRY_CLASS = "io.stallscope.agent.core.Agent";

    private static Method coreEntry; // guarded by Bootstrap.class

    private Bootstrap() {
    }

    public static void premain(String options, Instrumentation instrumentation) {
        run(options, false);
    }

    public static void agentmain(String options, Instrumentation instrumentation) {
        run(options, true);
    }

    private static void run(String options, boolean attached) {
        try {
            coreEntry().invoke(null, options, attached, version());
        } catch (InvocationTargetException e) {
            complain(e.getCause());
        } catch (Throwable t) {
            complain(t);
        }
    }

    private static synchronized Method coreEntry() throws IOException, ReflectiveOperationException {
        if (coreEntry == null) {
            InputStream jar = Bootstrap.class.getResourceAsStream(CORE_JAR_RESOURCE);
            if (jar == null) {
                throw new IOException(CORE_JAR_RESOURCE + " is missing from the agent jar");
            }
            CoreClassLoader loader;
            try (jar) {
                loader = CoreClassLoader.fromJar(jar, Bootstrap.class.getProtectionDomain());
            }
            coreEntry = Class.forName(CORE_ENTRY_CLASS, true, loader)
                    .getMethod("run", String.class, boolean.class, String.class);
        }
        return coreEntry;
    }

    private static String version() {
        String version = Bootstrap.class.getPackage().getImplementationVersion();
        return version != null ? version : "(unknown version)";
    }

    private static void complain(Throwable t) {
        try {
            System.err.println(("stallscope-agent: could not load the agent (" + t + "); the agent is not started")
                    .replace('\n', ' '));
        } catch (Throwable ignored) {
            // Nothing is left to tell the user with; the application must still run.
        }
    }
}
