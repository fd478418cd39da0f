package seqbus.spark;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/** The native half of the source (rust/crates/spark): archive reading and decoding into
 *  column buffers. Handles are {@code long}s, each freed exactly once by its owner.
 *
 *  <p>The library travels inside this jar ({@code seqbus/spark/native/libseqbus_spark.so}) and
 *  is unpacked once per JVM, so executors need nothing but the jar; the system property
 *  {@code seqbus.spark.native} names another copy. */
final class Native {
  private Native() {}

  static {
    String path = System.getProperty("seqbus.spark.native");
    if (path == null || path.isEmpty()) {
      path = unpack();
    }
    System.load(path);
  }

  private static String unpack() {
    String res = "/seqbus/spark/native/libseqbus_spark.so";
    try (InputStream in = Native.class.getResourceAsStream(res)) {
      if (in == null) {
        throw new SeqbusException("seqbus-spark.jar holds no " + res + " (rebuild it: make setup)");
      }
      Path tmp = Files.createTempFile("libseqbus_spark", ".so");
      tmp.toFile().deleteOnExit();
      Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
      return tmp.toAbsolutePath().toString();
    } catch (IOException e) {
      throw new SeqbusException("cannot unpack the seqbus native library: " + e);
    }
  }

  static native long archiveOpen(String path);

  static native void archiveClose(long reader);

  static native String archiveInfo(long reader);

  static native long[] archivePlan(long reader, long seqLo, long seqHi, long tsLo, long tsHi, long rows);

  static native String tableInfo(String schemas, String table, String message);

  static native long decoderNew(String schemas, String table, int schemaId, String message, boolean[] want);

  static native void decoderFree(long decoder);

  static native long decodeArchive(long reader, long decoder, long lo, long hi);

  static native long[] batchLayout(long batch);

  static native String batchProblems(long batch);

  static native void batchFree(long batch);

  /** A login that reads from {@code from}; before it, only the fragments {@code prefix} names
   *  (the earlier fragments of messages that end in the range), joined but not handed out. */
  static native long remoteOpen(String server, String user, String password, String session, long from, long[] prefix, int timeoutMs);

  static native void remoteClose(long reader);

  static native long decodeRemote(long reader, long decoder, long hi, long max, int waitMs);

  /** {@code open}: the messages open at {@code from} (what its offset names), per message its
   *  count of fragments, then their sequences. */
  static native long followStart(String server, String user, String password, String session, long from, long[] open);

  /** The next batch's end, then per message open there: its count of fragments, their
   *  sequences. */
  static native long[] followLatest(long follower, long start, long max);

  static native void followCommit(long follower, long upto);

  static native void followClose(long follower);
}
