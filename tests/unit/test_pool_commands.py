"""The CLI's condition column reads as the board's chip: `<display_name> (<label>)`."""

from __future__ import annotations

from tenure_cli.commands.leases import condition_chip


def _lease(condition: dict[str, object] | None, pool: str = "builds") -> dict[str, object]:
    return {"pool": pool, "queued_condition": condition}


def test_a_queued_lease_reads_pool_display_name_and_label() -> None:
    full = {"code": "pool_full", "label": "pool full", "needs_person": False}
    assert condition_chip(_lease(full), {"builds": "Builds"}) == "Builds (pool full)"


def test_an_unknown_display_name_falls_back_to_the_pool_name() -> None:
    paused = {"code": "pool_paused", "label": "pool paused", "needs_person": True}
    assert condition_chip(_lease(paused), {}) == "builds (pool paused)"


def test_a_lease_without_a_condition_has_an_empty_cell() -> None:
    assert condition_chip(_lease(None), {"builds": "Builds"}) == ""
