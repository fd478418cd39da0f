package seqbus.spark;

import org.apache.spark.sql.connector.read.streaming.Offset;

/** A stream offset: the next sequence to read. A query restarted from its checkpoint reads on
 *  from exactly there. */
final class SeqbusOffset extends Offset {
  final long next;

  SeqbusOffset(long next) {
    this.next = next;
  }

  @Override
  public String json() {
    return "{\"next\":" + next + "}";
  }

  static SeqbusOffset parse(String json) {
    return new SeqbusOffset(SeqbusOptions.json(json).get("next").asLong());
  }
}
