package io.stallscope.agent.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The agent argument string: defaults, units, ranges, and one sentence per mistake. */
class AgentOptionsTest {
    @Test
    void emptyMeansDefaults() throws InvalidOption {
        for (String text : new String[] {null, "", " ", ",,"}) {
            AgentOptions o = AgentOptions.parse(text, false);
            assertEquals(1_000_000L, o.resolutionNs);
            assertEquals(5_000_000_000L, o.intervalNs);
            assertEquals(0L, o.delayNs);
            assertEquals("stallscope-%pid-%date.hlog", o.logTemplate);
            assertNull(o.heartbeatTemplate);
            assertFalse(o.help);
            assertFalse(o.stop);
        }
    }

    @Test
    void durationsTakeEveryUnitAndDecimals() throws InvalidOption {
        assertEquals(500_000L, AgentOptions.parse("resolution=500us", false).resolutionNs);
        assertEquals(250_000L, AgentOptions.parse("resolution=250000ns", false).resolutionNs);
        assertEquals(2_500_000_000L, AgentOptions.parse("interval=2.5s", false).intervalNs);
        assertEquals(1_500_000L, AgentOptions.parse("resolution=1.5ms", false).resolutionNs);
        assertEquals(30_000_000_000L, AgentOptions.parse(" delay = 30s ", false).delayNs);
        assertEquals(0L, AgentOptions.parse("delay=0s", false).delayNs);
    }

    @Test
    void pathsAndFlags() throws InvalidOption {
        AgentOptions o = AgentOptions.parse("log=/tmp/a-%pid.hlog,heartbeat=/run/x/hb-%pid.heartbeat", false);
        assertEquals("/tmp/a-%pid.hlog", o.logTemplate);
        assertEquals("/run/x/hb-%pid.heartbeat", o.heartbeatTemplate);
        assertTrue(AgentOptions.parse("help", false).help);
        assertTrue(AgentOptions.parse("stop", true).stop);
    }

    @Test
    void eachMistakeIsOneSentenceNamingTheOptionAndWhatIsAllowed() {
        assertMessage("resolution=abc", "resolution=abc is not a duration (use e.g. 1ms, 500us; units ns, us, ms, s; from 1us to 1s)");
        assertMessage("resolution=2s", "resolution=2s is out of range (use from 1us to 1s)");
        assertMessage("resolution=1.5ns", "resolution=1.5ns is out of range (use from 1us to 1s)");
        assertMessage("resolution=1.0001us", "resolution=1.0001us is not a whole number of nanoseconds (use e.g. 1ms, 500us)");
        assertMessage("interval=50ms", "interval=50ms is out of range (use from 100ms to 3600s)");
        assertMessage("interval=100ms,resolution=200ms", "interval=100ms is shorter than resolution=200ms (the interval must be at least the resolution)");
        assertMessage("delay=1", "delay=1 is not a duration (use e.g. 0s, 30s; units ns, us, ms, s; from 0s to 86400s)");
        assertMessage("verbose", "verbose is not an option (options: resolution, interval, delay, log, heartbeat, help, stop)");
        assertMessage("res=1ms", "res=1ms is not an option (options: resolution, interval, delay, log, heartbeat, help, stop)");
        assertMessage("log=a,log=b", "log is given twice (log=a, log=b); give it once");
        assertMessage("heartbeat=", "heartbeat needs a file path (use e.g. heartbeat=/dev/shm/stallscope-%pid.heartbeat; %pid and %date are replaced)");
        assertMessage("heartbeat=/dev/shm/x.threads", "heartbeat=/dev/shm/x.threads ends in .threads, the name of the thread table beside it (use e.g. heartbeat=/dev/shm/stallscope-%pid.heartbeat)");
        assertMessage("stop=now", "stop=now takes no value (write just stop)");
        InvalidOption premainStop = assertThrows(InvalidOption.class, () -> AgentOptions.parse("stop", false));
        assertTrue(premainStop.getMessage().startsWith("stop only stops an agent in a running JVM"));
    }

    @Test
    void durationsPrintInTheirLargestExactUnit() {
        assertEquals("1ms", AgentOptions.format(1_000_000L));
        assertEquals("500us", AgentOptions.format(500_000L));
        assertEquals("5s", AgentOptions.format(5_000_000_000L));
        assertEquals("1500us", AgentOptions.format(1_500_000L));
        assertEquals("7ns", AgentOptions.format(7L));
        assertEquals("0s", AgentOptions.format(0L));
    }

    private static void assertMessage(String text, String message) {
        InvalidOption e = assertThrows(InvalidOption.class, () -> AgentOptions.parse(text, true), text);
        assertEquals(message, e.getMessage());
        assertFalse(e.getMessage().contains("\n"));
    }
}
