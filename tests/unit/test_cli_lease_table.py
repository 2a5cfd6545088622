"""`tenure leases list`'s table: headed by names, not by paths into the record, and an ended
lease shows when and how it ended instead of the deadline it no longer has."""

from __future__ import annotations

import argparse

import pytest
from tenure_cli.commands.leases import until
from tenure_cli.common import table

OPEN = {"id": "l1", "state": "running", "task": {"key": "OPS-1"}, "timing": {"deadline": "D"}}
ENDED = {
    "id": "l2",
    "state": "failed",
    "outcome": "failure",
    "task": {"key": "OPS-2"},
    "timing": {"deadline": "OLD", "ended_at": "E"},
}


def test_an_open_lease_runs_until_its_deadline_and_an_ended_one_says_how_it_ended() -> None:
    assert until(OPEN) == "D"
    assert until(ENDED) == "ended E (failure)"
    assert "OLD" not in until(ENDED)
    assert until({"state": "cancelled", "timing": {"ended_at": "E"}}) == "ended E (cancelled)"


def test_columns_are_headed_by_their_last_name(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{**OPEN, "until": until(OPEN)}, {**ENDED, "until": until(ENDED)}]
    table(rows, argparse.Namespace(output="table"), ["id", "task.key", "until"])
    head, first, second = capsys.readouterr().out.splitlines()
    assert head.split() == ["ID", "KEY", "UNTIL"]
    assert first.split() == ["l1", "OPS-1", "D"]
    assert second.split()[:2] == ["l2", "OPS-2"] and second.endswith("ended E (failure)")
