package io.stallscope.agent.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** /proc parsing, on a command name built to break naive splitting, and on this very process. */
class ProcSelfTest {
    @Test
    void startTimeIsField22EvenWhenTheCommandHoldsSpacesAndParentheses() {
        String stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 17 0 987654 123 45 "
                + "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assertEquals(987654L, ProcSelf.startTimeFromStat(stat));
    }

    @Test
    void readsThisProcessAndThisThread() {
        assertTrue(ProcSelf.startTime(ProcSelf.pid()) > 0);
        assertEquals(-1L, ProcSelf.startTime(999_999_999L));
        assertTrue(ProcSelf.currentTid() > 0);
    }
}
