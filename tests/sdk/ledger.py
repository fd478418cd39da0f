"""A ledger-like node whose handler raises on one transfer (tests of docs/sdk.md, "Errors in
handlers"), and the feeder that sends the transfers. A transfer is a pingpong ``Ping``: ``id``
is the amount; ``POISON`` (or any amount in ``poison``) makes the handler raise."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from examples.pingpong.messages import Ping, PingpongNode, PingView
from seqbus.node import OnError

#: The amount whose transfer the ledger's handler refuses by raising.
POISON = 25


class Ledger(PingpongNode):
    """Books every transfer into a balance; raises ``ValueError`` on a poisoned amount after
    it has already changed its state half way (as a real handler might)."""

    poison: frozenset[int] = frozenset({POISON})

    def __init__(self, *, on_error: OnError | None = None, skip: Iterable[int] = ()) -> None:
        super().__init__(on_error=on_error, skip=skip)
        self.balance = 0
        self.booked = 0
        self._hash = hashlib.sha256()

    def on_ping(self, msg: PingView, mine: bool) -> None:
        amount = msg.id
        self._hash.update(f"{self.sequence()}:{amount};".encode())
        if amount in self.poison:
            raise ValueError(f"transfer of {amount} breaks the ledger")
        self.balance += amount
        self.booked += 1

    def state_hash(self) -> str:
        return f"{self.balance}/{self.booked}/{self._hash.hexdigest()}"


class FixedLedger(Ledger):
    """The ledger after the fix: no amount raises."""

    poison = frozenset()


class Feeder(PingpongNode):
    """Sends ``amounts`` as transfers (posted in order) and records the sequence each got."""

    amounts: list[int] = []

    def __init__(self) -> None:
        super().__init__()
        self.sequences: dict[int, int] = {}

    def on_opened(self) -> None:
        for amount in self.amounts:
            self.post(Ping(id=amount, sent_at_ns=0))

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine:
            self.sequences[msg.id] = self.sequence()
