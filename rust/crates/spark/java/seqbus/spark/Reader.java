package seqbus.spark;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Reading a partition on an executor: the native library decodes {@code batchRows} records
 *  at a time into column buffers that {@link NativeColumnVector}s read in place. */
final class Reader implements PartitionReader<ColumnarBatch> {
  static final String SKIPPED = "seqbusSkippedRecords";

  /** Shipped to the executors with each task. */
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    final SeqbusOptions options;
    final SeqbusSource.Info info;
    final boolean[] want;
    final StructType readSchema;
    final Problems problems;

    Factory(SeqbusOptions options, SeqbusSource.Info info, boolean[] want, StructType readSchema,
        Problems problems) {
      this.options = options;
      this.info = info;
      this.want = want;
      this.readSchema = readSchema;
      this.problems = problems;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("the seqbus source reads columnar batches");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new Reader(this, (SeqbusScan.Partition) partition);
    }
  }

  private final Factory f;
  private final long hi;
  private long next;
  private long archive;
  private long remote;
  private final long[] prefix;
  private long decoder;
  private long batch;
  private ColumnarBatch current;
  private long skipped;
  private boolean done;

  Reader(Factory f, SeqbusScan.Partition p) {
    this.f = f;
    this.next = p.lo;
    this.hi = p.hi;
    this.prefix = p.prefix;
  }

  private void open() {
    SeqbusSource.Info i = f.info;
    decoder = Native.decoderNew(i.schemas, i.table, i.schemaId, i.message, f.want);
    SeqbusOptions o = f.options;
    if (o.remote()) {
      remote = Native.remoteOpen(o.soupbin, o.username, o.password, o.session, next, prefix, o.waitMs);
    } else {
      archive = Native.archiveOpen(o.path);
    }
  }

  @Override
  public boolean next() {
    release();
    if (done) {
      return false;
    }
    if (decoder == 0) {
      open();
    }
    while (true) {
      if (f.info.table.equals("problems")) {
        batch = Native.decodeArchive(archive, decoder, 0, 0);
        done = true;
      } else {
        if (next > hi) {
          done = true;
          return false;
        }
        long n = f.options.batchRows;
        if (remote != 0) {
          batch = Native.decodeRemote(remote, decoder, hi, n, f.options.waitMs);
          next = Math.min(hi + 1, next + n);
        } else {
          long end = Math.min(hi, next + n - 1);
          batch = Native.decodeArchive(archive, decoder, next, end);
          next = end + 1;
        }
      }
      long[] layout = Native.batchLayout(batch);
      int rows = (int) layout[0];
      if (layout[1] > 0) {
        problems();
      }
      if (rows == 0 && !done) {
        release();
        continue; // a range with nothing of this table: read on
      }
      current = columns(layout, rows);
      return rows > 0;
    }
  }

  private void problems() {
    JsonNode all = SeqbusOptions.json(Native.batchProblems(batch));
    for (JsonNode p : all) {
      String text = p.get(0).asText() + ":" + p.get(1).asLong() + ": sequence "
          + p.get(2).asLong() + ": " + p.get(3).asText();
      if (f.options.failfast) {
        throw new SeqbusException("corrupt record (FAILFAST): " + text);
      }
      skipped++;
      f.problems.add(text);
    }
  }

  private ColumnarBatch columns(long[] layout, int rows) {
    StructField[] fields = f.readSchema.fields();
    int n = (int) layout[2];
    if (n != fields.length) {
      throw new SeqbusException("the native batch has " + n + " columns, the scan " + fields.length);
    }
    ColumnVector[] cols = new ColumnVector[n];
    int[] pos = {3};
    for (int c = 0; c < n; c++) {
      cols[c] = new NativeColumnVector(fields[c].dataType(), layout, pos);
    }
    return new ColumnarBatch(cols, rows);
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  private void release() {
    current = null;
    if (batch != 0) {
      Native.batchFree(batch);
      batch = 0;
    }
  }

  @Override
  public CustomTaskMetric[] currentMetricsValues() {
    long v = skipped;
    return new CustomTaskMetric[] {
      new CustomTaskMetric() {
        @Override
        public String name() {
          return SKIPPED;
        }

        @Override
        public long value() {
          return v;
        }
      }
    };
  }

  @Override
  public void close() {
    release();
    if (decoder != 0) {
      Native.decoderFree(decoder);
      decoder = 0;
    }
    if (archive != 0) {
      Native.archiveClose(archive);
      archive = 0;
    }
    if (remote != 0) {
      Native.remoteClose(remote);
      remote = 0;
    }
  }
}
