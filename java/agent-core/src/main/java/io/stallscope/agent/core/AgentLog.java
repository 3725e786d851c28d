package io.stallscope.agent.core;

/**
 * The agent's only voice: one line on the application's standard error, prefixed
 * {@code stallscope-agent: }. Invariant: every message is exactly one line, whatever the text of a
 * Throwable it carries, so the application's stderr stays parseable and a user sees one clear cause.
 */
final class AgentLog {
    static final String PREFIX = "stallscope-agent: ";

    private AgentLog() {
    }

    static void line(String message) {
        System.err.println(PREFIX + oneLine(message));
    }

    static void failure(String what, Throwable cause) {
        line(what + ": " + cause);
    }

    /** Multi-line text shown only when the user asked for it ({@code help}). */
    static void block(String text) {
        System.err.print(text);
        System.err.flush();
    }

    private static String oneLine(String s) {
        return s.replace('\n', ' ').replace('\r', ' ');
    }
}
