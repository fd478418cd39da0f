package seqbus.node;

import java.util.List;

/**
 * The converted arguments of one admin command, by position: the declared parameters first (an
 * optional one not given is absent: {@link #has}, or a getter with a default), then what the
 * rest parameter took.
 */
public final class AdminArgs {
    private final List<Object> values;

    AdminArgs(List<Object> values) {
        this.values = values;
    }

    /** How many arguments came. */
    public int count() {
        return values.size();
    }

    /** Argument {@code i} came (an optional parameter may be absent). */
    public boolean has(int i) {
        return i >= 0 && i < values.size();
    }

    /** Argument {@code i} as converted (String, Long, Double or Boolean). */
    public Object get(int i) {
        if (!has(i)) {
            throw new IndexOutOfBoundsException("admin argument " + i + " of " + values.size());
        }
        return values.get(i);
    }

    public String text(int i) {
        return (String) get(i);
    }

    public String text(int i, String absent) {
        return has(i) ? text(i) : absent;
    }

    public long integer(int i) {
        return (Long) get(i);
    }

    public long integer(int i, long absent) {
        return has(i) ? integer(i) : absent;
    }

    public double number(int i) {
        return (Double) get(i);
    }

    public double number(int i, double absent) {
        return has(i) ? number(i) : absent;
    }

    public boolean bool(int i) {
        return (Boolean) get(i);
    }

    public boolean bool(int i, boolean absent) {
        return has(i) ? bool(i) : absent;
    }

    /** The arguments from {@code i} on (what a rest parameter took), as converted. */
    public List<Object> from(int i) {
        return values.subList(Math.min(Math.max(i, 0), values.size()), values.size());
    }
}
