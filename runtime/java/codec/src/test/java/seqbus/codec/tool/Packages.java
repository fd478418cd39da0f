package seqbus.codec.tool;

import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import seqbus.codec.PackageDecoder;

/** The schema packages generated into generated/java, by their IDL package name. */
public final class Packages {
    private static final Map<String, Supplier<PackageDecoder>> ALL = new TreeMap<>(Map.of(
        "alltypes", seqbus.alltypes.AlltypesMessages::new,
        "bus", seqbus.bus.BusMessages::new,
        "exchange", seqbus.examples.exchange.ExchangeMessages::new,
        "pingpong", seqbus.examples.pingpong.PingpongMessages::new));

    private Packages() {
    }

    /** The IDL package names, sorted. */
    public static Iterable<String> names() {
        return ALL.keySet();
    }

    /** A new decoding entry of IDL package {@code name}, or null when there is none. */
    public static PackageDecoder of(String name) {
        Supplier<PackageDecoder> make = ALL.get(name);
        return make == null ? null : make.get();
    }
}
