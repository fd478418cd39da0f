"""`seqbus node MODULE:CLASS --arg NAME=VALUE ...`: constructor arguments from a shell,
converted to the parameters' annotations, every mistake named (issue 29)."""

from __future__ import annotations

import enum
from decimal import Decimal
from pathlib import Path
from typing import Literal

import pytest

from examples.pingpong.messages import PingpongNode
from seqbus import SeqbusError
from seqbus.cli import main
from seqbus.node_args import constructor_arguments
from tests.conftest import seqbus_cli
from tests.sdk.buslines import Lines, kill, start, unicast_config

#: A node whose constructor takes one parameter of each kind, and says what it was given.
ARGS_MODULE = '''\
from __future__ import annotations

import enum
import logging
from decimal import Decimal
from pathlib import Path
from typing import Literal

from examples.pingpong.messages import PingpongNode


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


class Configured(PingpongNode):
    def __init__(
        self,
        *,
        greeting: str,
        count: int = 1,
        ratio: float = 1.0,
        price: Decimal = Decimal("0"),
        verbose: bool = False,
        symbols: list[str] | None = None,
        ids: tuple[int, ...] = (),
        mode: Mode = Mode.SAFE,
        side: Literal["buy", "sell"] = "buy",
        out: Path | None = None,
        on_error: str | None = None,
    ) -> None:
        super().__init__(on_error="skip" if on_error == "skip" else None)
        logging.getLogger("argsnode").info(
            "constructed with %r",
            dict(greeting=greeting, count=count, ratio=ratio, price=price, verbose=verbose,
                 symbols=symbols, ids=ids, mode=mode, side=side, out=out,
                 on_error=self.on_error),
        )
'''


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


class Typed(PingpongNode):
    def __init__(
        self,
        *,
        greeting: str,
        count: int = 1,
        price: Decimal = Decimal("0"),
        verbose: bool = False,
        symbols: list[str] | None = None,
        ids: tuple[int, ...] = (),
        mode: Mode = Mode.SAFE,
        side: Literal["buy", "sell"] = "buy",
        out: Path | None = None,
    ) -> None:
        super().__init__()
        self.given = dict(greeting=greeting, count=count, price=price, verbose=verbose,
                          symbols=symbols, ids=ids, mode=mode, side=side, out=out)


def test_values_are_converted_to_the_parameters_annotations() -> None:
    kwargs = constructor_arguments(Typed, [
        "greeting=hello world", "count=42", "price=100.25", "verbose=yes",
        "symbols=AAPL", "symbols=MSFT", "ids=7", "ids=9", "mode=FAST", "side=sell",
        "out=/tmp/x", "greeting=hello world",
    ][:-1])
    assert Typed(**kwargs).given == {
        "greeting": "hello world", "count": 42, "price": Decimal("100.25"), "verbose": True,
        "symbols": ["AAPL", "MSFT"], "ids": (7, 9), "mode": Mode.FAST, "side": "sell",
        "out": Path("/tmp/x"),
    }
    # an enum by value too; a value holding '=' is split at the first
    assert constructor_arguments(Typed, ["greeting=a=b", "mode=safe"]) == {
        "greeting": "a=b", "mode": Mode.SAFE,
    }


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (["greting=hi"], r"--arg greting: \S*test_node_args:Typed\(\) has no parameter "
                         r"'greting'; did you mean greeting\? \(it takes: greeting, count,"),
        (["greeting=hi", "count=many"], r"--arg count=many: invalid literal for int\(\)"),
        (["greeting=hi", "verbose=maybe"], r"--arg verbose=maybe: not a boolean: 'maybe'"),
        (["greeting=hi", "mode=TURBO"], r"--arg mode=TURBO: not one of FAST, SAFE"),
        (["greeting=hi", "side=hold"], r"--arg side=hold: not one of 'buy', 'sell'"),
        (["greeting=hi", "count=1", "count=2"], r"--arg count=\['1', '2'\]: given 2 times"),
        (["greeting=hi", "price=ten"], r"--arg price=ten: not a decimal number: 'ten'"),
        (["greeting"], r"--arg 'greeting': give it as NAME=VALUE"),
        ([], r"Typed\(\) needs --arg greeting=VALUE"),
    ],
)
def test_each_mistake_names_the_parameter(given: list[str], error: str) -> None:
    with pytest.raises(SeqbusError, match=error):
        constructor_arguments(Typed, given)


def test_a_class_without_parameters_takes_no_arguments_but_the_nodes_own() -> None:
    class Plain(PingpongNode):
        pass

    assert constructor_arguments(Plain, []) == {}
    # seqbus.Node's own keyword arguments
    assert constructor_arguments(Plain, ["on_error=skip", "skip=4", "skip=9"]) == {
        "on_error": "skip", "skip": [4, 9],
    }
    with pytest.raises(SeqbusError, match=r"has no parameter 'orders' \(it takes: on_error, skip\)"):
        constructor_arguments(Plain, ["orders=5"])


def test_the_command_refuses_a_bad_argument_before_it_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "argsnode.py").write_text(ARGS_MODULE)
    monkeypatch.chdir(tmp_path)
    code = main(["node", "argsnode:Configured", "-c", "no-such.toml", "--account", "A",
                 "--arg", "greeting=hi", "--arg", "cuont=3"])
    err = capsys.readouterr().err
    assert code == 1
    assert "seqbus node: error: --arg cuont: argsnode:Configured() has no parameter 'cuont'; " \
           "did you mean count?" in err, err
    code = main(["node", "argsnode:Configured", "-c", "no-such.toml", "--account", "A"])
    assert code == 1
    assert "argsnode:Configured() needs --arg greeting=VALUE" in capsys.readouterr().err


def test_seqbus_node_constructs_the_node_with_its_arguments(tmp_path: Path) -> None:
    config, _, _ = unicast_config(tmp_path)
    (tmp_path / "argsnode.py").write_text(ARGS_MODULE)
    node = start([*seqbus_cli(), "node", "argsnode:Configured", "-c", str(config), "--account",
                  "ARGS", "--arg", "greeting=hi there", "--arg", "count=3", "--arg", "ratio=0.5",
                  "--arg", "price=10.05", "--arg", "verbose=on", "--arg", "symbols=AAPL",
                  "--arg", "symbols=MSFT", "--arg", "ids=1", "--arg", "ids=2", "--arg",
                  "mode=FAST", "--arg", "side=sell", "--arg", "out=report.txt", "--arg",
                  "on_error=skip"], tmp_path)
    try:
        lines = Lines(node)
        _, m = lines.wait_for(r"argsnode: constructed with (.*)$", timeout=30)
        assert m.group(1) == repr(dict(
            greeting="hi there", count=3, ratio=0.5, price=Decimal("10.05"), verbose=True,
            symbols=["AAPL", "MSFT"], ids=(1, 2), mode="<Mode.FAST: 'fast'>", side="sell",
            out=Path("report.txt"), on_error="skip",
        )).replace('"<Mode.FAST: \'fast\'>"', "<Mode.FAST: 'fast'>")
        # then it runs as any node: it waits for the sequencer
        lines.wait_for(r"node ARGS/1: joining session LOGS01", timeout=10)
    finally:
        kill(node)
