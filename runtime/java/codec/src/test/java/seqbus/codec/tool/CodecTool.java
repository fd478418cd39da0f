package seqbus.codec.tool;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import seqbus.codec.ArrayBuffer;
import seqbus.codec.DecodeException;
import seqbus.codec.EncodeException;
import seqbus.codec.Json;
import seqbus.codec.MessageDecoder;
import seqbus.codec.PackageDecoder;

/**
 * The codec tool of the Java codecs, one stage of the cross-language chain test
 * (tests/compiler/test_cross_language.py): {@code CodecTool PACKAGE} reads one message per
 * stdin line, as lowercase hex (header and body), and writes one line per message, flushed:
 * {@code {"name":…,"json":…,"hex":…}} (the canonical JSON of the decoded message and the bytes
 * the decoded message encodes to) or {@code {"error":…}} when the bytes do not decode. It exits
 * 0 at the end of its input, 2 for a package it does not know.
 */
public final class CodecTool {
    private final PackageDecoder codecs;
    private final ArrayBuffer in = new ArrayBuffer();
    private ArrayBuffer out = ArrayBuffer.allocate(1 << 16);

    public CodecTool(PackageDecoder codecs) {
        this.codecs = codecs;
    }

    public static void main(String[] args) throws IOException {
        PackageDecoder codecs = args.length == 1 ? Packages.of(args[0]) : null;
        if (codecs == null) {
            System.err.println("usage: CodecTool " + String.join("|", Packages.names())
                               + " (not " + String.join(" ", args) + ")");
            System.exit(2);
            return;
        }
        CodecTool tool = new CodecTool(codecs);
        BufferedReader lines = new BufferedReader(new InputStreamReader(System.in,
                                                                        StandardCharsets.UTF_8));
        Writer stdout = new OutputStreamWriter(new FileOutputStream(FileDescriptor.out),
                                               StandardCharsets.UTF_8);
        for (String line = lines.readLine(); line != null; line = lines.readLine()) {
            stdout.write(tool.answer(line.trim()));
            stdout.write('\n');
            stdout.flush();
        }
    }

    /** The answer line (without its newline) to one message given as hex. */
    public String answer(String hex) {
        byte[] bytes;
        try {
            bytes = unhex(hex);
        } catch (IllegalArgumentException e) {
            return error(e.getMessage());
        }
        try {
            MessageDecoder message = codecs.decode(in.wrap(bytes), 0, bytes.length);
            String json = message.toJson();
            int n = reencode(message);
            StringBuilder line = new StringBuilder(json.length() + 2 * n + 40);
            line.append("{\"name\":");
            Json.appendString(line, message.messageName());
            line.append(",\"json\":").append(json).append(",\"hex\":");
            Json.appendHex(line, out, 0, n);
            return line.append('}').toString();
        } catch (DecodeException e) {
            return error(e.getMessage());
        } catch (EncodeException e) {
            return error("re-encoding: " + e.getMessage());
        }
    }

    /** Re-encode into {@code out}, grown until the message fits; returns its length. */
    private int reencode(MessageDecoder message) {
        while (true) {
            try {
                return message.reencode(out, 0);
            } catch (EncodeException e) {
                if (!e.detail().startsWith("the buffer is too small") || out.capacity() > 1 << 30) {
                    throw e;
                }
                out = ArrayBuffer.allocate(out.capacity() * 2);
            }
        }
    }

    private static String error(String text) {
        return Json.appendString(new StringBuilder("{\"error\":"), text).append('}').toString();
    }

    static byte[] unhex(String text) {
        if (text.length() % 2 != 0) {
            throw new IllegalArgumentException("odd number of hex digits (" + text.length() + ")");
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(text.charAt(2 * i), 16);
            int lo = Character.digit(text.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new IllegalArgumentException("not hex at " + 2 * i + ": "
                                                   + text.substring(2 * i, 2 * i + 2));
            }
            out[i] = (byte) (hi << 4 | lo);
        }
        return out;
    }
}
