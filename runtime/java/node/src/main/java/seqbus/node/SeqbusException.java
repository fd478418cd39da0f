package seqbus.node;

/**
 * An error of the node library: a status code (the {@code SEQBUS_ERR_*} of {@code seqbus.h},
 * the same in C, C++ and Java) and its message.
 */
public class SeqbusException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** A bad argument: a null, a bad account, start or listen address. */
    public static final int ERR_ARGUMENT = -1;
    /** The configuration file cannot be read or is invalid (the message names the key). */
    public static final int ERR_CONFIG = -2;
    /** A socket could not be opened, bound, read or written. */
    public static final int ERR_IO = -3;
    /** Back-pressure ({@link BackPressureException}). */
    public static final int ERR_BACKPRESSURE = -4;
    /** The command is larger than the window allows. */
    public static final int ERR_TOO_LARGE = -5;
    /** Messages are missing and no replayer is configured to fill the gap. */
    public static final int ERR_GAP = -6;
    /** The sequencer ended the session. */
    public static final int ERR_SESSION_ENDED = -7;
    /** A batch record does not hold what it claims. */
    public static final int ERR_DECODE = -8;
    /** No answer from the sequencer in time. */
    public static final int ERR_TIMEOUT = -9;
    /** A panic inside the library, caught at the boundary. */
    public static final int ERR_PANIC = -10;

    private final int code;

    public SeqbusException(int code, String message) {
        super(message + " (" + statusName(code) + ")");
        this.code = code;
    }

    /** The status code ({@code ERR_*}). */
    public int code() {
        return code;
    }

    /** The name of a status code as {@code seqbus.h} spells it. */
    public static String statusName(int code) {
        switch (code) {
            case 0:
                return "SEQBUS_OK";
            case ERR_ARGUMENT:
                return "SEQBUS_ERR_ARGUMENT";
            case ERR_CONFIG:
                return "SEQBUS_ERR_CONFIG";
            case ERR_IO:
                return "SEQBUS_ERR_IO";
            case ERR_BACKPRESSURE:
                return "SEQBUS_ERR_BACKPRESSURE";
            case ERR_TOO_LARGE:
                return "SEQBUS_ERR_TOO_LARGE";
            case ERR_GAP:
                return "SEQBUS_ERR_GAP";
            case ERR_SESSION_ENDED:
                return "SEQBUS_ERR_SESSION_ENDED";
            case ERR_DECODE:
                return "SEQBUS_ERR_DECODE";
            case ERR_TIMEOUT:
                return "SEQBUS_ERR_TIMEOUT";
            case ERR_PANIC:
                return "SEQBUS_ERR_PANIC";
            default:
                return "SEQBUS_UNKNOWN_STATUS";
        }
    }
}
