package seqbus.spark;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;

/** Streaming reads. Offsets are sequences ({@code {"next": n}}, the next to read); a
 *  micro-batch reads {@code [start.next, end.next)}, so a query restarted from its checkpoint
 *  reads nothing twice and skips nothing. {@code maxRecordsPerTrigger} caps a batch. */
final class Streams {
  private Streams() {}

  abstract static class Base implements MicroBatchStream, SupportsAdmissionControl {
    final SeqbusScan scan;

    Base(SeqbusScan scan) {
      this.scan = scan;
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      long max = scan.options.maxRecordsPerTrigger;
      return max > 0 ? ReadLimit.maxRows(max) : ReadLimit.allAvailable();
    }

    static long cap(ReadLimit limit) {
      return limit instanceof ReadMaxRows m ? m.maxRows() : Long.MAX_VALUE;
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) is used");
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return scan.createReaderFactory();
    }

    @Override
    public Offset deserializeOffset(String json) {
      return SeqbusOffset.parse(json);
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
  }

  /** Follows an archive as the archiver appends to it (a live archive) or reads a sealed one. */
  static final class Archived extends Base {
    Archived(SeqbusScan scan) {
      super(scan);
    }

    private JsonNode info() {
      long a = Native.archiveOpen(scan.options.path);
      try {
        return SeqbusOptions.json(Native.archiveInfo(a));
      } finally {
        Native.archiveClose(a);
      }
    }

    @Override
    public Offset initialOffset() {
      if (scan.options.startSequence > 0) {
        return new SeqbusOffset(scan.options.startSequence);
      }
      JsonNode first = info().get("first");
      return new SeqbusOffset(first.isNull() ? 1 : first.asLong());
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      long from = ((SeqbusOffset) start).next;
      JsonNode last = info().get("last");
      long end = last.isNull() ? from : Math.max(from, last.asLong() + 1);
      long max = cap(limit);
      if (max != Long.MAX_VALUE) {
        end = Math.min(end, from + max);
      }
      return new SeqbusOffset(end);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      long lo = ((SeqbusOffset) start).next;
      long hi = ((SeqbusOffset) end).next - 1;
      if (hi < lo) {
        return new InputPartition[0];
      }
      return scan.plan(lo, hi, 0, SeqbusScan.NO_BOUND);
    }
  }

  /** Follows a live bus on another host over SoupBinTCP: the driver keeps one login that
   *  tells how far the stream has got and where it may be cut (never inside a fragmented
   *  message begun in the batch; through one open since the batch began, which the offset
   *  then names); each micro-batch is read by one task that logs in from its first sequence,
   *  or from the first fragment of a message open there that ends in the batch. */
  static final class Remote extends Base {
    private long follower;

    Remote(SeqbusScan scan) {
      super(scan);
    }

    @Override
    public Offset initialOffset() {
      return new SeqbusOffset(Math.max(1, scan.options.startSequence));
    }

    @Override
    public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
      long from = ((SeqbusOffset) start).next;
      SeqbusOptions o = scan.options;
      if (follower == 0) {
        long[] open = ((SeqbusOffset) start).encodedOpen();
        follower = Native.followStart(o.soupbin, o.username, o.password, o.session, from, open);
      }
      return SeqbusOffset.ofNative(Native.followLatest(follower, from, cap(limit)));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      SeqbusOffset s = (SeqbusOffset) start;
      SeqbusOffset e = (SeqbusOffset) end;
      long lo = s.next;
      long hi = e.next - 1;
      if (hi < lo) {
        return new InputPartition[0];
      }
      return new InputPartition[] {new SeqbusScan.Partition(lo, hi, s.endingBy(e))};
    }

    @Override
    public synchronized void commit(Offset end) {
      if (follower != 0) {
        Native.followCommit(follower, ((SeqbusOffset) end).next);
      }
    }

    @Override
    public synchronized void stop() {
      if (follower != 0) {
        Native.followClose(follower);
        follower = 0;
      }
    }
  }
}
