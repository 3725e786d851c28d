package io.stallscope.agent.core;

/**
 * An agent option the agent cannot honour. Its message is the whole user-facing sentence: it names the
 * option as given and the values that are allowed, and fits on one line.
 */
final class InvalidOption extends Exception {
    private static final long serialVersionUID = 1L;

    InvalidOption(String message) {
        super(message, null, false, false);
    }
}
