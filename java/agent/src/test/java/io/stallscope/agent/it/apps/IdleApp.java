package io.stallscope.agent.it.apps;

import java.util.ArrayList;
import java.util.List;

/**
 * An application that does nothing until told to exit, the quietest host for the meter. Its one extra
 * command, {@code churn}, starts, renames and ends threads, so the thread table has work to do.
 */
public final class IdleApp {
    private IdleApp() {
    }

    public static void main(String[] args) throws Exception {
        AppControl.serve(command -> {
            if (!command.equals("churn")) {
                return false;
            }
            churn();
            System.out.println("churned");
            return true;
        });
    }

    private static void churn() {
        try {
            for (int round = 0; round < 8; round++) {
                List<Thread> threads = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    Thread t = new Thread(() -> {
                        Thread.currentThread().setName("churn-renamed-" + Thread.currentThread().getId());
                        try {
                            Thread.sleep(150);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }, "churn-" + round + "-" + i);
                    t.start();
                    threads.add(t);
                }
                for (Thread t : threads) {
                    t.join();
                }
                Thread.sleep(100);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
