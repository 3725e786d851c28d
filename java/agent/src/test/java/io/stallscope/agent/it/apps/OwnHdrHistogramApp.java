package io.stallscope.agent.it.apps;

import org.HdrHistogram.Histogram;

/**
 * An application with its own HdrHistogram (a different version from the agent's) on its class path.
 * It records into it and prints where its Histogram class came from, then tries to reach the agent's
 * classes and its relocated HdrHistogram, printing {@code visible <class>} or {@code hidden <class>}.
 */
public final class OwnHdrHistogramApp {
    public static final String[] AGENT_CLASSES = {
        "io.stallscope.agent.core.Agent",
        "io.stallscope.agent.core.HiccupMeter",
        "io.stallscope.agent.shaded.org.HdrHistogram.Histogram",
        "io.stallscope.agent.shaded.org.HdrHistogram.SingleWriterRecorder",
    };

    private OwnHdrHistogramApp() {
    }

    public static void main(String[] args) throws Exception {
        Histogram h = new Histogram(3);
        for (int i = 1; i <= 1000; i++) {
            h.recordValue(i);
        }
        System.out.println("p50 " + h.getValueAtPercentile(50));
        System.out.println("histogram-from " + Histogram.class.getProtectionDomain().getCodeSource().getLocation());
        for (String name : AGENT_CLASSES) {
            try {
                Class.forName(name);
                System.out.println("visible " + name);
            } catch (ClassNotFoundException e) {
                System.out.println("hidden " + name);
            }
            try {
                ClassLoader.getSystemClassLoader().loadClass(name);
                System.out.println("visible-to-system-loader " + name);
            } catch (ClassNotFoundException e) {
                System.out.println("hidden-from-system-loader " + name);
            }
        }
        AppControl.serve();
    }
}
