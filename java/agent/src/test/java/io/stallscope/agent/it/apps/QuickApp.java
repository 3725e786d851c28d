package io.stallscope.agent.it.apps;

/** An application that prints one line and returns at once: proof that it ran whatever the agent did. */
public final class QuickApp {
    private QuickApp() {
    }

    public static void main(String[] args) {
        System.out.println("app ran");
    }
}
