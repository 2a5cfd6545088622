"""Setting up work: spaces, workflows, pools, tokens, tasks and enqueue."""

from __future__ import annotations

import pytest
from tenure.app import ports
from tenure.domain import fencing as rules
from tenure.domain.errors import (
    AlreadyExists,
    Forbidden,
    InvalidTransition,
    LeaseNotFound,
    NotFound,
    TaskNotFound,
    Unauthenticated,
    ValidationFailed,
)
from tenure.domain.model import Pool, Principal
from tenure.domain.states import LeaseState, PoolKind, SubjectKind, TaskStatus

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, T0, WORKER, Rig, as_lease


def test_create_space_stores_it_and_a_duplicate_key_already_exists(rig: Rig) -> None:
    space = rig.svc.spaces.create_space(ADMIN, "DEV", "Development", 5)
    assert rig.store.get_space("DEV") == space
    assert (space.name, space.max_active, space.created_at) == ("Development", 5, T0)
    with pytest.raises(AlreadyExists):
        rig.svc.spaces.create_space(ADMIN, "DEV", "Again", None)
    assert rig.store.get_space("DEV") == space


def test_only_an_admin_creates_spaces(rig: Rig) -> None:
    with pytest.raises(Forbidden):
        rig.svc.spaces.create_space(MEMBER, "DEV", "Development", None)
    assert rig.store.get_space("DEV") is None


def test_create_workflow_needs_its_space_and_a_new_slug(rig: Rig) -> None:
    wf = rig.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly", "runs at night")
    assert rig.store.get_workflow(SPACE, "nightly") == wf
    with pytest.raises(AlreadyExists):
        rig.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly 2", None)
    with pytest.raises(NotFound):
        rig.svc.spaces.create_workflow(ADMIN, "NOPE", "nightly", "Nightly", None)


def test_create_pool_keeps_its_timings_and_a_duplicate_name_already_exists(rig: Rig) -> None:
    rig.advance(3)
    pool = rig.make_pool("deployers", renew_seconds=5, grace_seconds=20, toleration_seconds=60)
    stored = rig.store.get_pool("deployers")
    assert stored == pool
    assert (pool.renew_seconds, pool.grace_seconds, pool.toleration_seconds) == (5, 20, 60)
    assert pool.created_at == T0 + 3000
    with pytest.raises(AlreadyExists):
        rig.make_pool("deployers")
    with pytest.raises(NotFound):
        rig.svc.pools.create_pool(
            ADMIN, Pool(name="x", space="NOPE", kind=PoolKind.AGENT, created_at=0)
        )


def test_an_instance_holds_a_bounded_number_of_pools(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GET /pools, the sweeper and the scheduler read every pool: the cap bounds that read.
    have = len(rig.store.list_pools())
    monkeypatch.setattr(ports, "POOL_CAP", have + 1)
    rig.make_pool("one-more")
    with pytest.raises(ValidationFailed, match=f"already has {have + 1} pools"):
        rig.make_pool("too-many")
    assert rig.store.get_pool("too-many") is None


def test_pool_timing_defaults_are_renew_10_grace_50_toleration_300(rig: Rig) -> None:
    pool = rig.store.get_pool(POOL)
    assert pool is not None
    assert (pool.renew_seconds, pool.grace_seconds, pool.toleration_seconds) == (10, 50, 300)
    assert pool.on_expiry.value == "requeue"


def test_create_token_shows_the_token_once_and_stores_only_its_sha256(rig: Rig) -> None:
    token, raw = rig.svc.tokens.create_token(ADMIN, "ci", "operator", "member", (SPACE,), None)
    assert raw.startswith("tnr_o_")
    assert len(raw) - len("tnr_o_") >= 22  # at least 128 bits of url-safe base64
    assert token.token_hash == rules.hash_token(raw)
    assert rig.store.get_token(token.token_hash) == token
    assert raw not in rig.store.everything()
    assert rig.svc.tokens.authenticate(raw) == Principal(
        kind="operator", token_id=token.id, role="member", spaces=(SPACE,)
    )


def test_a_worker_token_carries_pools_and_no_role(rig: Rig) -> None:
    token, raw = rig.svc.tokens.create_token(ADMIN, "fleet", "worker", "admin", (SPACE,), (POOL,))
    assert raw.startswith("tnr_w_")
    assert (token.role, token.spaces, token.pools) == (None, None, (POOL,))
    assert rig.svc.tokens.authenticate(raw).kind == "worker"


def test_a_duplicate_token_name_already_exists(rig: Rig) -> None:
    rig.svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    with pytest.raises(AlreadyExists):
        rig.svc.tokens.create_token(ADMIN, "ci", "worker", None, None, None)


def test_a_token_for_an_unknown_space_or_pool_is_refused(rig: Rig) -> None:
    with pytest.raises(NotFound):
        rig.svc.tokens.create_token(ADMIN, "a", "operator", "read", ("NOPE",), None)
    with pytest.raises(NotFound):
        rig.svc.tokens.create_token(ADMIN, "b", "worker", None, None, ("nope",))
    assert rig.store.tokens == {}


@pytest.mark.parametrize("raw", [None, "", "tnr_o_unknown", "tnr_l_lease_000001.wrong", "x"])
def test_authenticate_refuses_missing_or_unknown_tokens(rig: Rig, raw: str | None) -> None:
    rig.task()
    rig.claim()
    with pytest.raises(Unauthenticated):
        rig.svc.tokens.authenticate(raw)


def test_authenticate_knows_a_lease_token_as_its_own_lease(rig: Rig) -> None:
    won = rig.claimed()
    actor = rig.svc.tokens.authenticate(won.token)
    assert (actor.kind, actor.lease_id) == ("lease", won.lease.id)
    assert won.token not in repr(actor)


def test_bootstrap_admin_is_idempotent(rig: Rig) -> None:
    first = rig.svc.tokens.bootstrap_admin("tnr_o_bootstrap")
    again = rig.svc.tokens.bootstrap_admin("tnr_o_bootstrap")
    assert first == again
    assert rig.svc.tokens.authenticate("tnr_o_bootstrap").role == "admin"


def test_create_task_without_a_pool_opens_it_with_no_lease(rig: Rig) -> None:
    task, lease = rig.task(pool=None, properties={"priority": 2})
    assert lease is None
    assert (task.key, task.space, task.job_id, task.max_attempts) == ("OPS-1", SPACE, None, 3)
    assert rig.store.get_task(task.id) == task
    seen = rig.svc.graph.get_task(READER, task.id)
    assert (seen.status, seen.lease) == (TaskStatus.READY, None)
    assert rig.store.queue_candidates(POOL, 10) == []


def test_task_keys_count_up_within_a_space(rig: Rig) -> None:
    keys = [rig.task(pool=None)[0].key for _ in range(3)]
    assert keys == ["OPS-1", "OPS-2", "OPS-3"]


def test_create_task_with_a_pool_enqueues_a_pending_lease_at_once(rig: Rig) -> None:
    task, lease = rig.task(max_attempts=5)
    assert lease is not None
    assert (lease.state, lease.fence, lease.attempt) == (LeaseState.PENDING, 1, 1)
    assert (lease.subject_kind, lease.subject_id, lease.task_key) == (
        SubjectKind.TASK,
        task.id,
        "OPS-1",
    )
    assert rig.store.get_job(lease.job_id) is None  # a first job has no row: its lease says it
    job = rig.svc.kernel.job_of(lease)
    assert job is not None
    assert (job.fence, job.lease_id, job.max_attempts, job.recovery_count) == (1, lease.id, 5, 0)
    assert rig.store.get_task(task.id).job_id == job.id  # type: ignore[union-attr]
    assert rig.store.queue_candidates(POOL, 10) == [lease.id]
    seen = rig.svc.graph.get_task(READER, task.id)
    assert (seen.status, seen.lease) == (TaskStatus.QUEUED, lease)
    assert rig.types(task.id) == ["lease.created"]


def test_create_task_refuses_a_pool_of_another_space_and_a_missing_workflow(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "DEV", "Dev", None)
    agents = Pool(
        name="devpool", space="DEV", kind=PoolKind.AGENT, created_at=0, agent={"model": "m-1"}
    )
    rig.svc.pools.create_pool(ADMIN, agents)
    with pytest.raises(ValidationFailed):
        rig.task(pool="devpool")
    with pytest.raises(NotFound):
        rig.task(workflow="nope")
    with pytest.raises(NotFound):
        rig.task(pool="nope")
    assert rig.store.tasks == {}


def test_create_task_in_a_workflow_records_its_slug_on_the_lease(rig: Rig) -> None:
    rig.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly", None)
    task, lease = rig.task(workflow="nightly")
    assert task.workflow == "nightly"
    assert lease is not None and lease.workflow == "nightly"


def test_create_task_needs_a_member_of_its_space(rig: Rig) -> None:
    with pytest.raises(Forbidden):
        rig.svc.filing.create_task(READER, SPACE, "t", None, None, {}, None, None)
    elsewhere = Principal(kind="operator", token_id="o", role="admin", spaces=("DEV",))
    with pytest.raises(Forbidden):
        rig.svc.filing.create_task(elsewhere, SPACE, "t", None, None, {}, None, None)
    with pytest.raises(Forbidden):
        rig.svc.filing.create_task(WORKER, SPACE, "t", None, None, {}, None, None)
    # A lease token files in its own lease's space (tests/unit/test_delegation.py).
    with pytest.raises(LeaseNotFound):
        rig.svc.filing.create_task(as_lease("l"), SPACE, "t", None, None, {}, None, None)
    assert rig.store.tasks == {}


def test_enqueue_opens_a_run_for_a_task_that_has_none(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert (lease.state, lease.fence, lease.attempt, lease.task_id) == (
        LeaseState.PENDING,
        1,
        1,
        task.id,
    )
    assert rig.store.get_task(task.id).job_id == lease.job_id  # type: ignore[union-attr]
    assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.QUEUED


def test_enqueue_refuses_a_second_open_run(rig: Rig) -> None:
    task, _ = rig.task()
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    rig.claim()
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert rig.store.queue_candidates(POOL, 10) == []
    assert len({row.lease.job_id for row in rig.store.lease_rows.values()}) == 1


def test_enqueue_after_a_finished_run_opens_a_new_one(rig: Rig) -> None:
    task, _ = rig.task()
    won = rig.claim()
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"outcome": "success"})
    again = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert again.job_id != won.lease.job_id
    assert (again.state, again.fence) == (LeaseState.PENDING, 1)
    assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.QUEUED


def test_enqueue_an_unknown_task_is_task_not_found(rig: Rig) -> None:
    with pytest.raises(TaskNotFound):
        rig.svc.filing.enqueue(MEMBER, "task_nope", POOL)


def test_a_lease_token_is_checked_against_its_hash_in_constant_time(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How long a comparison takes must tell nothing of how much of a guessed token was
    right: the lease token's hash is compared with hmac.compare_digest."""
    import hmac

    from tenure.domain import fencing

    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def record(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(fencing.hmac, "compare_digest", record)
    won = rig.claim() if rig.task() else None
    assert won is not None
    assert rig.svc.tokens.authenticate(won.token).lease_id == won.lease.id
    assert compared == [(won.lease.token_hash, fencing.hash_token(won.token))]
    with pytest.raises(Unauthenticated):
        rig.svc.tokens.authenticate(won.token[:-2] + "xx")
