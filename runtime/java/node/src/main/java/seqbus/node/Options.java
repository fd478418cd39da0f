package seqbus.node;

import java.time.Duration;
import java.util.Objects;

/** How a node joins the bus (the arguments of Python's {@code seqbus.run}). */
public final class Options {
    final String config;
    final String account;
    int instance = 1;
    Start start = Start.live();
    String listen;
    String onError;
    Duration readyTimeout = Duration.ofSeconds(10);
    Duration drainTimeout = Duration.ofSeconds(5);

    /**
     * The bus configuration file (TOML, docs/configuration.md) and the node's account (1 to 8
     * printable ASCII characters; hot-hot instances of one logical node share it).
     */
    public Options(String config, String account) {
        this.config = Objects.requireNonNull(config, "config");
        this.account = Objects.requireNonNull(account, "account");
    }

    public Options instance(int instance) {
        if (instance < 0 || instance > 0xFFFF) {
            throw new IllegalArgumentException("instance is 0..65535, not " + instance);
        }
        this.instance = instance;
        return this;
    }

    public Options start(Start start) {
        this.start = Objects.requireNonNull(start, "start");
        return this;
    }

    /** The address a node of a udp-unicast bus receives on; null: the configuration's. */
    public Options listen(String listen) {
        this.listen = listen;
        return this;
    }

    /**
     * "stop" or "skip": what a handler that throws does; null: the configuration's
     * ({@code node.on_error}, {@code [node.accounts.NAME]}), else {@link Node#defaultOnError}.
     */
    public Options onError(String onError) {
        if (onError != null && !onError.equals("stop") && !onError.equals("skip")) {
            throw new IllegalArgumentException("onError must be \"stop\" or \"skip\", not \"" + onError + "\"");
        }
        this.onError = onError;
        return this;
    }

    /** How long to wait for the sequencer to tell the node its next command sequence. */
    public Options readyTimeout(Duration timeout) {
        this.readyTimeout = Objects.requireNonNull(timeout, "readyTimeout");
        return this;
    }

    /** How long a stopping node keeps reading the stream for its commands to be sequenced. */
    public Options drainTimeout(Duration timeout) {
        this.drainTimeout = Objects.requireNonNull(timeout, "drainTimeout");
        return this;
    }
}
