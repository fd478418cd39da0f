"""Java node target (``seqc generate --lang java-node``): per schema with messages, the typed
node base class ``<Package>Node`` (``exchange`` → ``ExchangeNode``), beside the codecs of
``--lang java`` in the same Java package.

It extends ``seqbus.node.Node`` (the ``seqbus-node`` library, runtime/java/node): its
``dispatchTyped`` hands each message of the schema to ``on<Message>(<Message>Decoder,
Message)``, one decoder per message type owned by the node (nothing allocated per message),
and ``encode<Message>()`` / ``send(<Message>Encoder)`` / ``post(<Message>Encoder)`` send
typed from the node's send buffer. A separate target because it needs ``seqbus-node`` on the
class path, which code that uses only the codecs does not have.
"""

from __future__ import annotations

from seqc import gen_java, ir, naming

#: Handler names the runtime's ``seqbus.node.Node`` uses for its own hooks.
RUNTIME_HOOKS = frozenset({"onOpened", "onMessage", "onRewound", "onClosed"})


def member(message: str) -> str:
    """``NewOrder`` → ``newOrder``: the stem of the node's fields for the message's codecs."""
    return message[:1].lower() + message[1:]


def encode(message: str) -> str:
    """``NewOrder`` → ``encodeNewOrder``: the method starting one in the send buffer."""
    return "encode" + message


def check_names(schema: ir.Schema) -> None:
    """Refuse a schema whose handler would be one of the runtime's hooks."""
    gen_java.check_names(schema)
    clash = [m.name for m in schema.messages if naming.java_handler(m.name) in RUNTIME_HOOKS]
    if clash:
        raise gen_java.JavaNameError(
            f"{schema.source}: cannot generate the Java node base: the handler of message "
            f"{', '.join(clash)} would be a hook of seqbus.node.Node "
            f"({', '.join(sorted(RUNTIME_HOOKS))}): rename the message")


def generate(schema: ir.Schema, java_package: str | None = None) -> dict[str, str]:
    """``{<pkg path>/<Package>Node.java: text}`` for a schema with messages, else nothing."""
    if not schema.messages:
        return {}
    check_names(schema)
    env = gen_java.environment()
    env.globals.update(member=member, encode=encode)
    jpkg = java_package or naming.java_package(schema.package)
    cls = naming.node_class(schema.package)
    text = env.get_template("java/node.java.j2").render(
        schema=schema, jpkg=jpkg, cls=cls, messages=naming.java_messages_class(schema.package))
    return {f"{jpkg.replace('.', '/')}/{cls}.java": text}


def generate_index(schemas: list[ir.Schema]) -> dict[str, str]:
    """Nothing: the node runtime is the seqbus-node library."""
    return {}
