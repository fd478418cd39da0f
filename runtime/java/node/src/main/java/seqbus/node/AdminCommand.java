package seqbus.node;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.regex.Pattern;

/**
 * An admin command a node registered ({@link Node#adminCommand}): its name, help, handler and
 * positional parameters, added in order by {@link #param}, {@link #optional} and {@link #rest}.
 * The parameters work as a Python {@code @admin_command} method's: required ones first, then
 * optional ones, then at most one rest parameter taking what is left; a mistake is an
 * {@link IllegalArgumentException} when the node registers it.
 */
public final class AdminCommand {
    /** Command names: what a shell passes as one word (Python's {@code _NAME}). */
    static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_.\\-]{0,63}");
    private static final Pattern PARAM = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    /** One positional parameter. */
    public record Param(String name, AdminType type, boolean required) {
        String usage() {
            String word = name.toUpperCase(java.util.Locale.ROOT);
            return required ? word : "[" + word + "]";
        }
    }

    private final String name;
    private final String help;
    private final AdminHandler handler;
    private final List<Param> params = new ArrayList<>();
    private Param rest;

    AdminCommand(String name, String help, AdminHandler handler) {
        if (name == null || !NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("admin command name " + Admin.repr(String.valueOf(name))
                    + " must be 1-64 characters of letters, digits, '_', '.' or '-', starting with a letter or '_'");
        }
        if (name.equals(Admin.HELP)) {
            throw new IllegalArgumentException("admin command 'help' is built in");
        }
        if (handler == null) {
            throw new IllegalArgumentException("admin command " + name + ": no handler");
        }
        this.name = name;
        this.help = help == null ? "" : help;
        this.handler = handler;
    }

    /** Adds a required parameter (after every other required one). */
    public AdminCommand param(String name, AdminType type) {
        return add(new Param(name, type, true));
    }

    /** Adds an optional parameter (absent when not given: {@link AdminArgs#has}). */
    public AdminCommand optional(String name, AdminType type) {
        return add(new Param(name, type, false));
    }

    /** Adds the rest parameter: it takes every argument after the others, each of {@code type}. */
    public AdminCommand rest(String name, AdminType type) {
        check(name, type);
        rest = new Param(name, type, false);
        return this;
    }

    private AdminCommand add(Param p) {
        check(p.name(), p.type());
        if (p.required() && !params.isEmpty() && !params.get(params.size() - 1).required()) {
            throw new IllegalArgumentException("admin command " + name + ": " + p.name()
                    + " is required after an optional parameter");
        }
        params.add(p);
        return this;
    }

    private void check(String p, AdminType type) {
        if (p == null || !PARAM.matcher(p).matches()) {
            throw new IllegalArgumentException("admin command " + name + ": parameter name "
                    + Admin.repr(String.valueOf(p)) + " must be an identifier");
        }
        if (type == null) {
            throw new IllegalArgumentException("admin command " + name + ": parameter " + p + " has no type");
        }
        if (rest != null) {
            throw new IllegalArgumentException("admin command " + name + ": " + p + " after the rest parameter "
                    + rest.name());
        }
        for (Param q : params) {
            if (q.name().equals(p)) {
                throw new IllegalArgumentException("admin command " + name + ": parameter " + p + " twice");
            }
        }
    }

    public String name() {
        return name;
    }

    public String help() {
        return help;
    }

    public List<Param> params() {
        return Collections.unmodifiableList(params);
    }

    /** The rest parameter; null if none. */
    public Param restParam() {
        return rest;
    }

    AdminHandler handler() {
        return handler;
    }

    /** "bump AMOUNT [DOUBLE]", "echo FIRST [REST...]": Python's usage line. */
    public String usage() {
        StringBuilder b = new StringBuilder(name);
        for (Param p : params) {
            b.append(' ').append(p.usage());
        }
        if (rest != null) {
            b.append(" [").append(rest.name().toUpperCase(java.util.Locale.ROOT)).append("...]");
        }
        return b.toString();
    }

    /** The handler's arguments from the command's text; {@link Admin.BadArguments} if they do not fit. */
    AdminArgs convert(List<String> args) {
        int required = 0;
        for (Param p : params) {
            if (p.required()) {
                required++;
            }
        }
        if (args.size() < required || (rest == null && args.size() > params.size())) {
            String wanted;
            if (rest != null) {
                wanted = "at least " + required;
            } else if (required == params.size()) {
                wanted = String.valueOf(required);
            } else {
                wanted = required + " to " + params.size();
            }
            throw new Admin.BadArguments(name + " takes " + wanted + " argument(s), got " + args.size()
                    + "; usage: " + usage());
        }
        List<Object> values = new ArrayList<>(args.size());
        for (int i = 0; i < args.size(); i++) {
            Param p = i < params.size() ? params.get(i) : rest;
            String text = args.get(i);
            Object v = Admin.convert(p.type(), text);
            if (v == null) {
                throw new Admin.BadArguments(name + ": " + p.name() + " must be " + p.type().kind() + ", not "
                        + Admin.repr(text) + "; usage: " + usage());
            }
            values.add(v);
        }
        return new AdminArgs(values);
    }
}
