package seqbus.spark;

/** A seqbus source error: bad options, an unreadable archive, a corrupt record in FAILFAST
 *  mode, a live stream that cannot be reached. Its message names what and where. */
public class SeqbusException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public SeqbusException(String message) {
    super(message);
  }
}
