"""Two buses side by side and a cross-connect node (docs/sites.md): a market-data bus where a
feed publishes book updates, an order bus where the matching engine answers orders, and the
quoter of examples/crossconnect reading both and sending on the order bus. Each stream reaches
the cross-connect node complete and in order; with the time merge the interleaving is the
(sequencer time, bus, sequence) order, the same in a second instance started late (a hot backup
rewinding both buses), whose orders the sequencer drops as duplicates; with the arrival merge
each stream is still complete and in order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from examples.crossconnect.quoter import Quoter
from examples.exchange.messages import BookSide, BookUpdate, BookUpdateLevels, Price
from seqbus import BusSpec, CrossConnect
from seqbus import _core
from seqbus.errors import BackPressureError
from tests.conftest import ROOT, Processes, seqbus_cli
from tests.sites.sitebus import Deadline, Site, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

UPDATES = 400


def feed_update(rng: random.Random) -> bytes:
    levels = [
        BookUpdateLevels(
            side=BookSide.Bid,
            price=Price(mantissa=rng.randrange(9_900, 10_000), exponent=-2),
            quantity=10,
            orders=1,
        ),
        BookUpdateLevels(
            side=BookSide.Ask,
            price=Price(mantissa=rng.randrange(10_001, 10_100), exponent=-2),
            quantity=10,
            orders=1,
        ),
    ]
    return BookUpdate(symbol="AAPL", at=0, levels=levels).encode()


def test_two_buses_and_a_cross_connect_node(tmp_path: Path, processes: Processes) -> None:
    md_dir, orders_dir = tmp_path / "md", tmp_path / "orders"
    md_dir.mkdir()
    orders_dir.mkdir()
    md_site, orders_site = Site(md_dir, "a"), Site(orders_dir, "b")
    md = md_site.write("md", md_site.base().replace("SITES00001", "MD00000001"))
    orders = orders_site.write("orders", orders_site.base().replace("SITES00001", "ORDERS0001"))
    cli = seqbus_cli()
    processes.start("md-sequencer", [*cli, "sequencer", "-c", str(md)])
    processes.start("orders-sequencer", [*cli, "sequencer", "-c", str(orders)])
    processes.start(
        "engine",
        [
            *cli,
            "node",
            "examples.exchange.engine:MatchingEngine",
            "-c",
            str(orders),
            "--account",
            "ME",
            "--rewind",
            "--path",
            str(ROOT),
        ],
    )
    feed = _core.NodeClient(str(md), "FEED", 1, start="rewind")
    primary = Quoter()
    cc = CrossConnect(primary.specs(str(md), str(orders), "QUOTER", 1), merge="time")
    cc.record_order = True
    cc.open()
    rng = random.Random(7)
    sent = 0
    sending = Deadline(60, "the feed's updates", processes.logs)
    while sent < UPDATES:
        sending.check()
        try:
            feed.send(feed_update(rng))
            sent += 1
        except BackPressureError:
            pass
        feed.poll(64, 0)
        cc.poll_once(0.0005)
    wait_until(
        lambda: (feed.poll(64, 0), cc.poll_once(0.001))[0] is not None
        and primary.accepted + primary.rejected >= UPDATES,
        60,
        "the quoter's answers",
        processes.logs,
    )
    assert (primary.next_order_id - 1, primary.accepted) == (UPDATES, UPDATES)
    # the time merge: (time, bus, sequence) order, each bus's own records in sequence order
    keys = [(t, b, q) for t, (b, q) in zip(cc.order_times, cc.order, strict=True)]
    assert keys == sorted(keys), "not merged by (time, bus, sequence)"
    assert {b for b, _ in cc.order} == {0, 1}
    for b in (0, 1):
        own = [seq for bus, seq in cc.order if bus == b]
        assert own == sorted(set(own)), f"bus {b}: not in order, or repeated"
    # a hot backup started now, rewinding both buses, decides exactly the same
    backup = Quoter()
    cc2 = CrossConnect(backup.specs(str(md), str(orders), "QUOTER", 2), merge="time")
    cc2.record_order = True
    cc2.open()
    wait_until(
        lambda: (cc.poll_once(0.001), cc2.poll_once(0.001))[0] is not None
        and backup.accepted >= UPDATES,
        60,
        "the backup's replay",
        processes.logs,
    )
    n = min(len(cc.order), len(cc2.order))
    assert n > 2 * UPDATES
    assert cc2.order[:n] == cc.order[:n], "the time merge interleaved differently"
    assert backup.digest.hexdigest() == primary.digest.hexdigest()
    # an arrival-merged reader: each stream complete and in order (its interleaving is free)
    reader_q = Quoter()
    reader = CrossConnect(
        [
            BusSpec(reader_q.md, str(md), "READER", 1, "rewind"),
            BusSpec(reader_q.orders, str(orders), "READER", 1, "rewind"),
        ],
        merge="arrival",
    )
    reader_q.quote = lambda *a: None  # type: ignore[method-assign]  # reads, never sends
    reader.record_order = True
    reader.open()
    wait_until(
        lambda: reader.poll_once(0.001) >= 0
        and all(
            len([s for b, s in reader.order if b == bus])
            >= len([s for b, s in cc.order if b == bus])
            for bus in (0, 1)
        ),
        60,
        "the arrival-merged reader",
        processes.logs,
    )
    for bus in (0, 1):
        mine = [s for b, s in reader.order if b == bus]
        ref = [s for b, s in cc.order if b == bus]
        assert mine[: len(ref)] == ref, f"bus {bus}: the arrival merge changed a stream"
    # the order bus holds each of the quoter's orders once: the backup's copies were dropped
    check = _core.NodeClient(str(orders), "CHECK", 1, start="rewind")
    quotes: list[int] = []
    wait_until(
        lambda: _collect(check, quotes) and len(quotes) >= UPDATES,
        30,
        "the order bus",
        processes.logs,
    )
    assert quotes == list(range(1, UPDATES + 1))
    for c in (cc, cc2, reader):
        c.close()
    feed.close()
    check.close()


def _collect(client: object, quotes: list[int]) -> bool:
    """Appends the order ids of the quoter's NewOrders (template 1) found in one poll."""
    batch: bytes = client.poll(4096, 0.01)  # type: ignore[attr-defined]
    at = 0
    while at < len(batch):
        length = int.from_bytes(batch[at : at + 4], "little")
        kind = int.from_bytes(batch[at + 4 : at + 6], "little")
        account = batch[at + 32 : at + 40].rstrip(b"\0")
        template = int.from_bytes(batch[at + 48 + 2 : at + 48 + 4], "little")
        if kind == 1 and account == b"QUOTER" and template == 1:
            quotes.append(int.from_bytes(batch[at + 56 : at + 64], "little"))
        at += length
    return True
