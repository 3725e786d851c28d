package io.stallscope.workloads;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import javax.management.MBeanServerConnection;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * A remote JMX client, as a monitoring tool is: it connects to a JVM's JMX agent over RMI and
 * asks it for thread dumps ({@code ThreadMXBean.dumpAllThreads}, a safepoint in the JVM it asks),
 * {@code --count} times, {@code --every} apart. The stalls it sets off are laid at the remote
 * client by the RMI connection thread's name in the JVM ({@code RMI TCP Connection(N)-address}).
 */
public final class JmxDump {
    static final String USAGE = String.join("\n",
            "usage: jmx-dump --port N [--host 127.0.0.1] [--count 5] [--every 200ms]",
            "  connects to the JMX agent at host:port (com.sun.management.jmxremote.port, no authentication",
            "  or SSL) and asks for every thread's stack, with locks, --count times --every apart.",
            "  Prints a summary, then one JSON line.");

    public static void main(String[] args) throws Exception {
        Options o = new Options("jmx-dump", USAGE, args, "port", "host", "count", "every");
        long port = o.integer("port", 0);
        if (port <= 0) {
            o.fail("--port is required");
        }
        String host = o.string("host", "127.0.0.1");
        int count = (int) o.integer("count", 5);
        long every = o.nanos("every", "200ms");
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + host + ":" + port + "/jmxrmi");
        Latencies dumps = new Latencies();
        try (JMXConnector c = JMXConnectorFactory.connect(url)) {
            MBeanServerConnection server = c.getMBeanServerConnection();
            ThreadMXBean threads = ManagementFactory.newPlatformMXBeanProxy(
                    server, ManagementFactory.THREAD_MXBEAN_NAME, ThreadMXBean.class);
            for (int i = 0; i < count; i++) {
                if (i > 0) {
                    Thread.sleep(every / 1_000_000);
                }
                long t0 = System.nanoTime();
                threads.dumpAllThreads(true, true);
                dumps.add(System.nanoTime() - t0);
            }
        }
        System.out.println("jmx-dump: " + count + " remote thread dumps of " + host + ":" + port + ": " + dumps.human());
        System.out.println("{\"workload\":\"jmx-dump\"," + Latencies.jvm() + ",\"dumps\":" + dumps.json() + "}");
    }
}
