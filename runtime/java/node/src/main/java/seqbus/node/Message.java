package seqbus.node;

import java.nio.charset.StandardCharsets;
import seqbus.codec.NioBuffer;
import seqbus.codec.ReadBuffer;

/**
 * The message a handler is handed: a flyweight over the node's batch (no copy), valid while the
 * handler runs. {@link #buffer()} at {@link #offset()} holds the whole message, its IDL header
 * included, for {@link #length()} bytes: what a generated decoder wraps.
 */
public final class Message {
    long sequence;
    long timeNs;
    int flags;
    int offset;
    int length;
    long header;
    long sender;
    long senderBits;
    long commandSeq;
    NioBuffer buffer;

    Message() {}

    /** The message's sequence. */
    public long sequence() {
        return sequence;
    }

    /** The sequencer's timestamp of it (ns since the epoch). */
    public long timeNs() {
        return timeNs;
    }

    /** Sent under this node's account (by any of its instances). */
    public boolean mine() {
        return (flags & Native.FLAG_MINE) != 0;
    }

    /** The batch the message lies in (absolute indexes). */
    public ReadBuffer buffer() {
        return buffer;
    }

    /** Where the message starts in {@link #buffer()}. */
    public int offset() {
        return offset;
    }

    /** Its length, the IDL header included. */
    public int length() {
        return length;
    }

    public int blockLength() {
        return (int) (header & 0xFFFF);
    }

    public int templateId() {
        return (int) ((header >>> 16) & 0xFFFF);
    }

    public int schemaId() {
        return (int) ((header >>> 32) & 0xFFFF);
    }

    public int version() {
        return (int) ((header >>> 48) & 0xFFFF);
    }

    /** The sender's account, without its padding. */
    public String sender() {
        byte[] b = new byte[8];
        int n = 0;
        for (int i = 0; i < 8; i++) {
            byte c = (byte) (sender >>> (8 * i));
            if (c == 0) {
                break;
            }
            b[n++] = c;
        }
        return new String(b, 0, n, StandardCharsets.US_ASCII);
    }

    public int senderInstance() {
        return (int) (senderBits & 0xFFFF);
    }

    /** The sender's command sequence of the message. */
    public long commandSeq() {
        return commandSeq;
    }

    /** A copy of the message's bytes (for keeping it past the handler). */
    public byte[] toByteArray() {
        byte[] out = new byte[length];
        buffer.getBytes(offset, out, 0, length);
        return out;
    }
}
