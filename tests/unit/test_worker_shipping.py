"""The worker's log shipping (tenure_worker/shipping.py): line by line, batched, bounded,
resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tenure_worker import shipping
from tenure_worker.shipping import LogShipper


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out, err = tmp_path / "l.out", tmp_path / "l.err"
    out.write_bytes(b"")
    err.write_bytes(b"")
    return {"stdout": str(out), "stderr": str(err)}


def write(path: str, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


class Sink:
    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.down = False

    def __call__(self, events: list[dict[str, Any]]) -> None:
        if self.down:
            raise ConnectionError("service unreachable")
        self.batches.append(events)

    def messages(self) -> list[tuple[str, str]]:
        return [(e["stream"], e["message"]) for b in self.batches for e in b]


def test_complete_lines_are_shipped_and_a_partial_one_waits_for_the_end(
    files: dict[str, str],
) -> None:
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"one\ntwo\nhalf")
    write(files["stderr"], b"oops\r\n")
    shipper.collect()
    shipper.ship(sink)
    assert sorted(sink.messages()) == [("stderr", "oops"), ("stdout", "one"), ("stdout", "two")]
    write(files["stdout"], b"-line")
    shipper.collect(final=True)
    shipper.ship(sink)
    assert sink.messages()[-1] == ("stdout", "half-line")


def test_a_failed_send_keeps_the_lines_for_the_next_beat(files: dict[str, str]) -> None:
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"a\nb\n")
    shipper.collect()
    sink.down = True
    with pytest.raises(ConnectionError):
        shipper.ship(sink)
    sink.down = False
    shipper.ship(sink)
    assert sink.messages() == [("stdout", "a"), ("stdout", "b")]


def test_a_restarted_worker_goes_on_from_what_was_shipped(files: dict[str, str]) -> None:
    first, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"a\nb\n")
    first.collect()
    first.ship(sink)
    write(files["stdout"], b"c\n")
    again = LogShipper(files, first.positions())
    again.collect()
    again.ship(sink)
    assert sink.messages() == [("stdout", "a"), ("stdout", "b"), ("stdout", "c")]


def test_memory_is_bounded_and_what_was_dropped_is_counted(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shipping, "MAX_PENDING_LINES", 10)
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"".join(b"line %d\n" % i for i in range(25)))
    shipper.collect()
    assert len(shipper.pending) == 10
    shipper.ship(sink)
    first = sink.batches[0]
    assert first[0]["stream"] == "stderr" and "15 lines dropped" in first[0]["message"]
    assert [e["message"] for e in first[1:]] == [f"line {i}" for i in range(15, 25)]
    assert shipper.idle


def test_a_flood_on_disk_is_skipped_over_and_counted(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shipping, "MAX_BACKLOG_BYTES", 100)
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"".join(b"%09d\n" % i for i in range(50)))  # 500 bytes
    shipper.collect(final=True)
    shipper.ship(sink, max_posts=10)
    messages = [m for _, m in sink.messages()]
    assert "40 lines dropped" in messages[0]
    assert messages[1:] == [f"{i:09d}" for i in range(40, 50)]


def test_batches_respect_the_event_and_byte_limits(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shipping, "BATCH_EVENTS", 3)
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"".join(b"l%d\n" % i for i in range(7)))
    shipper.collect()
    shipper.ship(sink, max_posts=10)
    assert [len(b) for b in sink.batches] == [3, 3, 1]


def test_an_endless_line_is_cut_and_says_so(files: dict[str, str]) -> None:
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"x" * (shipping.MAX_LINE_BYTES + 10) + b"\n")
    shipper.collect(final=True)
    shipper.ship(sink)
    assert sink.messages() == [("stdout", "x" * shipping.MAX_LINE_BYTES + " …[cut: 10 more bytes]")]


def test_a_line_longer_than_a_read_is_one_event_that_counts_all_it_cut(
    files: dict[str, str],
) -> None:
    """A megabyte line takes four reads of the file; it is still one line, shipped once, and
    its note counts every byte left out, not what one read held."""
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"y" * 1024 * 1024 + b"\nafter\n")
    beats = 0
    while beats < 10 and len(sink.messages()) < 2:
        shipper.collect()
        shipper.ship(sink, max_posts=10)
        beats += 1
    cut = 1024 * 1024 - shipping.MAX_LINE_BYTES
    assert sink.messages() == [
        ("stdout", "y" * shipping.MAX_LINE_BYTES + f" …[cut: {cut} more bytes]"),
        ("stdout", "after"),
    ]
    assert shipper.positions()["stdout"] == 1024 * 1024 + len(b"\nafter\n")


def test_a_long_line_without_its_end_waits_holding_only_its_head(files: dict[str, str]) -> None:
    """Until its newline (or the job's end) a long line is not shipped in pieces, and what it
    keeps in memory is its first MAX_LINE_BYTES; a restarted worker reads it again from its
    start."""
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"done\n" + b"z" * 600 * 1024)
    for _ in range(4):
        shipper.collect()
        shipper.ship(sink)
    assert sink.messages() == [("stdout", "done")]
    assert len(shipper.partial["stdout"]) == shipping.MAX_LINE_BYTES
    assert shipper.positions()["stdout"] == len(b"done\n")
    shipper.collect(final=True)
    shipper.ship(sink)
    cut = 600 * 1024 - shipping.MAX_LINE_BYTES
    assert sink.messages()[-1] == (
        "stdout",
        "z" * shipping.MAX_LINE_BYTES + f" …[cut: {cut} more bytes]",
    )


class Refused(Exception):
    pass


class Down(Exception):
    pass


def test_the_pump_ships_from_its_own_thread_and_drains_before_exit(files: dict[str, str]) -> None:
    sent: list[tuple[str, str, list[dict[str, Any]]]] = []
    refused: list[str] = []
    pump = shipping.LogPump(
        lambda lease, token, events: sent.append((lease, token, events)),
        every=0.05,
        on_refused=lambda lease, err: refused.append(lease),
        refusals=(Refused,),
        unreachable=(Down,),
    )
    shipper = LogShipper(files, {})
    write(files["stdout"], b"a\nb")
    shipper.collect(final=True)
    pump.track("lease_1", shipper, "tok", finished=True)
    assert pump.drain(5)
    assert [(lease, [e["message"] for e in ev]) for lease, _, ev in sent] == [
        ("lease_1", ["a", "b"])
    ]
    assert (refused == [] and "lease_1" not in pump.jobs) or shipper.idle


def test_the_pump_keeps_lines_while_the_service_is_down_and_stops_when_refused(
    files: dict[str, str],
) -> None:
    state = {"mode": "down"}
    sent: list[str] = []

    def send(lease: str, token: str, events: list[dict[str, Any]]) -> None:
        if state["mode"] == "down":
            raise Down()
        if state["mode"] == "refused":
            raise Refused()
        sent.extend(e["message"] for e in events)

    refused: list[str] = []
    pump = shipping.LogPump(
        send, 0.05, lambda lease, err: refused.append(lease), (Refused,), (Down,)
    )
    shipper = LogShipper(files, {})
    write(files["stdout"], b"kept\n")
    shipper.collect()
    pump.track("lease_1", shipper, "tok", finished=False)
    assert not pump.drain(0.3) and not shipper.idle
    state["mode"] = "up"
    assert pump.drain(5) and sent == ["kept"]
    state["mode"] = "refused"
    write(files["stdout"], b"never\n")
    shipper.collect()
    pump.drain(0.5)
    assert refused == ["lease_1"] and not shipper.enabled and sent == ["kept"]


def test_each_line_carries_the_time_it_was_read_and_a_drop_note_reads_first(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([1_000_000_000_000_000, 1_001_000_000_000_000, 1_002_000_000_000_000])
    monkeypatch.setattr(shipping.time, "time_ns", lambda: next(clock))
    shipper, sink = LogShipper(files, {}), Sink()
    write(files["stdout"], b"first\n")
    shipper.collect()
    write(files["stdout"], b"second\n")
    shipper.collect()
    shipper.dropped = 2  # as after a flood: the note must not sort after the lines it precedes
    shipper.ship(sink)
    stamps = [(e["message"][:12], e["timestamp"]) for e in sink.batches[0]]
    assert stamps == [
        ("[tenure work", 1_000_000_000),
        ("first", 1_000_000_000),
        ("second", 1_001_000_000),
    ]
