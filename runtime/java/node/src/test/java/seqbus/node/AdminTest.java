package seqbus.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import seqbus.bus.AdminCommandEncoder;
import seqbus.bus.AdminReplyDecoder;
import seqbus.bus.AdminStatus;
import seqbus.codec.ArrayBuffer;

/**
 * Admin commands without a bus: the Java twin answers every AdminCommand of
 * tests/languages/admin_vectors.txt (written by the Python twin: help, conversions, bad and
 * unknown commands, Failed, Denied, Python's repr of odd text) with exactly the AdminReply bytes the
 * Python node posts; corrupt commands and other accounts' get no reply; registration mistakes are
 * refused by name.
 */
class AdminTest {
    private static final Path VECTORS = Path.of(System.getProperty("user.dir"), "..", "..", "..", "tests",
            "languages", "admin_vectors.txt");

    private static byte[] command(String target, long requestId, String name, String... args) {
        byte[] out = new byte[4096];
        AdminCommandEncoder e = new AdminCommandEncoder().wrapAndApplyHeader(new ArrayBuffer(out), 0).target(target)
                .requestId(requestId);
        var group = e.argsCount(args.length);
        for (String a : args) {
            group.next().value(a);
        }
        int n = e.name(name).encodedLength();
        return java.util.Arrays.copyOf(out, n);
    }

    private static byte[] answer(Node node, byte[] command, long sequence, String sender) {
        return node.adminReply(new ArrayBuffer(command), 0, command.length, sequence, sender);
    }

    private static AdminTwin twin(Set<String> senders) {
        AdminTwin t = new AdminTwin(senders);
        return t;
    }

    @Test
    void repliesAreThePythonNodesByteForByte() throws IOException {
        List<String> lines = Files.readAllLines(VECTORS);
        AdminTwin open = twin(null);
        AdminTwin guarded = twin(Set.of("OPS"));
        int checked = 0;
        HexFormat hex = HexFormat.of();
        for (String line : lines) {
            if (line.startsWith("#") || line.isBlank()) {
                continue;
            }
            String[] f = line.split("\t");
            AdminTwin node = f[1].equals("-") ? open : guarded;
            ((Node) node).setAccountForTest("TWIN", 1);
            byte[] reply = answer(node, hex.parseHex(f[3]), Long.parseLong(f[2]), f[0]);
            assertEquals(f[4], reply == null ? "no reply" : hex.formatHex(reply), "the reply to " + line.substring(0,
                    Math.min(line.length(), 200)));
            checked++;
        }
        assertTrue(checked >= 30, checked + " vectors");
        assertEquals(checked - 3, open.stats().adminCommands()); // three vectors are the guarded twin's
        assertEquals(0, open.stats().adminErrors());
    }

    @Test
    void aLongReplyIsCutAsPythonCutsIt() {
        AdminTwin t = twin(null);
        ((Node) t).setAccountForTest("TWIN", 1);
        byte[] reply = answer(t, command("TWIN", 7, "long", "60001"), 5, "ADMIN");
        AdminReplyDecoder d = new AdminReplyDecoder().wrap(new ArrayBuffer(reply), 0, reply.length);
        assertEquals(AdminStatus.Ok, d.status());
        assertEquals("\u00e9".repeat(60_000) + "... (1 characters cut)", d.text());
        byte[] whole = answer(t, command("TWIN", 8, "long", "60000"), 6, "ADMIN");
        d.wrap(new ArrayBuffer(whole), 0, whole.length);
        assertEquals("\u00e9".repeat(60_000), d.text());
        // code points, not chars: a character outside the BMP counts once
        assertEquals("\ud83d\ude00", Admin.cut("\ud83d\ude00\ud83d\ude00", 1));
    }

    @Test
    void aThrowingHandlerIsFailedCountedAndTheNodeGoesOn() {
        AdminTwin t = twin(null);
        t.adminCommand("boom", "", a -> {
            throw new IllegalStateException("kaboom");
        });
        ((Node) t).setAccountForTest("TWIN", 1);
        byte[] reply = answer(t, command("TWIN", 9, "boom"), 11, "ADMIN");
        AdminReplyDecoder d = new AdminReplyDecoder().wrap(new ArrayBuffer(reply), 0, reply.length);
        assertEquals(AdminStatus.Failed, d.status());
        assertEquals("IllegalStateException: kaboom", d.text());
        assertEquals(11, d.commandSequence());
        assertEquals(9, d.requestId());
        assertEquals("ADMIN", d.requester());
        assertEquals(1, t.stats().adminErrors());
        assertEquals(1, t.stats().adminCommands());
        assertEquals(AdminStatus.Ok, status(answer(t, command("TWIN", 10, "bump", "3"), 12, "ADMIN")));
    }

    private static AdminStatus status(byte[] reply) {
        return new AdminReplyDecoder().wrap(new ArrayBuffer(reply), 0, reply.length).status();
    }

    @Test
    void otherAccountsAndCorruptCommandsGetNoReply() {
        AdminTwin t = twin(null);
        ((Node) t).setAccountForTest("TWIN", 1);
        assertNull(answer(t, command("OTHER", 1, "help"), 3, "ADMIN"));
        assertEquals(0, t.stats().adminCommands());
        byte[] good = command("TWIN", 1, "help");
        byte[] cut = java.util.Arrays.copyOf(good, good.length - 2);
        assertNull(answer(t, cut, 4, "ADMIN"));
        byte[] badUtf8 = good.clone();
        badUtf8[badUtf8.length - 1] = (byte) 0xFF;
        assertNull(answer(t, badUtf8, 5, "ADMIN"));
        byte[] badTarget = good.clone();
        badTarget[8] = (byte) 0xC3;
        assertNull(answer(t, badTarget, 6, "ADMIN"));
        assertEquals(3, t.stats().adminErrors());
        assertEquals(0, t.stats().adminCommands());
        assertTrue(answer(t, good, 7, "ADMIN") != null);
    }

    @Test
    void helpListsTheCommandsAsPythonDoes() {
        assertEquals("help - list the admin commands of this node\n"
                + "bump AMOUNT [DOUBLE] - add AMOUNT to the total (twice with DOUBLE)\n"
                + "echo FIRST [REST...] - join the words\n"
                + "long COUNT - a reply of COUNT characters\n"
                + "refuse - refuse, as a command whose preconditions fail does\n"
                + "scale FACTOR", twin(null).adminHelp());
    }

    @Test
    void conversionsFollowPython() {
        assertEquals(-12L, Admin.convert(AdminType.INTEGER, "\u00a0-1_2\n"));
        assertNull(Admin.convert(AdminType.INTEGER, "1.0"));
        assertNull(Admin.convert(AdminType.INTEGER, "99999999999999999999"));
        assertEquals(Double.NEGATIVE_INFINITY, Admin.convert(AdminType.NUMBER, "-Infinity"));
        assertEquals(5.0, Admin.convert(AdminType.NUMBER, "5."));
        assertNull(Admin.convert(AdminType.NUMBER, "1e"));
        assertNull(Admin.convert(AdminType.NUMBER, "1f"));
        assertEquals(Boolean.TRUE, Admin.convert(AdminType.BOOLEAN, " Y "));
        assertNull(Admin.convert(AdminType.BOOLEAN, "2"));
        assertEquals("'\\x00\\xa0\\U0010ffff'", Admin.repr("\u0000\u00a0\udbff\udfff"));
    }

    @Test
    void registrationMistakesAreRefusedByName() {
        AdminTwin t = twin(null);
        assertThrows(IllegalArgumentException.class, () -> t.adminCommand("help", "", a -> ""));
        assertThrows(IllegalArgumentException.class, () -> t.adminCommand("bump", "", a -> ""));
        assertThrows(IllegalArgumentException.class, () -> t.adminCommand("9lives", "", a -> ""));
        assertThrows(IllegalArgumentException.class, () -> t.adminCommand("x".repeat(65), "", a -> ""));
        AdminCommand c = t.adminCommand("ok", "", a -> "");
        c.optional("a", AdminType.TEXT);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> c.param("b", AdminType.TEXT));
        assertEquals("admin command ok: b is required after an optional parameter", e.getMessage());
        c.rest("more", AdminType.INTEGER);
        assertThrows(IllegalArgumentException.class, () -> c.optional("c", AdminType.TEXT));
        assertArrayEquals(new Object[] {"a"}, c.params().stream().map(AdminCommand.Param::name).toArray());
    }
}
