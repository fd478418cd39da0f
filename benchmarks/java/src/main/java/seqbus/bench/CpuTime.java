package seqbus.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * A cross-check of {@link Report} that a loaded machine disturbs less: the same benchmark
 * methods in one JVM, each timed by the thread's CPU time (time the thread was not running,
 * preempted by other work on the machine, does not count), in short slices, seqbus and SBE
 * alternating, after a shared warm-up; per operation the median ns of CPU per call over the
 * slices and SBE's over seqbus's. Not JMH: no forks, no blackhole but a sum the loop returns.
 *
 * <p>Arguments: slices (default 40) of calls (default 200,000) each.
 */
public final class CpuTime {
    private CpuTime() {
    }

    static long sink;

    static double slice(ThreadMXBean mx, LongSupplier op, int calls) {
        long s = 0;
        long t0 = mx.getCurrentThreadCpuTime();
        for (int i = 0; i < calls; i++) {
            s += op.getAsLong();
        }
        long t1 = mx.getCurrentThreadCpuTime();
        sink += s;
        return (t1 - t0) / (double) calls;
    }

    static double median(List<Double> v) {
        List<Double> s = new ArrayList<>(v);
        Collections.sort(s);
        int n = s.size();
        return n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
    }

    public static void main(String[] args) {
        int slices = args.length > 0 ? Integer.parseInt(args[0]) : 40;
        int calls = args.length > 1 ? Integer.parseInt(args[1]) : 200_000;
        CodecBenchmark b = new CodecBenchmark();
        b.setup();
        String[] names = {"encodeNewOrder", "decodeNewOrder", "encodeBookUpdate", "decodeBookUpdate"};
        LongSupplier[] ours = {b::encodeNewOrderSeqbus, b::decodeNewOrderSeqbus,
                               b::encodeBookUpdateSeqbus, b::decodeBookUpdateSeqbus};
        LongSupplier[] theirs = {b::encodeNewOrderSbe, b::decodeNewOrderSbe, b::encodeBookUpdateSbe,
                                 b::decodeBookUpdateSbe};
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        for (int w = 0; w < 10; w++) {
            for (int k = 0; k < names.length; k++) {
                slice(mx, ours[k], calls);
                slice(mx, theirs[k], calls);
            }
        }
        System.out.println("| operation | seqbus CPU ns/call, median (range) | SBE CPU ns/call, median (range) "
                           + "| SBE/seqbus, median of slices (range) |");
        System.out.println("|---|---:|---:|---:|");
        for (int k = 0; k < names.length; k++) {
            List<Double> a = new ArrayList<>();
            List<Double> c = new ArrayList<>();
            List<Double> r = new ArrayList<>();
            for (int i = 0; i < slices; i++) {
                double x;
                double y;
                if (i % 2 == 0) {
                    x = slice(mx, ours[k], calls);
                    y = slice(mx, theirs[k], calls);
                } else {
                    y = slice(mx, theirs[k], calls);
                    x = slice(mx, ours[k], calls);
                }
                a.add(x);
                c.add(y);
                r.add(y / x);
            }
            System.out.printf(Locale.ROOT, "| %s | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.2f× (%.2f–%.2f) |%n",
                              names[k], median(a), Collections.min(a), Collections.max(a), median(c),
                              Collections.min(c), Collections.max(c), median(r), Collections.min(r),
                              Collections.max(r));
        }
        if (sink == 42) {
            System.out.println();
        }
    }
}
