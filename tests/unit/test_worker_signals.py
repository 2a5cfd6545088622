"""A worker's signal epoch rises in the same commit as every write its heartbeat must report
for a lease it holds (cancel, kill, pause, resume, an operator's end, the sweeper's expiry
and run-timeout kill, a release), and never on the common path (claim, start, heartbeat,
complete, fail)."""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import replace
from typing import Any, NamedTuple

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.app.migrations import WORKER_SIGNALS_FROM_SCHEMA, SchemaState, migrate
from tenure.domain.errors import Conflict, StaleLease, TenureError
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease, Principal
from tenure.domain.signals import SIGNAL_MAX, Known, _mac, opened, seal
from tenure.domain.states import EndReason, LeaseState, ReportKind, Revoke
from tenure.domain.transitions import Action, SignalKey, must_move, must_signal
from tenure_cli.local.frontdoor import to_event
from tenure_worker.jobs import UNKNOWN_SIGNAL

from tests.unit.support import ADMIN, MEMBER, WORKER, Rig, as_lease, make_lease

TOLERATION_S = 300  # the pool's default
KEY = SignalKey(WORKER.token_id, "w1")


def _epoch(rig: Rig, key: SignalKey = KEY) -> int:
    return rig.store.signal_epoch(key)


def _held(state: LeaseState = LeaseState.RUNNING, **kw: object) -> Lease:
    return make_lease("L1", state=state, worker_id="w1", claimed_by="tok-worker", **kw)


# ---------------------------------------------------------------- the rule, on its own


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (LeaseState.RUNNING, {"state": LeaseState.CANCELLING, "revoke": Revoke.CANCEL}),
        (LeaseState.CANCELLING, {"revoke": Revoke.KILL}),  # same state, revoke changed
        (LeaseState.RUNNING, {"state": LeaseState.PAUSED}),
        (LeaseState.PAUSED, {"state": LeaseState.RUNNING}),
        (LeaseState.RUNNING, {"state": LeaseState.LOST}),
        (LeaseState.DISPATCHED, {"state": LeaseState.CANCELLED}),
        (LeaseState.RUNNING, {"state": LeaseState.FAILED}),  # an operator's fail: no report
        (
            LeaseState.RUNNING,
            {"state": LeaseState.CANCELLED, "report_kind": ReportKind.RELEASE},
        ),
        (LeaseState.RUNNING, {"worker_id": "w2"}),
        (LeaseState.RUNNING, {"fence": 2}),
        (LeaseState.RUNNING, {"lease_seconds": 30, "deadline": 5}),  # a job's shorter lease
    ],
)
def test_a_change_the_heartbeat_must_report_raises_the_holders_epoch(
    before: LeaseState, after: dict[str, object]
) -> None:
    seen = _held(before)
    assert must_signal(seen, replace(seen, **after)) == KEY  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (LeaseState.RUNNING, {"deadline": 99, "heartbeat_at": 5}),  # a renewal
        (LeaseState.DISPATCHED, {"state": LeaseState.RUNNING}),  # its start
        (
            LeaseState.RUNNING,
            {"state": LeaseState.COMPLETED, "report_kind": ReportKind.COMPLETE},
        ),
        (LeaseState.CANCELLING, {"state": LeaseState.FAILED, "report_kind": ReportKind.FAIL}),
        (LeaseState.RUNNING, {"keeps_detail": True}),
    ],
)
def test_the_holders_own_routine_writes_raise_nothing(
    before: LeaseState, after: dict[str, object]
) -> None:
    seen = _held(before)
    assert must_signal(seen, replace(seen, **after)) is None  # type: ignore[arg-type]


def test_a_lease_no_worker_holds_has_no_signal() -> None:
    pending = make_lease("L1", state=LeaseState.PENDING)
    assert must_signal(pending, replace(pending, state=LeaseState.DISPATCHED)) is None
    ended = _held(LeaseState.COMPLETED)
    assert must_signal(ended, replace(ended, state=LeaseState.RUNNING)) is None
    unclaimed = make_lease("L1", state=LeaseState.RUNNING, worker_id="w1")
    assert must_signal(unclaimed, replace(unclaimed, state=LeaseState.PAUSED)) is None


# ------------------------------------------------------------ on the service, each writer


def test_the_common_path_raises_nothing(rig: Rig) -> None:
    won = rig.claimed()
    rig.svc.reports.worker_heartbeat(WORKER, "w1", [(won.lease.id, won.lease.fence)])
    rig.advance(TOLERATION_S * DEADLINE_SLACK + 10)  # the next one writes the deadline
    rig.svc.reports.worker_heartbeat(WORKER, "w1", [(won.lease.id, won.lease.fence)])
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    failed = rig.running()
    rig.svc.reports.fail(as_lease(failed.id), failed.id, {"error": "boom"})
    assert _epoch(rig) == 0
    assert rig.store.signals == {}


@pytest.mark.parametrize("action", ["cancel", "kill", "pause"])
def test_an_operators_move_raises_the_holders_epoch_in_its_commit(rig: Rig, action: str) -> None:
    lease = rig.running()
    other = rig.running(worker_id="w2")
    getattr(rig.svc.operator, action)(MEMBER, lease.id)
    assert _epoch(rig) == 1
    assert _epoch(rig, SignalKey(WORKER.token_id, "w2")) == 0  # only the holder's
    assert rig.lease(other.id).state is LeaseState.RUNNING


def test_resume_and_a_kill_after_a_cancel_raise_it_again(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.operator.pause(MEMBER, lease.id)
    rig.svc.operator.resume(MEMBER, lease.id)
    assert _epoch(rig) == 2
    rig.svc.operator.cancel(MEMBER, lease.id)
    rig.svc.operator.kill(MEMBER, lease.id)  # cancelling → cancelling, revoke kill
    assert _epoch(rig) == 4
    rig.svc.operator.kill(MEMBER, lease.id)  # a no-op writes nothing, raises nothing
    assert _epoch(rig) == 4


def test_a_write_that_loses_its_condition_raises_nothing(rig: Rig) -> None:
    lease = rig.running()
    stale = rig.lease(lease.id)
    rig.svc.operator.pause(MEMBER, lease.id)
    assert _epoch(rig) == 1
    to = must_move(stale.id, stale.state, stale.revoke, Action.CANCEL)
    cancel = rig.svc.kernel.apply(stale, to, {"by": "x"}, rig.clock.now_ms())
    with pytest.raises(Conflict):
        rig.svc.kernel.write(stale, cancel)  # on the row before the pause: it loses
    assert _epoch(rig) == 1


def test_the_sweepers_expiry_raises_it(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    rig.sweep()
    assert rig.lease(lease.id).state is LeaseState.LOST
    assert _epoch(rig) == 1


def test_a_release_and_an_operators_end_raise_it(rig: Rig) -> None:
    released = rig.running()
    rig.svc.reports.release(as_lease(released.id), released.id, {})
    assert rig.lease(released.id).end_reason is EndReason.RELEASED
    assert _epoch(rig) == 1
    forced = rig.running()
    rows = rig.svc.force.bulk_fail(ADMIN, [forced.id], "stuck")
    assert rig.lease(forced.id).state is LeaseState.FAILED, rows
    assert _epoch(rig) == 2


def test_below_the_schema_version_no_writer_raises_it_until_migrated(rig: Rig) -> None:
    # An earlier release's writers raise nothing, so the epoch means nothing until every
    # writer is of this release: until then none is written at all.
    rig.store.schema = SchemaState(version=WORKER_SIGNALS_FROM_SCHEMA - 2, step=2)
    lease = rig.running()
    rig.svc.operator.pause(MEMBER, lease.id)
    assert rig.store.signals == {}
    outcomes = {o.name: o.status for o in migrate(rig.store)}
    assert outcomes["worker-signals"] == "applied"
    rig.advance(31)  # the kernel reads the schema row at most once per pool cache period
    rig.svc.operator.resume(MEMBER, lease.id)
    assert _epoch(rig) == 1


# ------------------------------------------------------------ the heartbeat that trusts it


class Reads:
    """Every lease read (id, consistent) the heartbeats make."""

    def __init__(self, rig: Rig) -> None:
        self.leases: list[tuple[str, bool]] = []
        table = rig.store.get_leases

        def get_leases(lease_ids: list[str], consistent: bool = True) -> dict[str, Lease]:
            self.leases.extend((i, consistent) for i in lease_ids)
            return table(lease_ids, consistent)

        rig.store.get_leases = get_leases  # type: ignore[method-assign]


@pytest.fixture
def reads(rig: Rig) -> Reads:
    return Reads(rig)


def _beats(
    rig: Rig, leases: list[Lease], signal: str | None, worker_id: str = "w1"
) -> tuple[list[object], str | None]:
    beats = rig.svc.reports.worker_beats(
        WORKER, worker_id, [(x.id, x.fence) for x in leases], signal=signal
    )
    return [a for _, _, a in beats.answers], beats.signal


def _shown(answers: list[object]) -> list[object]:
    """What the route shows of each answer: (state, deadline, revoke), or the error's code."""
    return [
        a.code if isinstance(a, TenureError) else (a.state, a.deadline, a.revoke)  # type: ignore[attr-defined]
        for a in answers
    ]


def test_an_echoed_signal_answers_the_same_without_reading_a_lease(rig: Rig, reads: Reads) -> None:
    held = [rig.running(), rig.running()]
    first, signal = _beats(rig, held, "")
    assert signal and sorted(reads.leases) == sorted((x.id, True) for x in held)
    reads.leases.clear()
    rig.advance(10)
    again, signal = _beats(rig, held, signal)
    assert reads.leases == []  # the signal row only
    assert _shown(again) == _shown(first)
    assert all(a.state is LeaseState.RUNNING for a in again)  # type: ignore[attr-defined]
    unsigned = rig.svc.reports.worker_heartbeat(WORKER, "w1", [(x.id, x.fence) for x in held])
    assert _shown([a for _, _, a in unsigned]) == _shown(again)  # the same as read


@pytest.mark.parametrize(
    ("act", "state", "revoke"),
    [
        ("cancel", LeaseState.CANCELLING, Revoke.CANCEL),
        ("kill", LeaseState.CANCELLING, Revoke.KILL),
        ("pause", LeaseState.PAUSED, Revoke.PAUSE),
    ],
)
def test_an_operators_move_between_two_heartbeats_is_in_the_next_answer(
    rig: Rig, reads: Reads, act: str, state: LeaseState, revoke: Revoke
) -> None:
    lease, other = rig.running(), rig.running()
    _, signal = _beats(rig, [lease, other], "")
    getattr(rig.svc.operator, act)(MEMBER, lease.id)
    reads.leases.clear()
    answers, signal = _beats(rig, [lease, other], signal)
    assert answers[0].state is state and answers[0].revoke is revoke  # type: ignore[attr-defined]
    assert {i for i, _ in reads.leases} == {lease.id, other.id}  # the epoch moved: all read
    reads.leases.clear()
    again, _ = _beats(rig, [lease, other], signal)
    assert _shown(again) == _shown(answers) and reads.leases == []  # vouched again


def test_a_resume_between_two_heartbeats_clears_the_pause(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.operator.pause(MEMBER, lease.id)
    [paused], signal = _beats(rig, [lease], "")
    assert paused.revoke is Revoke.PAUSE  # type: ignore[attr-defined]
    rig.svc.operator.resume(MEMBER, lease.id)
    [resumed], _ = _beats(rig, [lease], signal)
    assert resumed.revoke is None and resumed.state is LeaseState.RUNNING  # type: ignore[attr-defined]


def test_an_expiry_between_two_heartbeats_is_refused_never_renewed(rig: Rig) -> None:
    lease = rig.running()
    _, signal = _beats(rig, [lease], "")
    rig.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    rig.sweep()
    assert rig.lease(lease.id).state is LeaseState.LOST
    [answer], _ = _beats(rig, [lease], signal)
    assert isinstance(answer, StaleLease)
    assert rig.lease(lease.id).state is LeaseState.LOST


def test_a_deadline_due_is_read_and_written_though_vouched(rig: Rig, reads: Reads) -> None:
    lease = rig.running()
    _, signal = _beats(rig, [lease], "")
    rig.advance(TOLERATION_S * DEADLINE_SLACK + 10)  # the stored deadline needs moving now
    reads.leases.clear()
    [answer], signal = _beats(rig, [lease], signal)
    assert reads.leases == [(lease.id, True)]
    assert rig.lease(lease.id).heartbeat_at == rig.clock.now_ms()
    assert answer.deadline == rig.lease(lease.id).deadline  # type: ignore[attr-defined]
    reads.leases.clear()
    _beats(rig, [lease], signal)
    assert reads.leases == []  # the written deadline is vouched for next


def test_a_jobs_own_heartbeat_that_shortens_its_lease_reaches_the_next_worker_beat(
    rig: Rig, reads: Reads
) -> None:
    # The worker's signal knows a later deadline than the shortened one: were it trusted, the
    # worker would stop renewing a lease that expires sooner.
    lease = rig.running()
    _, signal = _beats(rig, [lease], "")
    rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, 30)
    assert _epoch(rig) == 1
    short = rig.lease(lease.id)
    reads.leases.clear()
    [answer], signal = _beats(rig, [lease], signal)
    assert reads.leases == [(lease.id, True)]
    assert answer.deadline == short.deadline  # type: ignore[attr-defined]
    for _ in range(6):  # renewed in time by the worker alone, never expired
        rig.advance(10)
        _beats(rig, [lease], signal)
        rig.sweep()
    assert rig.lease(lease.id).state is LeaseState.RUNNING
    rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)  # the same seconds again
    assert _epoch(rig) == 1


def _forged(signal: str) -> list[str]:
    body, _, mac = signal.partition(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B")
    return ["x", "garbage.with.dots", f"{body}.", f"{flipped}.{mac}", f"{body}.{mac[::-1]}"]


def test_a_forged_or_altered_signal_vouches_for_nothing(rig: Rig, reads: Reads) -> None:
    lease = rig.running()
    truth, signal = _beats(rig, [lease], "")
    assert signal is not None
    for forged in _forged(signal):
        reads.leases.clear()
        answers, _ = _beats(rig, [lease], forged)
        assert reads.leases == [(lease.id, True)], forged
        assert _shown(answers) == _shown(truth)


def test_a_signal_never_outgrows_what_a_caller_may_echo() -> None:
    key = SignalKey("tok-" + "t" * 60, "w" * 128)
    known = {
        f"{n:03d}" + "L" * 125: Known(
            2**31, LeaseState.CANCELLING, Revoke.CANCEL, 2**42, 43_200, f"pool-{n}" + "p" * 56,
            "v" * 128,
        )
        for n in range(100)
    }  # fmt: skip
    signal = seal("secret", key, 7, known)
    assert len(signal) <= SIGNAL_MAX
    vouched = opened("secret", key, 7, signal)
    assert vouched and set(vouched) < set(known)  # as many as fit, each as sealed
    assert all(vouched[lease_id] == known[lease_id] for lease_id in vouched)
    small = dict(list(known.items())[:3])
    assert opened("secret", key, 7, seal("secret", key, 7, small)) == small


def test_a_well_sealed_signal_of_another_form_vouches_for_nothing() -> None:
    key = SignalKey("tok", "w1")
    body = base64.urlsafe_b64encode(b'{"not": "a list"}').decode().rstrip("=")
    forged = f"{body}.{_mac('secret', key, body)}"
    assert opened("secret", key, 0, forged) == {}


def test_an_old_signal_vouches_for_nothing_after_the_epoch_moved(rig: Rig, reads: Reads) -> None:
    lease = rig.running()
    _, old = _beats(rig, [lease], "")
    rig.svc.operator.pause(MEMBER, lease.id)
    rig.svc.operator.resume(MEMBER, lease.id)  # the lease is as it was: the epoch is not
    reads.leases.clear()
    _beats(rig, [lease], old)
    assert reads.leases == [(lease.id, True)]


def test_another_workers_lease_named_with_a_good_signal_is_still_stale(rig: Rig) -> None:
    mine, theirs = rig.running(), rig.running(worker_id="w2")
    _, signal = _beats(rig, [mine], "")
    answers, _ = _beats(rig, [mine, theirs], signal)
    assert isinstance(answers[1], StaleLease)
    # Nor does one worker's signal vouch for anything under another worker's id.
    _, theirs_signal = _beats(rig, [theirs], "", worker_id="w2")
    answers, _ = _beats(rig, [theirs], theirs_signal)  # as w1
    assert isinstance(answers[0], StaleLease)
    answers, _ = _beats(rig, [mine], signal, worker_id="w2")
    assert isinstance(answers[0], StaleLease)


def test_a_lease_named_at_another_fence_is_judged_on_its_row(rig: Rig) -> None:
    lease = rig.running()
    _, signal = _beats(rig, [lease], "")
    [answer], _ = _beats(rig, [replace(lease, fence=lease.fence + 1)], signal)
    assert isinstance(answer, StaleLease)


def test_below_the_schema_version_a_signal_is_ignored_and_every_lease_read(
    rig: Rig, reads: Reads
) -> None:
    rig.store.schema = SchemaState(version=WORKER_SIGNALS_FROM_SCHEMA - 2, step=2)
    lease = rig.running()
    _, signal = _beats(rig, [lease], "")
    assert signal is None
    assert rig.store.signal_secret() is None  # nothing kept, nothing read
    reads.leases.clear()
    _beats(rig, [lease], "")
    assert reads.leases == [(lease.id, False)]  # as before: the cheap read first


def test_a_caller_that_sends_no_signal_gets_none_and_todays_reads(rig: Rig, reads: Reads) -> None:
    lease = rig.running()
    _, signal = _beats(rig, [lease], None)
    assert signal is None and reads.leases == [(lease.id, False)]


# ------------------------------------------------------------------------------ the route


class Answer(NamedTuple):
    status: int
    body: dict[str, Any]


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(path: str, body: Any, actor: Principal = WORKER) -> Answer:
        event = to_event("POST", f"/api/v1{path}", {"host": "unit"}, json.dumps(body).encode())
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return Answer(out["statusCode"], json.loads(out.get("body") or "{}"))

    return call


def test_the_route_answers_a_signal_only_to_a_caller_that_sent_one(rig: Rig, http: Any) -> None:
    lease = rig.running()
    leases = [{"id": lease.id, "fence": lease.fence}]
    plain = http("/workers/w1/heartbeat", {"leases": leases})
    assert plain.status == 200 and "signal" not in plain.body
    first = http("/workers/w1/heartbeat", {"leases": leases, "signal": ""})
    assert first.status == 200 and first.body["signal"]
    again = http("/workers/w1/heartbeat", {"leases": leases, "signal": first.body["signal"]})
    assert again.status == 200
    assert again.body["leases"] == first.body["leases"] == plain.body["leases"]
    assert again.body["leases"][0]["state"] == "running"


@pytest.mark.parametrize("signal", [5, None, ["a"], "x" * (SIGNAL_MAX + 1)])
def test_a_signal_that_is_not_a_short_string_is_refused(
    rig: Rig, http: Any, signal: object
) -> None:
    lease = rig.running()
    body: dict[str, Any] = {"leases": [{"id": lease.id, "fence": lease.fence}]}
    body["signal"] = signal
    got = http("/workers/w1/heartbeat", body)
    if signal is None:  # a null is an absence: the heartbeat of a caller that asks for none
        assert got.status == 200 and "signal" not in got.body
        return
    assert got.status == 422 and got.body["error"]["code"] == "validation_failed"
    assert "signal" not in got.body and rig.store.signal_secret() is None  # nothing read


def test_a_field_the_service_does_not_know_is_refused_as_the_runner_expects() -> None:
    """The runner tells an older service by how it refuses an unknown field."""
    assert UNKNOWN_SIGNAL == "signal: is not a known field"


def test_an_unknown_field_is_refused_in_that_form(rig: Rig, http: Any) -> None:
    got = http("/workers/w1/heartbeat", {"leases": [], "pool": "builders", "signel": ""})
    assert got.status == 422
    assert got.body["error"]["message"] == UNKNOWN_SIGNAL.replace("signal", "signel")


def test_a_lease_token_may_not_send_a_worker_heartbeat(rig: Rig, http: Any) -> None:
    lease = rig.running()
    body = {"leases": [{"id": lease.id, "fence": lease.fence}], "signal": ""}
    got = http("/workers/w1/heartbeat", body, as_lease(lease.id))
    assert got.status == 403 and "signal" not in got.body
