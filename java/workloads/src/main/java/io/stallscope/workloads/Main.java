package io.stallscope.workloads;

import java.util.Arrays;

/** Dispatches {@code java -jar stallscope-workloads.jar <workload> [options]} to a workload. */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args[0].equals("-help") || args[0].equals("--help")) {
            System.out.println("usage: java -jar stallscope-workloads.jar <workload> [options]   (each takes --help)");
            System.out.println("  counted-loop    seed 004: a nested int counted loop beside a 1 ms jitter thread");
            System.out.println("  mapped-read     seed 000: MappedByteBuffer reads while safepoints are requested");
            System.out.println("  mapped-write    a READ_WRITE MappedByteBuffer updated while force() writes it back");
            System.out.println("  tlb-readers     seed 002: many small files read by mmap or into pooled buffers");
            System.out.println("  safepoint-storm seed 003: busy threads and frequent safepoints");
            System.out.println("  idle            a quiet JVM (threads that sleep)");
            System.out.println("  heap-gc         timed full GCs of a live heap (the swap and slow-log scenarios)");
            System.out.println("  memory-squeeze  fresh memory needed while the page cache fills (the memory-pressure scenario)");
            System.out.println("  set-memory      a huge Unsafe.setMemory that holds every safepoint (the frames benchmark)");
            System.out.println("  jmx-dump        a remote JMX client asking another JVM for thread dumps");
            System.out.println("  gc-locker       a JNI critical region (Deflater) held while another thread allocates");
            return;
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "counted-loop": CountedLoop.main(rest); break;
            case "mapped-read": MappedRead.main(rest); break;
            case "mapped-write": MappedWrite.main(rest); break;
            case "tlb-readers": TlbReaders.main(rest); break;
            case "safepoint-storm": SafepointStorm.main(rest); break;
            case "idle": Idle.main(rest); break;
            case "heap-gc": HeapGc.main(rest); break;
            case "memory-squeeze": MemorySqueeze.main(rest); break;
            case "set-memory": SetMemory.main(rest); break;
            case "jmx-dump": JmxDump.main(rest); break;
            case "gc-locker": GcLocker.main(rest); break;
            default:
                System.err.println("unknown workload '" + args[0] + "' (counted-loop, mapped-read, mapped-write, tlb-readers, safepoint-storm, idle, heap-gc, memory-squeeze, set-memory, jmx-dump, gc-locker)");
                System.exit(2);
        }
    }
}
