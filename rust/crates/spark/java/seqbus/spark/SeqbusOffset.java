package seqbus.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.connector.read.streaming.Offset;

/** A stream offset: the next sequence to read. A query restarted from its checkpoint reads on
 *  from exactly there. A live bus's offset also names the fragmented messages still open there
 *  (a batch ends inside one only when it was open since the batch began: its sender is slow,
 *  or died between fragments): the sequences of each one's fragments before {@code next}, so
 *  that the batch holding its last fragment can read the first ones. */
final class SeqbusOffset extends Offset {
  private static final long[][] NONE = new long[0][];
  final long next;
  final long[][] open;

  SeqbusOffset(long next) {
    this(next, NONE);
  }

  SeqbusOffset(long next, long[][] open) {
    this.next = next;
    this.open = open;
  }

  /** What {@code Native.followLatest} returns: the end, then per open message its count of
   *  fragments and their sequences. */
  static SeqbusOffset ofNative(long[] a) {
    List<long[]> open = new ArrayList<>();
    for (int i = 1; i < a.length; ) {
      int n = (int) a[i];
      long[] m = new long[n];
      System.arraycopy(a, i + 1, m, 0, n);
      open.add(m);
      i += 1 + n;
    }
    return new SeqbusOffset(a[0], open.toArray(NONE));
  }

  /** The open messages as {@code Native.followStart} takes them: per message its count of
   *  fragments and their sequences. */
  long[] encodedOpen() {
    return Arrays.stream(open)
        .flatMapToLong(m -> java.util.stream.LongStream.concat(
            java.util.stream.LongStream.of(m.length), Arrays.stream(m)))
        .toArray();
  }

  private static long[] flatten(List<long[]> messages) {
    return messages.stream().flatMapToLong(Arrays::stream).toArray();
  }

  /** The fragments of the messages open here that are no longer open at {@code end}: what a
   *  batch from here to {@code end} must read before its first sequence. */
  long[] endingBy(SeqbusOffset end) {
    Set<Long> still = new HashSet<>();
    for (long[] m : end.open) {
      still.add(m[0]);
    }
    List<long[]> ending = new ArrayList<>();
    for (long[] m : open) {
      if (!still.contains(m[0])) {
        ending.add(m);
      }
    }
    return flatten(ending);
  }

  @Override
  public String json() {
    if (open.length == 0) {
      return "{\"next\":" + next + "}";
    }
    StringBuilder b = new StringBuilder("{\"next\":").append(next).append(",\"open\":[");
    for (int i = 0; i < open.length; i++) {
      b.append(i == 0 ? "[" : ",[");
      for (int k = 0; k < open[i].length; k++) {
        b.append(k == 0 ? "" : ",").append(open[i][k]);
      }
      b.append(']');
    }
    return b.append("]}").toString();
  }

  static SeqbusOffset parse(String json) {
    JsonNode j = SeqbusOptions.json(json);
    JsonNode o = j.get("open");
    List<long[]> open = new ArrayList<>();
    if (o != null) {
      for (JsonNode m : o) {
        long[] seqs = new long[m.size()];
        for (int k = 0; k < seqs.length; k++) {
          seqs[k] = m.get(k).asLong();
        }
        open.add(seqs);
      }
    }
    return new SeqbusOffset(j.get("next").asLong(), open.toArray(NONE));
  }
}
