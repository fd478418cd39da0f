package seqbus.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.AccumulatorV2;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Records skipped in PERMISSIVE mode, brought to the driver: executors add each problem
 *  ({@code file:offset: sequence N: what}) to this accumulator; when a task's values reach
 *  the driver, each new one is logged there as a warning (logger {@code seqbus.spark}) and
 *  kept for {@link #recent()} ({@code seqbus.spark.skipped(spark)} in Python). */
public final class Problems extends AccumulatorV2<String, List<String>> {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger("seqbus.spark");
  /** Problems the driver has seen, oldest first (at most {@link #KEEP}). */
  private static final List<String> SEEN = Collections.synchronizedList(new ArrayList<>());
  private static final Set<String> SEEN_SET = Collections.synchronizedSet(new LinkedHashSet<>());
  static final int KEEP = 10_000;

  private final String source;
  private List<String> items = new ArrayList<>();

  Problems(String source) {
    this.source = source;
  }

  /** A new accumulator registered with the active SparkContext (on the driver). */
  static Problems register(String source) {
    Problems p = new Problems(source);
    SparkSession.active().sparkContext().register(p, "seqbus skipped records");
    return p;
  }

  /** Every problem the driver has been told of in this JVM, oldest first. */
  public static List<String> recent() {
    synchronized (SEEN) {
      return new ArrayList<>(SEEN);
    }
  }

  @Override
  public boolean isZero() {
    return items.isEmpty();
  }

  @Override
  public AccumulatorV2<String, List<String>> copy() {
    Problems p = new Problems(source);
    p.items = new ArrayList<>(items);
    return p;
  }

  @Override
  public void reset() {
    items = new ArrayList<>();
  }

  @Override
  public void add(String problem) {
    items.add(problem);
  }

  /** Runs on the driver as tasks finish: logs and keeps each problem not seen before. */
  @Override
  public void merge(AccumulatorV2<String, List<String>> other) {
    for (String p : other.value()) {
      items.add(p);
      String line = source + "/" + p;
      if (SEEN_SET.add(line)) {
        LOG.warn("seqbus: record skipped (PERMISSIVE): {}", line);
        synchronized (SEEN) {
          SEEN.add(line);
          if (SEEN.size() > KEEP) {
            SEEN_SET.remove(SEEN.remove(0));
          }
        }
      }
    }
  }

  @Override
  public List<String> value() {
    return items;
  }
}
