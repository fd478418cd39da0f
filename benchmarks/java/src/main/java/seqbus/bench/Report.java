package seqbus.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.Options;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * Runs {@link CodecBenchmark} in rounds, seqbus and SBE of one operation back to back in each
 * round (which goes first alternates), one forked JVM per run, so that both sides of a ratio
 * share the machine's slow and fast moments; prints per operation the median ns/op of each
 * side with the range over the rounds, and SBE's time over seqbus's (seqbus's speed relative
 * to SBE's: 1.0 equal, above 1 faster) as the median and range of the per-round ratios.
 *
 * <p>Arguments: rounds (default 5), warmup and measured iterations of 1 s per run (3, 5).
 * The system property {@code bench.jvm} names another java for the forks (a newer JDK).
 */
public final class Report {
    private static final String[] OPERATIONS = {
        "encodeNewOrder", "decodeNewOrder", "encodeBookUpdate", "decodeBookUpdate",
    };

    private Report() {
    }

    static double run(String benchmark, int warmup, int measured) throws RunnerException {
        OptionsBuilder builder = new OptionsBuilder();
        String jvm = System.getProperty("bench.jvm", "");
        if (!jvm.isEmpty()) {
            builder.jvm(jvm);
        }
        Options options = builder
            .include(CodecBenchmark.class.getName() + "." + benchmark + "$")
            .forks(1)
            .warmupIterations(warmup)
            .warmupTime(TimeValue.seconds(1))
            .measurementIterations(measured)
            .measurementTime(TimeValue.seconds(1))
            // Agrona (SBE's buffers) reads memory through jdk.internal.misc.Unsafe
            .jvmArgsAppend("--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED")
            .shouldFailOnError(true)
            .verbosity(VerboseMode.SILENT)
            .build();
        RunResult result = new Runner(options).runSingle();
        return result.getPrimaryResult().getScore();
    }

    static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    static String load() {
        try {
            return Files.readString(Paths.get("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "unknown";
        }
    }

    public static void main(String[] args) throws RunnerException {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        int measured = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        System.out.printf("Java codecs: %d rounds of %d+%d s per run, JVM %s, %d CPUs, load %s%n",
                          rounds, warmup, measured,
                          System.getProperty("bench.jvm", "").isEmpty()
                              ? System.getProperty("java.vm.version") : System.getProperty("bench.jvm"),
                          Runtime.getRuntime().availableProcessors(), load());
        Map<String, List<Double>> seqbus = new LinkedHashMap<>();
        Map<String, List<Double>> sbe = new LinkedHashMap<>();
        Map<String, List<Double>> ratio = new LinkedHashMap<>();
        for (String op : OPERATIONS) {
            seqbus.put(op, new ArrayList<>());
            sbe.put(op, new ArrayList<>());
            ratio.put(op, new ArrayList<>());
        }
        for (int round = 0; round < rounds; round++) {
            for (String op : OPERATIONS) {
                double ours;
                double theirs;
                if (round % 2 == 0) {
                    ours = run(op + "Seqbus", warmup, measured);
                    theirs = run(op + "Sbe", warmup, measured);
                } else {
                    theirs = run(op + "Sbe", warmup, measured);
                    ours = run(op + "Seqbus", warmup, measured);
                }
                seqbus.get(op).add(ours);
                sbe.get(op).add(theirs);
                ratio.get(op).add(theirs / ours);
                System.out.printf(Locale.ROOT, "round %d %-17s seqbus %7.1f ns  SBE %7.1f ns  "
                                  + "SBE/seqbus %.2f  (load %s)%n", round + 1, op, ours, theirs,
                                  theirs / ours, load());
            }
        }
        System.out.println();
        System.out.println("| operation | seqbus ns/op, median (range) | SBE ns/op, median (range) "
                           + "| seqbus speed / SBE's, median (range) | target |");
        System.out.println("|---|---:|---:|---:|---|");
        for (String op : OPERATIONS) {
            double r = median(ratio.get(op));
            System.out.printf(Locale.ROOT, "| %s | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.2f× "
                              + "(%.2f–%.2f) | ≥ 0.8×: %s |%n", op,
                              median(seqbus.get(op)), Collections.min(seqbus.get(op)),
                              Collections.max(seqbus.get(op)), median(sbe.get(op)),
                              Collections.min(sbe.get(op)), Collections.max(sbe.get(op)), r,
                              Collections.min(ratio.get(op)), Collections.max(ratio.get(op)),
                              r >= 0.8 ? "met" : "missed");
        }
        System.out.println("load at the end: " + load());
    }
}
