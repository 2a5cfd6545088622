"""Lease states and who may do what: roles, scopes, lease tokens."""

from __future__ import annotations

import pytest
from tenure.domain import authz
from tenure.domain.errors import Forbidden, LeaseTokenMismatch
from tenure.domain.model import Principal, Task, task_status
from tenure.domain.states import HELD, QUEUED, REPORTABLE, TERMINAL, LeaseState, TaskStatus

from tests.unit.support import T0, as_lease, make_lease

ROLES = ["read", "member", "admin"]


def test_lease_states_split_into_six_active_and_five_terminal() -> None:
    active = {s.value for s in LeaseState if s.active}
    terminal = {s.value for s in LeaseState if s.terminal}
    assert active == {"pending", "dispatching", "dispatched", "running", "paused", "cancelling"}
    assert terminal == {"completed", "failed", "cancelled", "lost", "killed"}
    assert {s.value for s in TERMINAL} == terminal
    assert {s.value for s in QUEUED} == {"pending", "dispatching"}
    assert {s.value for s in HELD} == {"dispatched", "running", "paused"}
    assert {s.value for s in REPORTABLE} == {"dispatched", "running", "paused", "cancelling"}


@pytest.mark.parametrize(
    ("state", "status"),
    [
        (LeaseState.PENDING, TaskStatus.QUEUED),
        (LeaseState.DISPATCHING, TaskStatus.QUEUED),
        (LeaseState.DISPATCHED, TaskStatus.QUEUED),
        (LeaseState.RUNNING, TaskStatus.RUNNING),
        (LeaseState.PAUSED, TaskStatus.RUNNING),
        (LeaseState.CANCELLING, TaskStatus.RUNNING),
        (LeaseState.COMPLETED, TaskStatus.COMPLETED),
        (LeaseState.FAILED, TaskStatus.FAILED),
        (LeaseState.LOST, TaskStatus.FAILED),
        (LeaseState.CANCELLED, TaskStatus.CANCELLED),
        (LeaseState.KILLED, TaskStatus.CANCELLED),
    ],
)
def test_task_status_follows_its_newest_lease(state: LeaseState, status: TaskStatus) -> None:
    task = Task(id="task_1", key="OPS-1", space="OPS", title="t", created_at=T0)
    assert task_status(task, make_lease("l", state=state)) is status
    assert task_status(task, None) is TaskStatus.READY
    flagged = Task(id="t", key="OPS-2", space="OPS", title="t", created_at=T0, attention=True)
    assert task_status(flagged, make_lease("l", state=state)) is TaskStatus.NEEDS_ATTENTION


def _operator(role: str | None, spaces: tuple[str, ...] | None = None) -> Principal:
    return Principal(kind="operator", token_id="t", role=role, spaces=spaces)


@pytest.mark.parametrize("have", ROLES)
@pytest.mark.parametrize("need", ROLES)
def test_operator_roles_are_ordered_read_member_admin(have: str, need: str) -> None:
    actor = _operator(have)
    if ROLES.index(have) >= ROLES.index(need):
        authz.require_operator(actor, need, "OPS")
        authz.require_operator(actor, need, None)
    else:
        with pytest.raises(Forbidden):
            authz.require_operator(actor, need, "OPS")


@pytest.mark.parametrize("role", [None, "", "owner", "ADMIN"])
def test_an_operator_without_a_known_role_may_not_even_read(role: str | None) -> None:
    with pytest.raises(Forbidden):
        authz.require_operator(_operator(role), "read", "OPS")


def test_a_space_limited_operator_acts_only_in_its_spaces() -> None:
    actor = _operator("admin", spaces=("OPS", "DEV"))
    authz.require_operator(actor, "admin", "OPS")
    authz.require_operator(actor, "read", "DEV")
    with pytest.raises(Forbidden):
        authz.require_operator(actor, "read", "SALES")
    with pytest.raises(Forbidden):  # instance-wide actions are beyond a space-limited token
        authz.require_operator(actor, "admin", None)


def test_an_operator_without_a_space_list_acts_in_every_space() -> None:
    authz.require_operator(_operator("member"), "member", "ANY")


def test_a_worker_token_on_an_operator_route_is_forbidden() -> None:
    with pytest.raises(Forbidden):
        authz.require_operator(Principal(kind="worker", token_id="w"), "read", "OPS")


def test_a_lease_token_on_an_operator_route_is_a_lease_token_mismatch() -> None:
    with pytest.raises(LeaseTokenMismatch):
        authz.require_operator(as_lease("lease_1"), "read", "OPS")


def test_a_worker_token_claims_only_from_its_pools() -> None:
    limited = Principal(kind="worker", token_id="w", pools=("builders",))
    authz.require_worker(limited, "builders")
    authz.require_worker(limited, None)  # routes that are not about one pool
    with pytest.raises(Forbidden):
        authz.require_worker(limited, "deployers")
    authz.require_worker(Principal(kind="worker", token_id="w"), "deployers")


def test_only_worker_tokens_pass_the_worker_check() -> None:
    with pytest.raises(Forbidden):
        authz.require_worker(_operator("admin"), "builders")
    with pytest.raises(LeaseTokenMismatch):
        authz.require_worker(as_lease("lease_1"), "builders")


def test_a_lease_token_acts_on_its_own_lease_only() -> None:
    authz.require_lease(as_lease("lease_1"), "lease_1")
    with pytest.raises(LeaseTokenMismatch):
        authz.require_lease(as_lease("lease_1"), "lease_2")


@pytest.mark.parametrize(
    "actor",
    [
        Principal(kind="operator", token_id="o", role="admin"),
        Principal(kind="worker", token_id="w"),
    ],
)
def test_an_operator_or_worker_token_on_a_lease_route_is_forbidden(actor: Principal) -> None:
    with pytest.raises(Forbidden):
        authz.require_lease(actor, "lease_1")


def test_a_lease_token_acts_only_while_its_lease_row_carries_its_digest() -> None:
    from dataclasses import replace

    from tenure.domain import fencing
    from tenure.domain.errors import Unauthenticated

    lease = make_lease("lease_1", token_hash=fencing.hash_token("first"))
    held = Principal(kind="lease", token_id="t", lease_id=lease.id)
    authz.require_lease_token(replace(held, token_hash=fencing.hash_token("first")), lease)
    # The row now carries the token a retried claim minted: the first one is unknown.
    with pytest.raises(Unauthenticated):
        authz.require_lease_token(
            replace(held, token_hash=fencing.hash_token("first")),
            replace(lease, token_hash=fencing.hash_token("second")),
        )
    with pytest.raises(Unauthenticated):  # a row with no token at all (never claimed)
        authz.require_lease_token(
            replace(held, token_hash=fencing.hash_token("first")), replace(lease, token_hash=None)
        )
    # A worker token's rights on a lease are judged by its holder, not by a digest; a verdict
    # kept by a release before digests were carried lives out its minute unchecked.
    authz.require_lease_token(Principal(kind="worker", token_id="w"), lease)
    authz.require_lease_token(held, replace(lease, token_hash=None))
