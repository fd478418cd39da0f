package seqbus.node;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A unicast bus for the tests (no multicast: no network namespace needed): its configuration in
 * a temporary directory and a seqbus-sequencer process (the system property seqbus.sequencer),
 * killed by {@link #close()}.
 */
final class Bus implements AutoCloseable {
    final Path dir;
    final Path config;
    private final String text;
    private final List<String> listen = new ArrayList<>();
    private final Process sequencer;

    static int freePort() {
        try (DatagramSocket s = new DatagramSocket(0, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Whether a UDP socket of this namespace is bound to {@code port} (/proc/net/udp). */
    static boolean udpBound(int port) throws IOException {
        String suffix = String.format(":%04X", port);
        try (Stream<String> lines = Files.lines(Path.of("/proc/net/udp"))) {
            return lines.skip(1).map(l -> l.trim().split("\\s+")[1]).anyMatch(a -> a.endsWith(suffix));
        }
    }

    Bus(String extra) throws IOException, InterruptedException {
        dir = Files.createTempDirectory("seqbus-java-node-");
        int up = freePort();
        int rep = freePort();
        StringBuilder subs = new StringBuilder();
        for (int i = 0; i < 6; i++) {
            listen.add("127.0.0.1:" + freePort());
            subs.append(i == 0 ? "" : ", ").append('"').append(listen.get(i)).append('"');
        }
        text = "[bus]\nsession = \"JAVANODE\"\n[sequencer]\nupstream = \"127.0.0.1:" + up + "\"\n"
                + "journal_dir = \"" + dir.resolve("journal") + "\"\nclock_tick_ms = 5\nheartbeat_ms = 50\n"
                + "[downstream]\ntransport = \"udp-unicast\"\nsubscribers = [" + subs + "]\n"
                + "[replayer]\nlisten = \"127.0.0.1:" + rep + "\"\n[node]\nreplayers = [\"127.0.0.1:" + rep
                + "\"]\nwindow = 4\n" + extra;
        config = dir.resolve("bus.toml");
        Files.writeString(config, text);
        String exe = System.getProperty("seqbus.sequencer");
        if (exe == null || !Files.isExecutable(Path.of(exe))) {
            throw new IllegalStateException("seqbus.sequencer (the seqbus-sequencer program) is not set or not "
                    + "there: " + exe + " (cargo build --release -p seqbus-net --bins)");
        }
        sequencer = new ProcessBuilder(exe, config.toString())
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("sequencer.log").toFile())
                .start();
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!(udpBound(up) && udpBound(rep))) {
            if (!sequencer.isAlive()) {
                throw new IllegalStateException("the sequencer stopped at start: "
                        + Files.readString(dir.resolve("sequencer.log")));
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the sequencer did not bind in 20 s");
            }
            Thread.sleep(5);
        }
    }

    Options options(String account, int instance, Start start, int slot) {
        return new Options(config.toString(), account).instance(instance).start(start).listen(listen.get(slot));
    }

    /** The same bus's configuration with {@code extra} appended, in a file of its own. */
    String variant(String name, String extra) throws IOException {
        Path p = dir.resolve(name);
        Files.writeString(p, text + extra);
        return p.toString();
    }

    @Override
    public void close() throws IOException {
        sequencer.destroyForcibly();
        try {
            sequencer.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> all = Files.walk(dir)) {
            all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
