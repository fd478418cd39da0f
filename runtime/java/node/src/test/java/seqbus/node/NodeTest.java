package seqbus.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java node without a bus: errors carry the library's code and message, options are
 * checked, a node that is not open says so, and a node with no sequencer to answer gives up
 * after its ready timeout naming the sequencer.
 */
class NodeTest {
    static final class Quiet extends Node {}

    @TempDir
    Path dir;

    /** A unicast bus whose sequencer is not running; the node listens on the returned address. */
    private Options lonely(String account) throws IOException {
        String listen = "127.0.0.1:" + Bus.freePort();
        Path p = dir.resolve("bus.toml");
        Files.writeString(p, "[bus]\nsession = \"LONELY\"\n[sequencer]\nupstream = \"127.0.0.1:" + Bus.freePort()
                + "\"\n[downstream]\ntransport = \"udp-unicast\"\nsubscribers = [\"" + listen + "\"]\n");
        return new Options(p.toString(), account).listen(listen);
    }

    @Test
    void aMissingConfigurationIsAConfigErrorNamingTheFile() {
        SeqbusException e = assertThrows(SeqbusException.class,
                () -> new Quiet().open(new Options("/nonexistent/bus.toml", "A")));
        assertEquals(SeqbusException.ERR_CONFIG, e.code());
        assertTrue(e.getMessage().contains("/nonexistent/bus.toml"), e.getMessage());
        assertTrue(e.getMessage().contains("SEQBUS_ERR_CONFIG"), e.getMessage());
    }

    @Test
    void aBadKeyIsNamed() throws IOException {
        Path p = dir.resolve("bad.toml");
        Files.writeString(p, "[bus]\nsession = \"X\"\n[sequencer]\nupstrem = \"x\"\n");
        SeqbusException e = assertThrows(SeqbusException.class,
                () -> new Quiet().open(new Options(p.toString(), "A")));
        assertEquals(SeqbusException.ERR_CONFIG, e.code());
        assertTrue(e.getMessage().contains("upstrem"), e.getMessage());
    }

    @Test
    void aBadAccountIsAnArgumentError() throws IOException {
        SeqbusException e = assertThrows(SeqbusException.class, () -> new Quiet().open(lonely("TOOLONGNAME")));
        assertEquals(SeqbusException.ERR_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("TOOLONGNAME"), e.getMessage());
    }

    @Test
    void withoutASequencerTheNodeGivesUpAfterItsReadyTimeout() throws IOException {
        Quiet n = new Quiet();
        SeqbusException e = assertThrows(SeqbusException.class,
                () -> n.open(lonely("A").readyTimeout(Duration.ofMillis(300))));
        assertEquals(SeqbusException.ERR_TIMEOUT, e.code());
        assertTrue(e.getMessage().contains("sequencer"), e.getMessage());
        assertThrows(IllegalStateException.class, n::posted);  // closed again
    }

    @Test
    void optionsAreChecked() {
        Options o = new Options("bus.toml", "A");
        assertThrows(IllegalArgumentException.class, () -> o.onError("ignore"));
        assertThrows(IllegalArgumentException.class, () -> o.instance(70000));
        assertThrows(IllegalArgumentException.class, () -> Start.from(0));
        assertThrows(IllegalArgumentException.class, () -> new Topic(7, 70000));
        assertEquals(0, Start.live().value());
        assertEquals(1, Start.rewind().value());
        assertEquals(42, Start.from(42).value());
    }

    @Test
    void aNodeThatIsNotOpenSaysSo() {
        Quiet n = new Quiet();
        assertEquals(0, n.sequence());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> n.send(new byte[8]));
        assertTrue(e.getMessage().contains("not open"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> n.setTimer(1, () -> {}));
        assertThrows(IllegalStateException.class, () -> n.pollOnce(Duration.ofMillis(1)));
        n.close();  // nothing to close
        n.stop();
        assertTrue(n.stopped());
    }

    @Test
    void aMissingLibraryIsExplained() {
        String m = Native.missing("-Dseqbus.node.library names /x, which is not a file");
        assertTrue(m.contains("libseqbus_ffi.so"), m);
        assertTrue(m.contains("SEQBUS_NODE_LIBRARY"), m);
        assertTrue(m.contains("cargo build --release -p seqbus-ffi"), m);
        assertTrue(m.contains("seqbus sdk"), m);
    }

    @Test
    void theLibraryBesideAJarIsLookedForOnlyFromAJar() {
        // these tests run from target/classes, a directory: there is no jar to look beside
        assertNull(Native.besideJar());
    }
}
