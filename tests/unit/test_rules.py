"""Pure rules: token hashing and minting, deadlines, report fingerprints."""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import replace

import pytest
from tenure.domain import fencing as rules
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease, Pool
from tenure.domain.states import LeaseState, PoolKind, SubjectKind

from tests.unit.support import T0


def test_hash_token_is_the_hex_sha256_of_the_token() -> None:
    raw = "tnr_w_secret-value"
    assert rules.hash_token(raw) == hashlib.sha256(raw.encode()).hexdigest()
    assert len(rules.hash_token(raw)) == 64
    assert rules.hash_token(raw) != rules.hash_token(raw + "x")


def test_a_minted_lease_token_names_its_lease_and_parses_back() -> None:
    token = rules.mint_lease_token("lease_0001", "s3cr3t.with.dots")
    assert token.startswith("tnr_l_lease_0001.")
    assert rules.lease_id_of_token(token) == "lease_0001"


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "tnr_l_",
        "tnr_l_lease_1",  # no secret part
        "tnr_l_lease_1.",  # empty secret
        "tnr_l_.secret",  # empty lease id
        "tnr_w_lease_1.secret",  # a worker token
        "tnr_o_lease_1.secret",  # an operator token
        "lease_1.secret",
        "TNR_L_lease_1.secret",
    ],
)
def test_lease_id_of_token_rejects_malformed_tokens(raw: str) -> None:
    assert rules.lease_id_of_token(raw) is None


def _pool(toleration: int = 300) -> Pool:
    return Pool(
        name="p", space="OPS", kind=PoolKind.COMMAND, created_at=T0, toleration_seconds=toleration
    )


def _held(deadline: int | None, lease_seconds: int | None = None) -> Lease:
    return Lease(
        id="lease_1",
        job_id="job_1",
        space="OPS",
        pool="p",
        subject_kind=SubjectKind.TASK,
        subject_id="task_1",
        state=LeaseState.RUNNING,
        fence=1,
        attempt=1,
        created_at=T0,
        deadline=deadline,
        lease_seconds=lease_seconds,
    )


def test_toleration_is_the_leases_own_lease_seconds_else_the_pools() -> None:
    assert rules.toleration_ms(_held(None), _pool(300)) == 300_000
    assert rules.toleration_ms(_held(None, lease_seconds=42), _pool(300)) == 42_000


def test_fresh_deadline_is_half_a_toleration_beyond_one_toleration() -> None:
    assert rules.fresh_deadline(T0, 300_000) == T0 + 450_000
    assert rules.fresh_deadline(T0, 5_000) == T0 + 7_500


def test_deadline_needs_write_only_when_it_would_fall_short_of_one_toleration() -> None:
    tol = 300_000
    assert rules.deadline_needs_write(_held(None), T0, tol)
    assert not rules.deadline_needs_write(_held(T0 + tol), T0, tol)
    assert rules.deadline_needs_write(_held(T0 + tol - 1), T0, tol)


def _simulate(tol_ms: int, beats: list[int]) -> list[int]:
    """Heartbeats at `beats` (ms); returns when a deadline write happened. Checks every beat."""
    lease = _held(rules.fresh_deadline(beats[0], tol_ms))
    writes = [beats[0]]
    for now in beats[1:]:
        if rules.deadline_needs_write(lease, now, tol_ms):
            lease = replace(lease, deadline=rules.fresh_deadline(now, tol_ms))
            writes.append(now)
        assert lease.deadline is not None
        # Never sooner than one toleration after this heartbeat, never later than 1 + slack.
        assert lease.deadline >= now + tol_ms
        assert lease.deadline <= now + tol_ms * (1 + DEADLINE_SLACK)
    return writes


@pytest.mark.parametrize(("tol_s", "renew_s"), [(300, 10), (5, 1), (43200, 10), (60, 7)])
def test_a_steady_heartbeat_writes_at_most_once_per_slack_of_a_toleration(
    tol_s: int, renew_s: int
) -> None:
    tol_ms, step = tol_s * 1000, renew_s * 1000
    beats = [T0 + i * step for i in range(0, 4 * tol_s // renew_s + 2)]
    writes = _simulate(tol_ms, beats)
    gaps = [b - a for a, b in itertools.pairwise(writes)]
    assert gaps, "a long run of heartbeats wrote the deadline only once"
    assert min(gaps) >= tol_ms * DEADLINE_SLACK
    # ...and it is not lazier than needed either: a write comes within one beat of the slack.
    assert max(gaps) <= tol_ms * DEADLINE_SLACK + step


def test_irregular_heartbeats_never_leave_less_than_one_toleration() -> None:
    rnd = random.Random(7)
    tol_ms = 30_000
    now, beats = T0, [T0]
    for _ in range(2000):
        now += rnd.randint(1, 2 * tol_ms)  # some gaps exceed the toleration itself
        beats.append(now)
    _simulate(tol_ms, beats)


def test_fingerprint_ignores_report_id() -> None:
    body = {"outcome": "success", "details": {"n": 1}}
    assert rules.fingerprint("complete", body) == rules.fingerprint(
        "complete", {**body, "report_id": "r-1"}
    )
    assert rules.fingerprint("complete", {**body, "report_id": "r-1"}) == rules.fingerprint(
        "complete", {**body, "report_id": "r-2"}
    )


def test_fingerprint_does_not_depend_on_key_order_at_any_depth() -> None:
    one = {"outcome": "success", "details": {"a": 1, "b": {"x": 1, "y": 2}}}
    two = {"details": {"b": {"y": 2, "x": 1}, "a": 1}, "outcome": "success"}
    assert rules.fingerprint("complete", one) == rules.fingerprint("complete", two)


def test_fingerprint_tells_kinds_and_bodies_apart() -> None:
    body = {"reason": "handoff"}
    assert rules.fingerprint("release", body) != rules.fingerprint("fail", body)
    assert rules.fingerprint("release", body) != rules.fingerprint("release", {"reason": "other"})
