package seqbus.node;

/**
 * The type of an admin command's argument: how its text converts, as Python's annotations
 * {@code str}, {@code int}, {@code float} and {@code bool} do ({@code runtime/seqbus/admin.py}).
 */
public enum AdminType {
    /** The text as it came. */
    TEXT("text"),
    /** A long: Python's {@code int(text)} (blanks around, a sign, '_' between digits). */
    INTEGER("integer"),
    /** A double: Python's {@code float(text)} ("1e3", ".5", "inf", "nan"; no hex, no suffix). */
    NUMBER("number"),
    /** true/false, yes/no, on/off, 1/0, y/n (any case, blanks around). */
    BOOLEAN("true/false");

    private final String kind;

    AdminType(String kind) {
        this.kind = kind;
    }

    /** The word the BadArguments reply uses ("amount must be integer, not 'x'"). */
    public String kind() {
        return kind;
    }
}
