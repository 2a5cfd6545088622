"""Scheduled occasions raced on DynamoDB Local: invocations for the same occasion, delivered
by 8 threads at once (each a separate service, as concurrent Lambdas), mint it once — the
occasion itself and each missed one a resumed service catches up — and the rule's noted
previous lease is one of them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.model import Lease
from tenure.store.dynamo import OneTable
from tenure.wiring import ManualClock, RandomIds

from tests.conformance.test_rules_races import THREADS, _leases, _race, _world
from tests.conftest import ADMIN, Rig

MINUTELY = {"schedule": "rate(1 minute)"}
T = TypeVar("T")


def _this_minute() -> datetime:
    now = datetime.now(UTC)
    return now.replace(second=0, microsecond=0)


def test_one_occasion_raced_by_8_invocations_mints_once_and_is_noted(rig: Rig) -> None:
    svc = _world(rig)
    subject = {"kind": "task", "title": "every minute"}
    rule = svc.rules.create_rule(ADMIN, "OPS", "minutely", "ops", subject, MINUTELY)
    at = _this_minute() + timedelta(minutes=1)
    answers = _race(rig, lambda s: s.firings.fire_scheduled(rule.id, at))
    assert not [a for a in answers if isinstance(a, Exception)], answers
    ids = {a.id for a in answers if isinstance(a, Lease)}
    assert len(ids) == 1, answers
    assert [x.id for x in _leases(svc)] == list(ids)
    assert isinstance(rig.store, OneTable)
    noted = rig.store.get_rule(rule.id)
    assert noted is not None and noted.last_lease_id in ids
    assert noted.fired_through == int(at.timestamp() * 1000)


def test_a_resumed_service_raced_by_8_invocations_catches_each_occasion_up_once(
    rig: Rig,
) -> None:
    svc = _world(rig)
    rule = svc.rules.create_rule(
        ADMIN,
        "OPS",
        "minutely",
        "ops",
        {"kind": "space"},
        MINUTELY,
        overlap="allow",
        catchup_window_seconds=3600,
    )
    first = datetime.fromtimestamp(rule.created_at / 1000, tz=UTC).replace(
        second=0, microsecond=0
    ) + timedelta(minutes=1)
    assert isinstance(svc.firings.fire_scheduled(rule.id, first), Lease)
    # The service is away for the five minutes after the first occasion, and resumes with a
    # delivery of the sixth, raced by 8 invocations whose clock reads just after it.
    late = first + timedelta(minutes=6)
    clock = ManualClock(int(late.timestamp() * 1000) + 2000)
    answers = _race_at(rig, clock, lambda s: s.firings.fire_scheduled(rule.id, late))
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len({a.id for a in answers if isinstance(a, Lease)}) == 1
    # The first, the five minutes missed, and the sixth: each once.
    assert len(_leases(svc)) == 7
    noted = rig.store.get_rule(rule.id)  # type: ignore[attr-defined]
    assert noted.fired_through == int(late.timestamp() * 1000)


def _race_at(rig: Rig, clock: ManualClock, call: Callable[[Tenure], T]) -> list[T | Exception]:
    """`call` by THREADS threads at once, each on its own service reading `clock`."""
    barrier = threading.Barrier(THREADS)
    assert isinstance(rig.store, OneTable)
    store = rig.store

    def one(_: int) -> T | Exception:
        own = OneTable(store.client, store.table)
        svc = compose(Rows.of(own, own), clock, RandomIds())
        barrier.wait()
        try:
            return call(svc)
        except Exception as err:
            return err

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, range(THREADS)))
