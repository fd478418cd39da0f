package seqbus.node;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;
import seqbus.bus.AdminCommandArgsDecoder;
import seqbus.bus.AdminCommandDecoder;
import seqbus.bus.AdminReplyEncoder;
import seqbus.bus.AdminStatus;
import seqbus.codec.ArrayBuffer;
import seqbus.codec.DecodeException;
import seqbus.codec.ReadBuffer;

/**
 * The admin commands of one node and what runs them: the Java side of Python's
 * {@code runtime/seqbus/admin.py} ({@code run_admin_command}, {@code _execute}, {@code help_text}),
 * which it follows line for line so that a Java instance of an account posts the same AdminReply
 * bytes as a Python one for the same command (hot-hot instances send the same reply under the
 * same command sequence; the sequencer keeps one).
 */
final class Admin {
    /** The built-in command every node answers. */
    static final String HELP = "help";
    /** Longest reply text sent, in characters (code points); a longer one is cut and says so. */
    static final int MAX_REPLY_TEXT = 60_000;
    /** Longest command name echoed in a reply, in characters. */
    static final int MAX_ECHOED_NAME = 64;

    private static final Set<String> TRUE = Set.of("1", "true", "yes", "on", "y");
    private static final Set<String> FALSE = Set.of("0", "false", "no", "off", "n");
    private static final String DIGITS = "[0-9](?:_?[0-9])*";
    private static final Pattern INTEGER = Pattern.compile("[+-]?" + DIGITS);
    private static final Pattern NUMBER = Pattern.compile("[+-]?(?:(?:" + DIGITS + "(?:\\.(?:" + DIGITS + ")?)?|\\."
            + DIGITS + ")(?:[eE][+-]?" + DIGITS + ")?|(?i:inf|infinity|nan))");

    /** A command's arguments do not fit its parameters: the reply's text. */
    static final class BadArguments extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BadArguments(String message) {
            super(message, null, false, false);
        }
    }

    /** An AdminReply's status and text. */
    record Outcome(AdminStatus status, String text) {}

    /** The commands by name, sorted (help lists them so, as Python's sorted()). */
    final TreeMap<String, AdminCommand> commands = new TreeMap<>();
    private final AdminCommandDecoder decoder = new AdminCommandDecoder();

    AdminCommand register(String name, String help, AdminHandler handler) {
        AdminCommand c = new AdminCommand(name, help, handler);
        if (commands.containsKey(name)) {
            throw new IllegalArgumentException("admin command " + repr(name) + " registered twice");
        }
        commands.put(name, c);
        return c;
    }

    /** What the built-in help answers: one line per command, help first. */
    String helpText() {
        StringBuilder b = new StringBuilder(HELP).append(" - list the admin commands of this node");
        for (AdminCommand c : commands.values()) {
            b.append('\n').append(c.usage());
            if (!c.help().isEmpty()) {
                b.append(" - ").append(c.help());
            }
        }
        return b.toString();
    }

    /**
     * Decodes, checks and runs the AdminCommand at {@code offset} for {@code node} (standing at
     * {@code sequence}, sent by {@code sender}) and returns its AdminReply, whole; null when the
     * command is for another account or corrupt (logged and counted).
     */
    byte[] run(Node node, ReadBuffer buffer, int offset, int length, long sequence, String sender) {
        String target;
        long requestId;
        String name;
        List<String> args = new ArrayList<>();
        try {
            AdminCommandDecoder d = decoder.wrap(buffer, offset, length);
            target = d.target();
            requestId = d.requestId();
            name = d.name();
            for (AdminCommandArgsDecoder a : d.args()) {
                args.add(a.value());
            }
        } catch (DecodeException e) {
            node.stats().adminErrors++;
            Node.log(Node.ERROR, node.account() + "/" + node.instance() + ": corrupt AdminCommand at #" + sequence
                    + ": " + e.getMessage());
            return null;
        }
        if (!target.equals(node.account())) {
            return null; // the node listed the admin topic: every account's commands come here
        }
        node.stats().adminCommands++;
        Outcome o = execute(node, sender, name, args, sequence);
        String text = o.text();
        int chars = text.codePointCount(0, text.length());
        if (chars > MAX_REPLY_TEXT) {
            text = text.substring(0, text.offsetByCodePoints(0, MAX_REPLY_TEXT)) + "... (" + (chars - MAX_REPLY_TEXT)
                    + " characters cut)";
        }
        return reply(sequence, requestId, sender, o.status(), cut(name, MAX_ECHOED_NAME), text);
    }

    /** The AdminReply message (header included) with these fields. */
    static byte[] reply(long commandSequence, long requestId, String requester, AdminStatus status, String name,
            String text) {
        int size = 8 + AdminReplyEncoder.BLOCK_LENGTH + 2 + 4 + utf8Length(name) + 4 + utf8Length(text);
        byte[] out = new byte[size];
        int n = new AdminReplyEncoder().wrapAndApplyHeader(new ArrayBuffer(out), 0).commandSequence(commandSequence)
                .requestId(requestId).requester(requester).status(status).name(name).text(text).encodedLength();
        if (n != size) {
            throw new IllegalStateException("AdminReply of " + n + " bytes, " + size + " expected");
        }
        return out;
    }

    private Outcome execute(Node node, String sender, String name, List<String> args, long sequence) {
        Set<String> allowed = node.adminSenders();
        if (allowed != null && !allowed.contains(sender)) {
            return new Outcome(AdminStatus.Denied, "account " + repr(sender) + " may not send admin commands to this node");
        }
        if (name.equals(HELP)) {
            if (!args.isEmpty()) {
                return new Outcome(AdminStatus.BadArguments, "help takes no arguments");
            }
            return new Outcome(AdminStatus.Ok, helpText());
        }
        AdminCommand c = commands.get(name);
        if (c == null) {
            StringBuilder known = new StringBuilder(HELP);
            for (String k : commands.keySet()) {
                known.append(", ").append(k);
            }
            return new Outcome(AdminStatus.UnknownCommand, "unknown command " + repr(cut(name, 64)) + "; known: " + known);
        }
        AdminArgs values;
        try {
            values = c.convert(args);
        } catch (BadArguments e) {
            return new Outcome(AdminStatus.BadArguments, e.getMessage());
        }
        String result;
        try {
            result = c.handler().run(values);
        } catch (AdminError e) {
            return new Outcome(AdminStatus.Failed, String.valueOf(e.getMessage()));
        } catch (Exception e) {
            node.stats().adminErrors++;
            Node.log(Node.ERROR, node.account() + "/" + node.instance() + ": admin command " + repr(name)
                    + " failed at #" + sequence + ": " + e);
            String message = e.getMessage();
            return new Outcome(AdminStatus.Failed, e.getClass().getSimpleName() + ": " + (message == null ? "" : message));
        }
        return new Outcome(AdminStatus.Ok, result == null ? "" : result);
    }

    // -- argument conversion, as Python's int(), float() and _to_bool -----------------------------

    /** {@code text} converted to {@code type}; null when it does not convert. */
    static Object convert(AdminType type, String text) {
        switch (type) {
            case TEXT:
                return text;
            case INTEGER: {
                String s = strip(text);
                if (!INTEGER.matcher(s).matches()) {
                    return null;
                }
                try {
                    return Long.parseLong(s.replace("_", "").replaceFirst("^\\+", ""));
                } catch (NumberFormatException e) {
                    return null; // past a long (Python's int has no bound)
                }
            }
            case NUMBER: {
                String s = strip(text);
                if (!NUMBER.matcher(s).matches()) {
                    return null;
                }
                String low = s.toLowerCase(java.util.Locale.ROOT);
                boolean negative = low.startsWith("-");
                String bare = low.startsWith("-") || low.startsWith("+") ? low.substring(1) : low;
                if (bare.equals("inf") || bare.equals("infinity")) {
                    return negative ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
                }
                if (bare.equals("nan")) {
                    return Double.NaN;
                }
                return Double.parseDouble(s.replace("_", ""));
            }
            case BOOLEAN: {
                String low = strip(text).toLowerCase(java.util.Locale.ROOT);
                if (TRUE.contains(low)) {
                    return Boolean.TRUE;
                }
                if (FALSE.contains(low)) {
                    return Boolean.FALSE;
                }
                return null;
            }
            default:
                throw new IllegalArgumentException("admin argument type " + type);
        }
    }

    /** Python's str.strip(): its whitespace off both ends. */
    static String strip(String s) {
        int start = 0;
        int end = s.length();
        while (start < end && isPySpace(s.charAt(start))) {
            start++;
        }
        while (end > start && isPySpace(s.charAt(end - 1))) {
            end--;
        }
        return s.substring(start, end);
    }

    /** Python's str.isspace() of one character. */
    static boolean isPySpace(int c) {
        return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680
                || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F
                || c == 0x3000;
    }

    // -- text as Python writes it -------------------------------------------------------------------

    /** The first {@code n} characters (code points) of {@code s}: Python's {@code s[:n]}. */
    static String cut(String s, int n) {
        return s.codePointCount(0, s.length()) <= n ? s : s.substring(0, s.offsetByCodePoints(0, n));
    }

    /** Python's {@code repr()} of a str. */
    static String repr(String s) {
        char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder b = new StringBuilder(s.length() + 2).append(quote);
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            i += Character.charCount(c);
            if (c == quote || c == '\\') {
                b.append('\\').appendCodePoint(c);
            } else if (c == '\t') {
                b.append("\\t");
            } else if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (c < 0x20 || c == 0x7F) {
                b.append(String.format("\\x%02x", c));
            } else if (c < 0x7F) {
                b.append((char) c);
            } else if (!isPrintable(c)) {
                b.append(c < 0x100 ? String.format("\\x%02x", c)
                        : c < 0x10000 ? String.format("\\u%04x", c) : String.format("\\U%08x", c));
            } else {
                b.appendCodePoint(c);
            }
        }
        return b.append(quote).toString();
    }

    /** Python's str.isprintable() of one non-ASCII character (by Java's Unicode tables). */
    static boolean isPrintable(int c) {
        switch (Character.getType(c)) {
            case Character.CONTROL:
            case Character.FORMAT:
            case Character.SURROGATE:
            case Character.PRIVATE_USE:
            case Character.UNASSIGNED:
            case Character.LINE_SEPARATOR:
            case Character.PARAGRAPH_SEPARATOR:
            case Character.SPACE_SEPARATOR:
                return false;
            default:
                return true;
        }
    }

    /** The sender's account as Python's batch reads it: trailing NULs and spaces off, ASCII. */
    static String account(long bits) {
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (bits >>> (8 * i));
        }
        int n = 8;
        while (n > 0 && (b[n - 1] == 0 || b[n - 1] == ' ')) {
            n--;
        }
        return new String(b, 0, n, StandardCharsets.US_ASCII);
    }

    private static int utf8Length(String s) {
        int n = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                n++;
            } else if (c < 0x800) {
                n += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                n += 4;
                i++;
            } else {
                n += 3;
            }
        }
        return n;
    }
}
