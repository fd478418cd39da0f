package seqbus.codec;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** The shared test vectors: schemas/vectors/PACKAGE/MESSAGE.N.bin and its .json. */
public final class Vectors {
    /** One vector: its package, message name, bytes and canonical JSON. */
    public static final class Vector {
        public final String pkg;
        public final String message;
        public final String file;
        public final byte[] bytes;
        public final String json;

        Vector(String pkg, String message, String file, byte[] bytes, String json) {
            this.pkg = pkg;
            this.message = message;
            this.file = file;
            this.bytes = bytes;
            this.json = json;
        }

        @Override
        public String toString() {
            return pkg + "/" + file;
        }
    }

    private Vectors() {
    }

    /** The repository's root (surefire passes it; else from the module's directory). */
    public static Path root() {
        String root = System.getProperty("seqbus.root");
        return Paths.get(root != null ? root : "../../..").toAbsolutePath().normalize();
    }

    /** Every vector, in a stable order. */
    public static List<Vector> all() {
        Path dir = root().resolve("schemas/vectors");
        List<Vector> out = new ArrayList<>();
        try (Stream<Path> packages = Files.list(dir)) {
            for (Path pkg : (Iterable<Path>) packages.sorted()::iterator) {
                try (Stream<Path> files = Files.list(pkg)) {
                    for (Path bin : (Iterable<Path>) files.sorted()::iterator) {
                        String name = bin.getFileName().toString();
                        if (!name.endsWith(".bin")) {
                            continue;
                        }
                        String stem = name.substring(0, name.length() - 4);
                        String json = Files.readString(pkg.resolve(stem + ".json"),
                                                       StandardCharsets.UTF_8).strip();
                        out.add(new Vector(pkg.getFileName().toString(),
                                           stem.substring(0, stem.indexOf('.')), name,
                                           Files.readAllBytes(bin), json));
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (out.size() < 10) {
            throw new IllegalStateException("only " + out.size() + " vectors found in " + dir);
        }
        return out;
    }
}
