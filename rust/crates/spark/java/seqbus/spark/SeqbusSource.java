package seqbus.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** {@code spark.read.format("seqbus")} and {@code spark.readStream.format("seqbus")}: session
 *  archives (and live buses, over SoupBinTCP) as DataFrames (docs/spark.md). */
public final class SeqbusSource implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "seqbus";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Info.of(SeqbusOptions.parse(options.asCaseSensitiveMap())).schema;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    SeqbusOptions o = SeqbusOptions.parse(properties);
    return new SeqbusTable(o, Info.of(o));
  }

  /** What a read makes: the table, its schemas and its Spark schema. */
  static final class Info implements Serializable {
    private static final long serialVersionUID = 1L;
    final String schemas;
    final String table; // envelope, raw, problems or typed
    final int schemaId;
    final String message;
    final StructType schema;

    private Info(String schemas, JsonNode t) {
      this.schemas = schemas;
      this.table = t.get("table").asText();
      this.schemaId = t.get("schema_id").asInt();
      this.message = t.get("message").asText();
      this.schema = (StructType) DataType.fromJson(t.get("spark").asText());
    }

    static Info of(SeqbusOptions o) {
      if (o.remote() && o.table.equals("problems")) {
        throw new SeqbusException("the problems table is an archive's: a live bus has none");
      }
      String schemas = o.schemas();
      String table = o.message.isEmpty() ? o.table : "envelope";
      if (!o.message.isEmpty() && !o.table.equals("envelope")) {
        throw new SeqbusException("give either message (a typed table) or table, not both");
      }
      return new Info(schemas, SeqbusOptions.json(Native.tableInfo(schemas, table, o.message)));
    }

    /** The name of the column holding the sequence (renamed when a field has the name). */
    String column(String name) {
      for (String f : schema.fieldNames()) {
        if (f.equals("envelope_" + name)) {
          return f;
        }
      }
      return name;
    }
  }

  static final class SeqbusTable implements SupportsRead {
    final SeqbusOptions options;
    final Info info;

    SeqbusTable(SeqbusOptions options, Info info) {
      this.options = options;
      this.info = info;
    }

    @Override
    public String name() {
      String what = info.message.isEmpty() ? info.table : info.message;
      return "seqbus " + what + " of " + (options.remote() ? "soupbintcp://" + options.soupbin : options.path);
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return info.schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
      return new SeqbusScan.Builder(options, info);
    }
  }
}
