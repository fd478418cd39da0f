package seqbus.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/** A column of a native batch, read in place: one byte of validity per row (none: no nulls),
 *  fixed-width little-endian values, i32 offsets into bytes (strings, binary) or into the child
 *  (lists), children (struct fields, list elements). Strings with few distinct values come as
 *  i32 codes into a dictionary. The memory is the native batch's, valid until the reader
 *  moves on (Spark's contract for a batch). */
final class NativeColumnVector extends ColumnVector {
  private final int len;
  private final long validity;
  private final long values;
  private final long offsets;
  private final long bytes;
  private final NativeColumnVector[] children;
  private final UTF8String[] dictionary;
  private int nulls = -1;

  /** Builds the vector of {@code type} from six longs per node at {@code pos[0]} of
   *  {@code d} (pre-order, as rust/crates/spark/src/table.rs lays them out). */
  NativeColumnVector(DataType type, long[] d, int[] pos) {
    super(type);
    int at = pos[0];
    pos[0] += 6;
    len = (int) d[at];
    validity = d[at + 1];
    values = d[at + 2];
    offsets = d[at + 3];
    bytes = d[at + 4];
    long dict = d[at + 5];
    if (type instanceof StructType st) {
      StructField[] fs = st.fields();
      children = new NativeColumnVector[fs.length];
      for (int i = 0; i < fs.length; i++) {
        children[i] = new NativeColumnVector(fs[i].dataType(), d, pos);
      }
    } else if (type instanceof ArrayType a) {
      children = new NativeColumnVector[] {new NativeColumnVector(a.elementType(), d, pos)};
    } else {
      children = null;
    }
    if (dict >= 0) {
      dictionary = new UTF8String[(int) dict];
      for (int k = 0; k < dictionary.length; k++) {
        int s = Platform.getInt(null, offsets + 4L * k);
        int e = Platform.getInt(null, offsets + 4L * (k + 1));
        byte[] b = new byte[e - s];
        Platform.copyMemory(null, bytes + s, b, Platform.BYTE_ARRAY_OFFSET, e - s);
        dictionary[k] = UTF8String.fromBytes(b);
      }
    } else {
      dictionary = null;
    }
  }

  @Override
  public void close() {}

  @Override
  public boolean hasNull() {
    return numNulls() > 0;
  }

  @Override
  public int numNulls() {
    if (nulls < 0) {
      int n = 0;
      if (validity != 0) {
        for (int i = 0; i < len; i++) {
          if (Platform.getByte(null, validity + i) == 0) {
            n++;
          }
        }
      }
      nulls = n;
    }
    return nulls;
  }

  @Override
  public boolean isNullAt(int i) {
    return validity != 0 && Platform.getByte(null, validity + i) == 0;
  }

  @Override
  public boolean getBoolean(int i) {
    return Platform.getByte(null, values + i) != 0;
  }

  @Override
  public byte getByte(int i) {
    return Platform.getByte(null, values + i);
  }

  @Override
  public short getShort(int i) {
    return Platform.getShort(null, values + 2L * i);
  }

  @Override
  public int getInt(int i) {
    return Platform.getInt(null, values + 4L * i);
  }

  @Override
  public long getLong(int i) {
    return Platform.getLong(null, values + 8L * i);
  }

  @Override
  public float getFloat(int i) {
    return Platform.getFloat(null, values + 4L * i);
  }

  @Override
  public double getDouble(int i) {
    return Platform.getDouble(null, values + 8L * i);
  }

  @Override
  public Decimal getDecimal(int i, int precision, int scale) {
    if (isNullAt(i)) {
      return null;
    }
    long lo = Platform.getLong(null, values + 16L * i);
    long hi = Platform.getLong(null, values + 16L * i + 8);
    BigInteger v;
    if ((hi == 0 && lo >= 0) || (hi == -1 && lo < 0)) {
      v = BigInteger.valueOf(lo);
    } else {
      v = BigInteger.valueOf(hi).shiftLeft(64).add(new BigInteger(Long.toUnsignedString(lo)));
    }
    return Decimal.apply(new BigDecimal(v, scale), precision, scale);
  }

  @Override
  public UTF8String getUTF8String(int i) {
    if (dictionary != null) {
      return dictionary[Platform.getInt(null, values + 4L * i)];
    }
    int s = Platform.getInt(null, offsets + 4L * i);
    int e = Platform.getInt(null, offsets + 4L * (i + 1));
    return UTF8String.fromAddress(null, bytes + s, e - s);
  }

  @Override
  public byte[] getBinary(int i) {
    int s = Platform.getInt(null, offsets + 4L * i);
    int e = Platform.getInt(null, offsets + 4L * (i + 1));
    byte[] b = new byte[e - s];
    Platform.copyMemory(null, bytes + s, b, Platform.BYTE_ARRAY_OFFSET, e - s);
    return b;
  }

  @Override
  public ColumnarArray getArray(int i) {
    int s = Platform.getInt(null, offsets + 4L * i);
    int e = Platform.getInt(null, offsets + 4L * (i + 1));
    return new ColumnarArray(children[0], s, e - s);
  }

  @Override
  public ColumnarMap getMap(int i) {
    throw new UnsupportedOperationException("seqbus tables have no map columns");
  }

  @Override
  public ColumnVector getChild(int i) {
    return children[i];
  }
}
