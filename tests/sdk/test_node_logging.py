"""A bus that says what it is doing: `seqbus node` and `seqbus sequencer` as processes, and a
node run from Python, read through their log lines (issue 29: a node that waits for a
sequencer that is not there says within 5 s what it waits for and why it may not come).

Everything runs on UDP unicast over loopback: no multicast, no network namespace needed.
"""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import seqbus
from seqbus import _core
from tests.conftest import seqbus_cli, udp_bound
from tests.sdk.buslines import Lines, kill, start, unicast_config

#: Node classes for the processes: Watcher logs where it stood when it caught up, and each
#: Ping; Sender posts `count` Pings and stops once it has seen the last; Slow takes 0.3 ms of
#: this machine's clock per Ping.
NODE_MODULE = '''\
import logging
import time

from examples.pingpong.messages import Ping, PingpongNode, PingView

log = logging.getLogger("lognode")


class Watcher(PingpongNode):
    def on_ping(self, msg: PingView, mine: bool) -> None:
        log.info("ping %d at sequence %d", msg.id, self.sequence())

    def on_rewound(self) -> None:
        log.info("on_rewound at sequence %d", self.sequence())


class Sender(PingpongNode):
    def __init__(self, *, count: int) -> None:
        super().__init__()
        self.count = count

    def on_opened(self) -> None:
        for i in range(self.count):
            self.post(Ping(id=i, sent_at_ns=0))

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine and msg.id == self.count - 1:
            log.info("all %d sent", self.count)
            self.stop()


class Slow(PingpongNode):
    def on_ping(self, msg: PingView, mine: bool) -> None:
        until = time.monotonic() + 0.0003
        while time.monotonic() < until:
            pass
'''


def test_a_node_with_no_sequencer_says_within_5_s_what_it_waits_for_and_why(
    tmp_path: Path,
) -> None:
    config, upstream, listens = unicast_config(tmp_path)
    (tmp_path / "lognode.py").write_text(NODE_MODULE)
    node = start([*seqbus_cli(), "node", "lognode:Watcher", "-c", str(config), "--account",
                  "WATCH"], tmp_path)
    try:
        lines = Lines(node)
        _, waiting = lines.wait_for(
            r"INFO node WATCH/1: joining session LOGS01 \(live\): waiting for the sequencer at "
            rf"127\.0\.0\.1:{upstream} and its stream on udp-unicast at (\S+)",
            timeout=30,  # the interpreter's start, under load
        )
        assert waiting.group(1) == listens[0]
        # said within 5 s of joining, by the node's own clock (the test's reading of the
        # lines only bounds the wait)
        _, why = lines.wait_for(
            r"WARNING node WATCH/1: no heartbeat for ([0-9.]+) s .*", timeout=30
        )
        assert float(why.group(1)) < 5.0, why.group(0)
        text = why.group(0)
        assert f"from the sequencer at 127.0.0.1:{upstream}" in text, text
        assert "since it started" in text, text
        # the cause, found by looking: nothing on this host holds the sequencer's port
        assert (
            f"no sequencer is running: nothing on this host is bound to 127.0.0.1:{upstream}"
            in text
        ), text
        assert "is 127.0.0.1:" in text and "one of them" in text, text  # unicast's own cause
        assert node.poll() is None  # it goes on waiting (until its ready timeout)
    finally:
        kill(node)


def test_a_node_says_connected_caught_up_at_n_and_stopped_at_n_on_sigterm(
    tmp_path: Path,
) -> None:
    config, upstream, _ = unicast_config(tmp_path)
    (tmp_path / "lognode.py").write_text(NODE_MODULE)
    sequencer = start([*seqbus_cli(), "sequencer", "-c", str(config)], tmp_path)
    node: subprocess.Popen[bytes] | None = None
    try:
        seq_lines = Lines(sequencer)
        seq_lines.wait_for(
            rf"INFO sequencer: session LOGS01: commands on 127\.0\.0\.1:{upstream}, publishing "
            r"on udp-unicast to",
            timeout=30,
        )
        node = start([*seqbus_cli(), "node", "lognode:Watcher", "-c", str(config), "--account",
                      "WATCH", "--rewind"], tmp_path)
        lines = Lines(node)
        lines.wait_for(r"rewinding from the start\): waiting for the sequencer", timeout=30)
        lines.wait_for(
            rf"INFO node WATCH/1: connected to the sequencer at 127\.0\.0\.1:{upstream} "
            r"\(session LOGS01\): its stream arrives on udp-unicast",
            timeout=10,
        )
        _, caught_up = lines.wait_for(
            r"INFO node WATCH/1: caught up at sequence (\d+), live from here", timeout=10
        )
        _, rewound = lines.wait_for(r"lognode: on_rewound at sequence (\d+)", timeout=10)
        # the core's record and the node's own view name the same point of the stream
        assert int(caught_up.group(1)) == int(rewound.group(1)) >= 1
        node.send_signal(signal.SIGTERM)
        _, stopped = lines.wait_for(
            r"INFO node WATCH/1: stopped at sequence (\d+) \(SIGTERM\)", timeout=15
        )
        assert int(stopped.group(1)) >= int(caught_up.group(1))
        assert node.wait(timeout=15) == 0
        assert "no heartbeat" not in lines.text(), lines.text()

        sequencer.send_signal(signal.SIGTERM)
        seq_lines.wait_for(r"INFO sequencer: SIGTERM: stopping", timeout=10)
        _, seq_stopped = seq_lines.wait_for(r"INFO sequencer: stopped at message (\d+)", timeout=10)
        assert int(seq_stopped.group(1)) >= int(stopped.group(1))
        assert sequencer.wait(timeout=15) == 0
    finally:
        if node is not None:
            kill(node)
        kill(sequencer)


def test_a_slow_rewind_shows_its_progress_and_no_false_silence(tmp_path: Path) -> None:
    """A node busy rewinding 12,000 messages at 0.3 ms each (three batches of at most 4,096)
    reads no live packet for seconds: it is not waiting, so it says how far it is (every
    second at debug level), not that the stream is silent."""
    config, upstream, listens = unicast_config(tmp_path, subscribers=2)
    (tmp_path / "lognode.py").write_text(NODE_MODULE)
    sequencer = start([*seqbus_cli(), "sequencer", "-c", str(config)], tmp_path)
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        Lines(sequencer).wait_for(r"INFO sequencer: session LOGS01", timeout=30)
        nodes.append(start([*seqbus_cli(), "node", "lognode:Sender", "-c", str(config),
                            "--account", "SEND", "--arg", "count=12000"], tmp_path))
        sender = Lines(nodes[-1])
        sender.wait_for(r"lognode: all 12000 sent", timeout=90)
        assert nodes[-1].wait(timeout=30) == 0, sender.text()
        nodes.append(start([*seqbus_cli(), "node", "lognode:Slow", "-c", str(config),
                            "--account", "SLOW", "--rewind", "--listen", listens[1],
                            "--log-level", "DEBUG"], tmp_path))
        slow = Lines(nodes[-1])
        _, caught_up = slow.wait_for(r"caught up at sequence (\d+), live from here "
                                     r"\(([\d,]+) messages replayed in ([\d.]+) s\)", timeout=90)
        assert int(caught_up.group(1)) > 12000 and float(caught_up.group(3)) >= 3.0
        # messages handed to the handlers so far, of the stream's end when the node knows it
        progress = [
            int(m.group(1).replace(",", ""))
            for m in re.finditer(r"DEBUG node SLOW/1: rewinding: ([\d,]+) (?:of [\d,]+ messages "
                                 r"\(\d+%\), [\d,]+/s|messages so far \(where the stream ends "
                                 r"is not known yet)", slow.text())
        ]
        assert len(progress) >= 2, slow.text()
        assert progress == sorted(progress) and progress[-1] <= int(caught_up.group(1))
        assert "no heartbeat" not in slow.text(), slow.text()
    finally:
        for node in nodes:
            kill(node)
        kill(sequencer)


def test_the_log_level_option_leaves_out_what_is_below_it(tmp_path: Path) -> None:
    config, upstream, _ = unicast_config(tmp_path)
    (tmp_path / "lognode.py").write_text(NODE_MODULE)
    node = start([*seqbus_cli(), "node", "lognode:Watcher", "-c", str(config), "--account",
                  "WATCH", "--log-level", "warning"], tmp_path)
    try:
        lines = Lines(node)
        lines.wait_for(r"WARNING node WATCH/1: no heartbeat for", timeout=30)
        assert "joining session" not in lines.text(), lines.text()  # an INFO line
    finally:
        kill(node)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.guard = threading.Lock()  # (not `lock`: logging.Handler's own, held around emit)

    def emit(self, record: logging.LogRecord) -> None:
        with self.guard:
            self.records.append(record)

    def find(self, pattern: str) -> logging.LogRecord | None:
        with self.guard:
            return next((r for r in self.records if re.search(pattern, r.getMessage())), None)


def test_library_users_get_the_records_through_the_seqbus_loggers(tmp_path: Path) -> None:
    """seqbus.run in this process, the sequencer on a Rust thread of it: the core's records
    (Rust, through pyo3-log) and the runner's reach a handler on the `seqbus` logger, with
    their levels and logger names."""
    from examples.pingpong.messages import PingpongNode

    config, upstream, _ = unicast_config(tmp_path)
    handler = _Records()
    logger = logging.getLogger("seqbus")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    sequencer = _core.Sequencer(str(config))
    stop = threading.Event()
    done: list[BaseException | None] = []

    class Quiet(PingpongNode):
        pass

    def body() -> None:
        try:
            seqbus.run(Quiet, config, "LIB", start="rewind", stop=stop)
            done.append(None)
        except BaseException as exc:  # handed to the test below
            done.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while handler.find(r"caught up at sequence") is None:
            assert time.monotonic() < deadline, [r.getMessage() for r in handler.records]
            assert thread.is_alive(), done
            time.sleep(0.02)
        stop.set()
        thread.join(20)
        assert not thread.is_alive() and done == [None], done
        connected = handler.find(rf"node LIB/1: connected to the sequencer at 127\.0\.0\.1:{upstream}")
        started = handler.find(r"sequencer: session LOGS01: commands on")
        stopped = handler.find(r"node LIB/1: stopped at sequence \d+ \(the stop event was set\)")
        assert connected is not None and connected.name == "seqbus.node"
        assert connected.levelno == logging.INFO
        assert started is not None and started.name == "seqbus.sequencer"
        assert stopped is not None and stopped.name == "seqbus.node"
    finally:
        stop.set()
        thread.join(20)
        sequencer.stop()
        assert sequencer.join(20)
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert handler.find(r"sequencer: stopped at message \d+") is not None


def test_a_rewinds_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    monkeypatch.setenv("COLUMNS", "200")  # the bar is cut to the terminal's width

    from seqbus.logs import PROGRESS_LOGGER, Console

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def record(name: str, level: int, text: str) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, text, (), None)

    progress = "node ME/1: rewinding: 50,000 of 200,000 messages (25%), 80,000/s"
    tty = Terminal()
    console = Console(tty)
    console.emit(record(PROGRESS_LOGGER, logging.DEBUG, progress))
    assert tty.getvalue() == f"\r\x1b[K[#####...............] {progress}"  # in place
    # one record, emitted and then formatted again: two would carry two times
    caught_up = record("seqbus.node", logging.INFO, "node ME/1: caught up")
    console.emit(caught_up)
    assert tty.getvalue().endswith("\r\x1b[K" + console.format(caught_up) + "\n")
    assert console.bar == ""  # cleared, not drawn again

    plain = io.StringIO()
    console = Console(plain)
    console.emit(record(PROGRESS_LOGGER, logging.INFO, progress))
    line = plain.getvalue()
    assert line.endswith(f" INFO {progress}\n") and "\r" not in line and "#" not in line
    other = io.StringIO()
    Console(other).emit(record("app.orders", logging.WARNING, "late"))
    assert other.getvalue().endswith(" WARNING app.orders: late\n")  # a logger of the app named


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_configured_leaves_logging_as_it_was(level: str) -> None:
    from seqbus.logs import configured

    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    with configured(level) as console:
        assert console in root.handlers and root.level == logging.getLevelName(level)
    assert (list(root.handlers), root.level) == before


def test_a_service_logs_through_python_logging_with_the_log_level(tmp_path: Path) -> None:
    config, upstream, _ = unicast_config(tmp_path)
    proc = start([*seqbus_cli(), "sequencer", "-c", str(config), "--log-level", "ERROR"],
                 tmp_path)
    try:
        lines = Lines(proc)
        # nothing at INFO or WARNING comes; the process runs (its port is held)
        deadline = time.monotonic() + 30
        for _ in range(3000):
            if udp_bound(upstream) or time.monotonic() > deadline:
                break
            lines._read(0.01)
        assert udp_bound(upstream)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        lines._read(1.0)  # what it wrote before it exited (the pipe is at its end)
        assert lines.text() == "", lines.text()
    finally:
        kill(proc)
