"""The lease transition table (docs/states.md), row by row, and every pair it forbids."""

from __future__ import annotations

import pytest
from tenure.domain.errors import InvalidTransition
from tenure.domain.states import EndReason, LeaseState, Revoke
from tenure.domain.transitions import TABLE, Action, Stage, move, stage_of

S, A = LeaseState, Action
ENDINGS = (A.COMPLETE, A.COMPLETE_FAILURE, A.FAIL, A.RELEASE, A.EXPIRE, A.EXPIRE_FAIL)

# (state, revoke held, action) -> (next state, revoke after, event, end reason, requeue);
# None: a no-op that answers the lease as it is. Written from the documented states, not from
# the code's table.
ROWS: list[tuple[S, Revoke | None, A, tuple[S, Revoke | None, str, EndReason | None, bool] | None]]
ROWS = [
    # pending / dispatching: claimed, or cancelled at once by cancel *and* kill
    (S.PENDING, None, A.CLAIM, (S.DISPATCHED, None, "lease.claimed", None, False)),
    (S.DISPATCHING, None, A.CLAIM, (S.DISPATCHED, None, "lease.claimed", None, False)),
    *[
        (st, None, act, (S.CANCELLED, None, "lease.cancelled", EndReason.CANCELLED, False))
        for st in (S.PENDING, S.DISPATCHING)
        for act in (A.CANCEL, A.KILL)
    ],
    # dispatched -> running on a start or the first heartbeat
    (S.DISPATCHED, None, A.START, (S.RUNNING, None, "lease.started", None, False)),
    (S.DISPATCHED, None, A.HEARTBEAT, (S.RUNNING, None, "lease.started", None, False)),
    *[(st, None, act, None) for st in (S.RUNNING, S.PAUSED) for act in (A.START, A.HEARTBEAT)],
    # held: reports end it; silence loses it; release requeues under fence + 1
    *[
        row
        for st in (S.DISPATCHED, S.RUNNING, S.PAUSED)
        for row in [
            (
                st,
                None,
                A.COMPLETE,
                (S.COMPLETED, None, "lease.completed", EndReason.COMPLETED, False),
            ),
            (
                st,
                None,
                A.COMPLETE_FAILURE,
                (S.FAILED, None, "lease.failed", EndReason.FAILED, False),
            ),
            (st, None, A.FAIL, (S.FAILED, None, "lease.failed", EndReason.FAILED, False)),
            (st, None, A.RELEASE, (S.CANCELLED, None, "lease.released", EndReason.RELEASED, True)),
            (st, None, A.EXPIRE, (S.LOST, None, "lease.lost", EndReason.EXPIRED, True)),
            (st, None, A.EXPIRE_FAIL, (S.LOST, None, "lease.lost", EndReason.WORKER_LOST, False)),
            (st, None, A.CANCEL, (S.CANCELLING, Revoke.CANCEL, "lease.cancelling", None, False)),
            (st, None, A.KILL, (S.CANCELLING, Revoke.KILL, "lease.killing", None, False)),
        ]
    ],
    # pause / resume
    (S.RUNNING, None, A.PAUSE, (S.PAUSED, Revoke.PAUSE, "lease.paused", None, False)),
    (S.PAUSED, Revoke.PAUSE, A.RESUME, (S.RUNNING, None, "lease.resumed", None, False)),
    (S.RUNNING, None, A.RESUME, None),
    (S.PAUSED, Revoke.PAUSE, A.PAUSE, None),
    # cancelling: any report or silence ends it cancelled; kill escalates; cancel is a no-op
    *[
        (
            S.CANCELLING,
            Revoke.CANCEL,
            act,
            (S.CANCELLED, None, "lease.cancelled", EndReason.CANCELLED, False),
        )
        for act in ENDINGS
    ],
    (S.CANCELLING, Revoke.CANCEL, A.CANCEL, None),
    (
        S.CANCELLING,
        Revoke.CANCEL,
        A.KILL,
        (S.CANCELLING, Revoke.KILL, "lease.killing", None, False),
    ),
    # killing: any report or silence ends it killed
    *[
        (S.CANCELLING, Revoke.KILL, act, (S.KILLED, None, "lease.killed", EndReason.KILLED, False))
        for act in ENDINGS
    ],
    (S.CANCELLING, Revoke.KILL, A.KILL, None),
    (S.CANCELLING, Revoke.KILL, A.CANCEL, None),
    *[
        (S.CANCELLING, rv, act, None)
        for rv in (Revoke.CANCEL, Revoke.KILL)
        for act in (A.START, A.HEARTBEAT)
    ],
    # terminal: cancel and kill are no-ops, nothing else applies
    *[
        (st, None, act, None)
        for st in (S.COMPLETED, S.FAILED, S.CANCELLED, S.LOST, S.KILLED)
        for act in (A.CANCEL, A.KILL)
    ],
    # operator recovery: force release of a held lease requeues its job; force
    # fail ends any open lease failed; an ended lease, or one asked to stop, is not released
    *[
        (
            st,
            None,
            A.FORCE_RELEASE,
            (S.CANCELLED, None, "lease.force_released", EndReason.RELEASED, True),
        )
        for st in (S.DISPATCHED, S.RUNNING, S.PAUSED)
    ],
    *[
        (st, rv, A.FORCE_FAIL, (S.FAILED, None, "lease.force_failed", EndReason.FAILED, False))
        for st, rv in (
            (S.PENDING, None),
            (S.DISPATCHING, None),
            (S.DISPATCHED, None),
            (S.RUNNING, None),
            (S.PAUSED, None),
            (S.CANCELLING, Revoke.CANCEL),
            (S.CANCELLING, Revoke.KILL),
        )
    ],
    # a delegated child's open run ends, never handed on, when its ttl passes or its creator
    # lease is stopped or lost
    *[
        (st, rv, act, (S.CANCELLED, None, event, reason, False))
        for act, event, reason in (
            (A.TTL_EXPIRE, "lease.ttl_expired", EndReason.TTL_EXPIRED),
            (A.PARENT_STOP, "lease.parent_stopped", EndReason.PARENT_STOPPED),
        )
        for st, rv in (
            (S.PENDING, None),
            (S.DISPATCHING, None),
            (S.DISPATCHED, None),
            (S.RUNNING, None),
            (S.PAUSED, None),
            (S.CANCELLING, Revoke.CANCEL),
            (S.CANCELLING, Revoke.KILL),
        )
    ],
    # a queued lease nobody claimed before its queue timeout ends, no successor
    *[
        (
            st,
            None,
            A.QUEUE_TIMEOUT,
            (S.CANCELLED, None, "lease.queue_timed_out", EndReason.QUEUE_TIMEOUT, False),
        )
        for st in (S.PENDING, S.DISPATCHING)
    ],
    # a held lease past its run timeout is asked to stop as a kill asks; a kill stands
    *[
        (st, rv, A.TIME_OUT, (S.CANCELLING, Revoke.KILL, "lease.timing_out", None, False))
        for st, rv in (
            (S.DISPATCHED, None),
            (S.RUNNING, None),
            (S.PAUSED, None),
            (S.CANCELLING, Revoke.CANCEL),
        )
    ],
    (S.CANCELLING, Revoke.KILL, A.TIME_OUT, None),
]


@pytest.mark.parametrize(("state", "revoke", "action", "expected"), ROWS)
def test_every_documented_transition(
    state: S,
    revoke: Revoke | None,
    action: A,
    expected: tuple[S, Revoke | None, str, EndReason | None, bool] | None,
) -> None:
    got = move("l", state, revoke, action)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert (got.to, got.revoke, got.event, got.end_reason, got.requeue) == expected


def _allowed() -> set[tuple[Stage, A]]:
    return {(stage_of(state, revoke), action) for state, revoke, action, _ in ROWS}


def test_the_table_has_exactly_the_documented_transitions() -> None:
    assert set(TABLE) == _allowed()


@pytest.mark.parametrize(
    ("stage", "action"),
    sorted(
        {(stage, action) for stage in Stage for action in A} - {(s, a) for s, a in TABLE},
        key=str,
    ),
)
def test_every_other_pair_is_refused_as_invalid_transition(stage: Stage, action: A) -> None:
    state = S.CANCELLING if stage is Stage.KILLING else S(stage.value)
    revoke = Revoke.KILL if stage is Stage.KILLING else None
    with pytest.raises(InvalidTransition):
        move("l", state, revoke, action)


def test_a_terminal_lease_never_changes_state() -> None:
    for (stage, _), to in TABLE.items():
        if stage.value in {s.value for s in S if s.terminal}:
            assert to is None
