"""The sweeper's per-pool gauges: queued, held and the age of the queue's head, on every pass
that publishes them (the deployed sweeper's; the local stack's passes leave them out)."""

from __future__ import annotations

import json

import pytest
from tenure.app import sweep as sweep_module
from tenure.app.sweep import PoolDepth
from tenure.triggers.sweep import emit_depth

from tests.unit.support import POOL, T0, Rig


def test_each_pass_reports_every_pools_queued_held_and_oldest_queued_age(rig: Rig) -> None:
    rig.make_pool("idle")
    for _ in range(4):
        rig.task()
    rig.claim("w1")  # the oldest of the four is held now
    rig.advance(30)
    rig.task()  # a fifth, 30 s younger than the three still queued
    rig.advance(90)
    report = rig.sweep()
    depths = {depth.pool: depth for depth in report.depths}
    assert depths[POOL] == PoolDepth(pool=POOL, queued=4, held=1, oldest_queued_age_s=120.0)
    assert depths["idle"] == PoolDepth(pool="idle", queued=0, held=0, oldest_queued_age_s=0.0)


def test_a_deferred_lease_is_not_queued_until_its_not_before(rig: Rig) -> None:
    rig.task(not_before=T0 + 600_000)
    rig.advance(60)
    (depth,) = [d for d in rig.sweep().depths if d.pool == POOL]
    assert (depth.queued, depth.oldest_queued_age_s) == (0, 0.0)
    rig.advance(600)
    (depth,) = [d for d in rig.sweep().depths if d.pool == POOL]
    assert (depth.queued, depth.oldest_queued_age_s) == (1, 60.0)


def test_a_pools_gauges_are_one_emf_document_with_the_pool_dimension(
    capsys: pytest.CaptureFixture[str],
) -> None:
    emit_depth(PoolDepth(pool="gpu", queued=7, held=3, oldest_queued_age_s=42.5))
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
    doc = json.loads(line)
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Tenure"
    assert set(directive["Dimensions"][0]) == {"Pool", "service"}
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {
        "QueuedLeases": "Count",
        "HeldLeases": "Count",
        "OldestQueuedAgeSeconds": "Seconds",
    }
    assert (doc["Pool"], doc["service"]) == ("gpu", "sweeper")
    assert (doc["QueuedLeases"], doc["HeldLeases"], doc["OldestQueuedAgeSeconds"]) == (
        [7.0],
        [3.0],
        [42.5],
    )


def test_a_pass_without_gauges_reads_no_depth_and_still_expires(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The local stack publishes no metrics, so its passes leave the gauges' reads out; what a
    # pass is for (expiry) must not depend on them.
    rig.task()
    held = rig.claim("w1")
    rig.advance(3600)

    def unread(*_: object) -> PoolDepth:
        raise AssertionError("a pass without gauges read a pool's depth")

    monkeypatch.setattr(sweep_module, "pool_depth", unread)
    report = rig.svc.sweep.once(gauges=False)
    assert report.depths == []
    assert report.expired == [held.lease.id]
