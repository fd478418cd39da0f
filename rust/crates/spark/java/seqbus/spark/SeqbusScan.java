package seqbus.spark;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** A read of one table: the columns the query uses (only those are decoded), the sequence
 *  and time bounds its filters give (only the records inside are read), its partitions. */
final class SeqbusScan implements Scan, Batch {
  static final long NO_BOUND = Long.MAX_VALUE;

  final SeqbusOptions options;
  final SeqbusSource.Info info;
  final boolean[] want;
  final StructType readSchema;
  final long[] bounds; // seq lo, seq hi, ts lo, ts hi (inclusive; NO_BOUND: none)

  SeqbusScan(SeqbusOptions options, SeqbusSource.Info info, boolean[] want, long[] bounds) {
    this.options = options;
    this.info = info;
    this.want = want;
    this.bounds = bounds;
    List<StructField> kept = new ArrayList<>();
    StructField[] all = info.schema.fields();
    for (int i = 0; i < all.length; i++) {
      if (want[i]) {
        kept.add(all[i]);
      }
    }
    this.readSchema = new StructType(kept.toArray(new StructField[0]));
  }

  @Override
  public StructType readSchema() {
    return readSchema;
  }

  @Override
  public String description() {
    return "seqbus " + (info.message.isEmpty() ? info.table : info.message) + " ["
        + String.join(", ", readSchema.fieldNames()) + "] sequences " + bound(bounds[0], 0)
        + ".." + bound(bounds[1], NO_BOUND) + " time " + bound(bounds[2], 0) + ".."
        + bound(bounds[3], NO_BOUND);
  }

  private static String bound(long v, long none) {
    return v == none ? "*" : Long.toString(v);
  }

  @Override
  public Batch toBatch() {
    if (options.remote()) {
      throw new SeqbusException("a live bus (soupbin) is read as a stream: spark.readStream");
    }
    if (options.startSequence != 0 || options.maxRecordsPerTrigger != 0) {
      // options are never ignored: these two shape a stream only
      throw new SeqbusException(
          "startSequence and maxRecordsPerTrigger are options of a stream (spark.readStream); "
              + "a batch read is bounded by a filter: .where(\"sequence >= N\")");
    }
    return this;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    if (info.table.equals("problems")) {
      throw new SeqbusException("the problems table is not a stream");
    }
    return options.remote() ? new Streams.Remote(this) : new Streams.Archived(this);
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return new CustomMetric[] {new SkippedMetric()};
  }

  /** The records skipped in PERMISSIVE mode, summed over the tasks of a query. */
  public static final class SkippedMetric extends CustomSumMetric {
    @Override
    public String name() {
      return Reader.SKIPPED;
    }

    @Override
    public String description() {
      return "seqbus records skipped (corrupt or not reassembled)";
    }
  }

  @Override
  public InputPartition[] planInputPartitions() {
    if (info.table.equals("problems")) {
      return new InputPartition[] {new Partition(0, 0)}; // verify follows fragments across segments
    }
    return plan(bounds[0], bounds[1], bounds[2], bounds[3]);
  }

  /** The records within the bounds as partitions of at most rowsPerPartition records (by
   *  default about one per core of the cluster, between 64 Ki and 2 Mi records). */
  Partition[] plan(long seqLo, long seqHi, long tsLo, long tsHi) {
    long a = Native.archiveOpen(options.path);
    try {
      long rows = options.rowsPerPartition;
      if (rows == 0) {
        long[] all = Native.archivePlan(a, seqLo, seqHi, tsLo, tsHi, Long.MAX_VALUE);
        long n = all.length == 0 ? 0 : all[1] - all[0] + 1;
        int cores = Math.max(1, SparkSession.active().sparkContext().defaultParallelism());
        rows = Math.min(Math.max((n + cores - 1) / cores, 1L << 16), 1L << 21);
      }
      long[] p = Native.archivePlan(a, seqLo, seqHi, tsLo, tsHi, rows);
      Partition[] out = new Partition[p.length / 2];
      for (int i = 0; i < out.length; i++) {
        out[i] = new Partition(p[2 * i], p[2 * i + 1]);
      }
      return out;
    } finally {
      Native.archiveClose(a);
    }
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new Reader.Factory(options, info, want, readSchema, Problems.register(describe()));
  }

  String describe() {
    return options.remote() ? "soupbintcp://" + options.soupbin : options.path;
  }

  /** A partition: the records with sequence in [lo, hi]; from a live bus, also the earlier
   *  fragments ({@code prefix}) of messages that were open at lo and end in the range. */
  static final class Partition implements InputPartition {
    private static final long serialVersionUID = 2L;
    final long lo;
    final long hi;
    final long[] prefix;

    Partition(long lo, long hi) {
      this(lo, hi, new long[0]);
    }

    Partition(long lo, long hi, long[] prefix) {
      this.lo = lo;
      this.hi = hi;
      this.prefix = prefix;
    }
  }

  static final class Builder
      implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
    private final SeqbusOptions options;
    private final SeqbusSource.Info info;
    private final boolean[] want;
    private final long[] bounds = {0, NO_BOUND, 0, NO_BOUND};
    private Filter[] pushed = new Filter[0];

    Builder(SeqbusOptions options, SeqbusSource.Info info) {
      this.options = options;
      this.info = info;
      this.want = new boolean[info.schema.fields().length];
      Arrays.fill(want, true);
    }

    @Override
    public void pruneColumns(StructType required) {
      Set<String> names = new HashSet<>(Arrays.asList(required.fieldNames()));
      String[] all = info.schema.fieldNames();
      for (int i = 0; i < all.length; i++) {
        want[i] = names.contains(all[i]);
      }
    }

    /** Bounds on the sequence and time columns narrow the records read; every filter is
     *  still evaluated by Spark after the scan. */
    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Filter> used = new ArrayList<>();
      String seq = info.column("sequence");
      String ts = info.column("timestamp_ns");
      for (Filter f : filters) {
        if (bound(f, seq, ts)) {
          used.add(f);
        }
      }
      pushed = used.toArray(new Filter[0]);
      return filters;
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    private boolean bound(Filter f, String seq, String ts) {
      String attr;
      Object v;
      if (f instanceof EqualTo e) {
        attr = e.attribute();
        v = e.value();
      } else if (f instanceof GreaterThan e) {
        attr = e.attribute();
        v = e.value();
      } else if (f instanceof GreaterThanOrEqual e) {
        attr = e.attribute();
        v = e.value();
      } else if (f instanceof LessThan e) {
        attr = e.attribute();
        v = e.value();
      } else if (f instanceof LessThanOrEqual e) {
        attr = e.attribute();
        v = e.value();
      } else {
        return false;
      }
      long lo;
      long hi; // the nanoseconds (or sequences) equal to v
      int at;
      if (attr.equals(seq) && v instanceof Long l) {
        at = 0;
        lo = hi = l;
      } else if (attr.equals(ts) && v instanceof Long l) {
        at = 2;
        lo = hi = l;
      } else if (attr.equals("time") && (info.table.equals("envelope") || info.table.equals("raw"))) {
        long us;
        if (v instanceof Timestamp t) {
          us = Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
        } else if (v instanceof Instant t) {
          us = Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000);
        } else {
          return false;
        }
        at = 2;
        lo = us * 1000;
        hi = us * 1000 + 999;
      } else {
        return false;
      }
      if (lo < 0) {
        return false;
      }
      if (f instanceof EqualTo) {
        bounds[at] = Math.max(bounds[at], lo);
        bounds[at + 1] = Math.min(bounds[at + 1], hi);
      } else if (f instanceof GreaterThan) {
        bounds[at] = Math.max(bounds[at], hi == NO_BOUND ? hi : hi + 1);
      } else if (f instanceof GreaterThanOrEqual) {
        bounds[at] = Math.max(bounds[at], lo);
      } else if (f instanceof LessThan) {
        bounds[at + 1] = Math.min(bounds[at + 1], lo - 1);
      } else {
        bounds[at + 1] = Math.min(bounds[at + 1], hi);
      }
      return true;
    }

    @Override
    public Scan build() {
      if (bounds[1] < bounds[0] || bounds[3] < bounds[2]) {
        // nothing can match: an empty range
        bounds[0] = 1;
        bounds[1] = 0;
      }
      return new SeqbusScan(options, info, want, bounds.clone());
    }
  }
}
