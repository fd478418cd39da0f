package seqbus.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/** The source's options, read by name whatever their case; an option it does not know is an
 *  error listing the ones it knows (a misspelt option is never ignored). Paths are made
 *  absolute here, on the driver. */
final class SeqbusOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Every option, with what it means (the order of docs/spark.md). */
  static final Map<String, String> KNOWN = new LinkedHashMap<>();

  static {
    KNOWN.put("path", "the archive directory");
    KNOWN.put("message", "package.Message: that type's typed table");
    KNOWN.put("table", "envelope (default), raw or problems");
    KNOWN.put("mode", "PERMISSIVE (default) or FAILFAST");
    KNOWN.put("rowsPerPartition", "records per partition");
    KNOWN.put("batchRows", "records decoded per column batch");
    KNOWN.put("startSequence", "streaming: the first sequence to read");
    KNOWN.put("maxRecordsPerTrigger", "streaming: records per micro-batch at most");
    KNOWN.put("soupbin", "streaming from a live bus: host:port of its SoupBinTCP server");
    KNOWN.put("username", "SoupBinTCP login username");
    KNOWN.put("password", "SoupBinTCP login password");
    KNOWN.put("session", "SoupBinTCP session (default: the server's current one)");
    KNOWN.put("schemas", "streaming from a live bus: IR JSON files (seqc ir --json), comma-separated");
    KNOWN.put("waitMs", "streaming from a live bus: how long to wait for a message (ms)");
  }

  private static final Map<String, String> LOWER = new LinkedHashMap<>();

  static {
    for (String k : KNOWN.keySet()) {
      LOWER.put(k.toLowerCase(Locale.ROOT), k);
    }
  }

  final String path;
  final String message;
  final String table;
  final boolean failfast;
  final long rowsPerPartition;
  final int batchRows;
  final long startSequence;
  final long maxRecordsPerTrigger;
  final String soupbin;
  final String username;
  final String password;
  final String session;
  final String[] schemaFiles;
  final int waitMs;

  private SeqbusOptions(Map<String, String> o) {
    String p = o.get("path");
    soupbin = o.getOrDefault("soupbin", "");
    if ((p == null || p.isEmpty()) && soupbin.isEmpty()) {
      throw new SeqbusException(
          "the seqbus source needs a path: spark.read.format(\"seqbus\").load(PATH) "
              + "(or, to stream from a live bus, the option soupbin=HOST:PORT)");
    }
    if (p != null && !p.isEmpty() && !soupbin.isEmpty()) {
      throw new SeqbusException("give either a path (an archive) or soupbin (a live bus), not both");
    }
    if (p != null && p.startsWith("file:")) {
      p = java.net.URI.create(p).getPath();
    }
    path = (p == null || p.isEmpty()) ? "" : new File(p).getAbsolutePath();
    message = o.getOrDefault("message", "");
    String t = o.getOrDefault("table", "envelope").toLowerCase(Locale.ROOT);
    if (!t.equals("envelope") && !t.equals("raw") && !t.equals("problems")) {
      throw new SeqbusException("table must be envelope, raw or problems, not " + t);
    }
    table = t;
    String mode = o.getOrDefault("mode", "PERMISSIVE").toUpperCase(Locale.ROOT);
    if (!mode.equals("PERMISSIVE") && !mode.equals("FAILFAST")) {
      throw new SeqbusException("mode must be PERMISSIVE or FAILFAST, not " + mode);
    }
    failfast = mode.equals("FAILFAST");
    rowsPerPartition = number(o, "rowsPerPartition", 0);
    batchRows = (int) Math.min(number(o, "batchRows", 8192), 1 << 20);
    startSequence = number(o, "startSequence", 0);
    maxRecordsPerTrigger = number(o, "maxRecordsPerTrigger", 0);
    username = o.getOrDefault("username", "");
    password = o.getOrDefault("password", "");
    session = o.getOrDefault("session", "");
    String s = o.getOrDefault("schemas", "");
    schemaFiles = s.isEmpty() ? new String[0] : s.split(",");
    for (int i = 0; i < schemaFiles.length; i++) {
      schemaFiles[i] = new File(schemaFiles[i].trim()).getAbsolutePath();
    }
    waitMs = (int) Math.min(number(o, "waitMs", 60_000), Integer.MAX_VALUE);
  }

  private static long number(Map<String, String> o, String name, long fallback) {
    String v = o.get(name);
    if (v == null) {
      return fallback;
    }
    long n;
    try {
      n = Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new SeqbusException("option " + name + " must be an integer, not " + v);
    }
    if (n < 1) {
      throw new SeqbusException("option " + name + " must be positive, not " + n);
    }
    return n;
  }

  /** The options Spark gave (any case), by their documented names. */
  static SeqbusOptions parse(Map<String, String> given) {
    Map<String, String> o = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : given.entrySet()) {
      String name = LOWER.get(e.getKey().toLowerCase(Locale.ROOT));
      if (name == null) {
        throw new SeqbusException(
            "unknown option '" + e.getKey() + "' for the seqbus source; it knows: "
                + String.join(", ", KNOWN.keySet()));
      }
      o.put(name, e.getValue());
    }
    return new SeqbusOptions(o);
  }

  boolean remote() {
    return !soupbin.isEmpty();
  }

  /** {@code [[schema id, package, IR JSON], …]}: the archive's schemas, or the IR files given
   *  for a live bus. */
  String schemas() {
    if (!remote()) {
      long a = Native.archiveOpen(path);
      try {
        return json(Native.archiveInfo(a)).get("schemas").asText();
      } finally {
        Native.archiveClose(a);
      }
    }
    ObjectMapper m = new ObjectMapper();
    ArrayNode out = m.createArrayNode();
    for (String f : schemaFiles) {
      try {
        String text = Files.readString(new File(f).toPath());
        JsonNode ir = m.readTree(text);
        out.addArray().add(ir.get("schema_id").asInt()).add(ir.get("package").asText()).add(text);
      } catch (IOException | RuntimeException e) {
        throw new SeqbusException(f + ": not seqc IR JSON (seqc ir --json SCHEMA.idl): " + e);
      }
    }
    return out.toString();
  }

  static JsonNode json(String text) {
    try {
      return new ObjectMapper().readTree(text);
    } catch (IOException e) {
      throw new SeqbusException("bad JSON from the native library: " + e);
    }
  }
}
