"""The lease service: every use case, written against the ports only (no AWS, no clock)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tenure.core import authz, rules
from tenure.core.errors import (
    AlreadyExists,
    CeilingReached,
    Conflict,
    InvalidTransition,
    LeaseNotFound,
    NotFound,
    StaleLease,
    TaskNotFound,
    TenureError,
    Unauthenticated,
    ValidationFailed,
)
from tenure.core.model import (
    DEFAULT_MAX_ATTEMPTS,
    Event,
    Job,
    Lease,
    Pool,
    Principal,
    Space,
    Task,
    Token,
    Worker,
    Workflow,
    task_status,
)
from tenure.core.ports import (
    Ceiling,
    Change,
    Clock,
    Ids,
    JobWrite,
    LeasePage,
    LeaseWrite,
    Store,
    TaskWrite,
)
from tenure.core.states import (
    HELD,
    QUEUED,
    REPORTABLE,
    EndReason,
    LeaseState,
    OnExpiry,
    ReportKind,
    Revoke,
    SubjectKind,
    TaskStatus,
)

# How many queue heads a claim looks at; claimers shuffle them so that concurrent workers
# spread over candidates instead of all paying for a lost race on the head (DESIGN §9).
CLAIM_CANDIDATES = 16
# How many candidates one claim call may lose races for before it rests a poll interval.
MAX_CLAIM_TRIES = 200
# How long an idle long-poll waits between looks at the queue.
CLAIM_POLL_SECONDS = 0.5
ACTIVITY_IN_PAYLOAD = 20
# A worker's last_seen is written at most once per this share of its pool's grace: enough to
# tell reachable from unreachable, without a write on every heartbeat (DESIGN §9).
SEEN_WRITE_SHARE = 0.25
# ...or, when the same heartbeat already wrote the lease, only once it is this old.
SEEN_URGENT_SHARE = 0.5
# Pools change rarely; a warm function keeps them this long instead of a read per heartbeat.
POOL_CACHE_MS = 30_000


@dataclass(frozen=True)
class Claimed:
    lease: Lease
    token: str  # shown to the worker exactly once, never stored
    pool: Pool


@dataclass(frozen=True)
class Beat:
    lease: Lease
    revoke: Revoke | None
    wrote: bool = False


@dataclass(frozen=True)
class WorkerView:
    worker: Worker
    reachable: bool
    leases: list[Lease]


@dataclass(frozen=True)
class TaskView:
    task: Task
    lease: Lease | None
    status: TaskStatus


class LeaseService:
    def __init__(self, store: Store, clock: Clock, ids: Ids) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self._pools: dict[str, tuple[int, Pool]] = {}
        self._spaces: dict[str, tuple[int, Space]] = {}
        self._seen: dict[tuple[str, str], tuple[int, str | None]] = {}

    # ----------------------------------------------------------------- set-up resources

    def create_space(self, actor: Principal, key: str, name: str, max_active: int | None) -> Space:
        authz.require_operator(actor, "admin")
        space = Space(key=key, name=name, max_active=max_active, created_at=self.clock.now_ms())
        self.store.put_space(space)
        return space

    def create_workflow(
        self, actor: Principal, space: str, slug: str, name: str, description: str | None
    ) -> Workflow:
        authz.require_operator(actor, "admin", space)
        self._space(space)
        wf = Workflow(
            space=space,
            slug=slug,
            name=name,
            description=description,
            created_at=self.clock.now_ms(),
        )
        self.store.put_workflow(wf)
        return wf

    def create_pool(self, actor: Principal, pool: Pool) -> Pool:
        authz.require_operator(actor, "admin", pool.space)
        self._space(pool.space)
        pool = replace(pool, created_at=self.clock.now_ms())
        self.store.put_pool(pool)
        return pool

    def create_token(
        self,
        actor: Principal,
        name: str,
        kind: str,
        role: str | None,
        spaces: tuple[str, ...] | None,
        pools: tuple[str, ...] | None,
    ) -> tuple[Token, str]:
        authz.require_operator(actor, "admin")
        for key in spaces or ():
            self._space(key)
        for pool in pools or ():
            self._pool(pool)
        raw = f"{rules.TOKEN_PREFIX[kind]}{self.ids.secret()}"
        token = Token(
            id=self.ids.new_id("tok"),
            name=name,
            kind=kind,
            role=role if kind == "operator" else None,
            spaces=spaces if kind == "operator" else None,
            pools=pools if kind == "worker" else None,
            token_hash=rules.hash_token(raw),
            created_at=self.clock.now_ms(),
        )
        self.store.put_token(token)
        return token, raw

    def bootstrap_admin(self, raw: str) -> Token:
        """Make sure `raw` is an admin operator token (the local stack's first token)."""
        digest = rules.hash_token(raw)
        existing = self.store.get_token(digest)
        if existing is not None:
            return existing
        token = Token(
            id=self.ids.new_id("tok"),
            name=f"admin-{digest[:8]}",
            kind="operator",
            role="admin",
            token_hash=digest,
            created_at=self.clock.now_ms(),
        )
        try:
            self.store.put_token(token)
        except AlreadyExists:
            found = self.store.get_token(digest)
            if found is None:
                raise
            return found
        return token

    def authenticate(self, raw: str | None) -> Principal:
        if not raw:
            raise Unauthenticated("a bearer token is required")
        lease_id = rules.lease_id_of_token(raw)
        digest = rules.hash_token(raw)
        if len(raw) > rules.MAX_TOKEN_LENGTH:
            raise Unauthenticated("unknown token")
        if lease_id is not None:
            # Consistent: a token used right after its claim must see the claim (and API
            # Gateway would cache a wrong "unknown" verdict for a minute).
            lease = self.store.get_lease(lease_id, consistent=True)
            if lease is None or lease.token_hash != digest:
                raise Unauthenticated("unknown token")
            return Principal(kind="lease", token_id=digest[:8], lease_id=lease.id)
        token = self.store.get_token(digest)
        if token is None:
            raise Unauthenticated("unknown token")
        return token.principal()

    # ----------------------------------------------------------------------- tasks

    def create_task(
        self,
        actor: Principal,
        space: str,
        title: str,
        workflow: str | None,
        body: str | None,
        properties: dict[str, Any],
        pool: str | None,
        max_attempts: int | None,
    ) -> tuple[Task, Lease | None]:
        authz.require_operator(actor, "member", space)
        rules.refuse_tokens({"title": title, "body": body, "properties": properties}, "the task")
        if workflow is not None and self.store.get_workflow(space, workflow) is None:
            raise NotFound(f"workflow {workflow!r} does not exist in space {space!r}")
        target = self._pool_in_space(pool, space) if pool is not None else None
        number = self.store.next_task_number(space)
        task = Task(
            id=self.ids.new_id("task"),
            key=f"{space}-{number}",
            space=space,
            title=title,
            body=body,
            properties=properties,
            workflow=workflow,
            max_attempts=max_attempts or DEFAULT_MAX_ATTEMPTS,
            created_at=self.clock.now_ms(),
        )
        if target is None:
            self._commit(Change(tasks=[TaskWrite(task, create=True)]))
            return task, None
        task, lease = self._open_run(task, target, create_task=True, expect_job_id=None)
        return task, lease

    def enqueue(self, actor: Principal, task_id: str, pool: str) -> Lease:
        authz.require_role(actor, "member")
        task = self._task(task_id)
        authz.require_operator(actor, "member", task.space)
        target = self._pool_in_space(pool, task.space)
        current = self._newest_lease(task)
        if current is not None and current.state.active:
            raise InvalidTransition(f"task {task.key} already has an open run ({current.id})")
        if task.attention:
            raise InvalidTransition(f"task {task.key} needs attention; recover it first")
        # The last run must still be the ended lease just read: a release or an expiry between
        # the reads would have handed its job to a successor (an open run after all).
        checks = [(task.job_id, current.id)] if task.job_id and current else []
        try:
            _, lease = self._open_run(
                task, target, create_task=False, expect_job_id=task.job_id, job_checks=checks
            )
        except Conflict as lost:
            raise InvalidTransition(f"task {task.key} already has an open run") from lost
        return lease

    def get_task(self, actor: Principal, task_id: str) -> TaskView:
        authz.require_role(actor, "read")
        task = self._task(task_id)
        authz.require_operator(actor, "read", task.space)
        lease = self._newest_lease(task)
        status = task_status(task, lease)
        return TaskView(
            task=task, lease=lease if lease and lease.state.active else None, status=status
        )

    def activity(self, actor: Principal, task_id: str) -> list[Event]:
        authz.require_role(actor, "read")
        task = self._task(task_id)
        authz.require_operator(actor, "read", task.space)
        return self.store.timeline(SubjectKind.TASK, task.id, None)

    # ---------------------------------------------------------------- operator leases

    def list_leases(
        self,
        actor: Principal,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
    ) -> LeasePage:
        authz.require_operator(actor, "read", space)
        return self.store.list_leases(space, limit, cursor, state, pool)

    def get_lease(self, actor: Principal, lease_id: str) -> Lease:
        authz.require_role(actor, "read")
        lease = self._lease(lease_id)
        authz.require_operator(actor, "read", lease.space)
        return lease

    def cancel(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_transition(actor, lease_id, "cancel")

    def kill(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_transition(actor, lease_id, "kill")

    def pause(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_transition(actor, lease_id, "pause")

    def resume(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_transition(actor, lease_id, "resume")

    def _operator_transition(self, actor: Principal, lease_id: str, action: str) -> Lease:
        authz.require_role(actor, "member")
        lease = self._lease(lease_id)
        authz.require_operator(actor, "member", lease.space)
        while True:
            now = self.clock.now_ms()
            plan = _operator_plan(lease, action, now)
            if plan is None:  # terminal, or already where the action leads: a no-op
                return lease
            new, event_type = plan
            new = _moved(lease, new, event_type, {"by": actor.token_id}, now)
            try:
                self._write(lease, new)
                return new
            except Conflict:
                lease = self._lease(lease_id)

    # -------------------------------------------------------------------- workers

    def claim(
        self,
        actor: Principal,
        pool_name: str,
        worker_id: str,
        worker_version: str | None,
        wait_seconds: float,
        lease_seconds: int | None,
    ) -> Claimed | None:
        authz.require_worker(actor, pool_name)
        pool = self._pool(pool_name)
        self._mark_seen(pool, worker_id, worker_version)  # a claim is itself a sign of life
        give_up_at = self.clock.now_ms() + int(wait_seconds * 1000)
        tried: set[str] = set()  # the queue index lags a claim: never retry the same lease
        while True:
            fresh: list[str] = []
            if not pool.paused:
                seen = self.store.queue_candidates(pool.name, CLAIM_CANDIDATES + len(tried))
                fresh = [lease_id for lease_id in seen if lease_id not in tried]
                for lease_id in self.ids.shuffle(fresh[:CLAIM_CANDIDATES]):
                    tried.add(lease_id)
                    try:
                        won = self._try_claim(
                            lease_id, pool, worker_id, worker_version, lease_seconds, actor.token_id
                        )
                    except CeilingReached:
                        fresh = []  # full: nothing is claimable until a held lease ends
                        break
                    if won is not None:
                        return won
            if fresh and len(tried) < MAX_CLAIM_TRIES:
                continue  # a lost race is not an empty queue: look again at once
            remaining = (give_up_at - self.clock.now_ms()) / 1000
            if remaining <= 0:
                return None
            self.clock.sleep(min(CLAIM_POLL_SECONDS, remaining))
            tried.clear()

    def _try_claim(
        self,
        lease_id: str,
        pool: Pool,
        worker_id: str,
        worker_version: str | None,
        lease_seconds: int | None,
        claimant: str,
    ) -> Claimed | None:
        lease = self.store.get_lease(lease_id, consistent=False)
        if lease is None or lease.state is not LeaseState.PENDING:
            return None
        now = self.clock.now_ms()
        token = rules.mint_lease_token(lease.id, self.ids.secret())
        tol_ms = 1000 * (lease_seconds or pool.toleration_seconds)
        new = replace(
            lease,
            state=LeaseState.DISPATCHED,
            worker_id=worker_id,
            worker_version=worker_version,
            token_hash=rules.hash_token(token),
            claimed_by=claimant,
            lease_seconds=lease_seconds or pool.toleration_seconds,
            renew_seconds=pool.renew_seconds,
            claimed_at=now,
            heartbeat_at=now,
            deadline=rules.fresh_deadline(now, tol_ms),
            due_at=rules.fresh_deadline(now, tol_ms),
        )
        data = {"worker_id": worker_id, "worker_version": worker_version}
        ceilings = self._ceilings(pool)
        counted = tuple(f"{c.scope}:{c.name}" for c in ceilings) or None
        new = _moved(lease, replace(new, counted=counted), "lease.claimed", data, now)
        try:
            self._commit(Change(leases=[_over(lease, new)], ceilings=ceilings))
        except CeilingReached:
            raise
        except Conflict:
            return None
        return Claimed(lease=new, token=token, pool=pool)

    def _ceilings(self, pool: Pool) -> list[Ceiling]:
        """The counters a claim in `pool` must stay under (DESIGN §4: unlimited unless set)."""
        found = []
        if pool.max_active is not None:
            found.append(Ceiling("pool", pool.name, +1, pool.max_active))
        space = self._space_cached(pool.space)
        if space.max_active is not None:
            found.append(Ceiling("space", space.key, +1, space.max_active))
        return found

    def queued_condition(self, lease: Lease) -> str | None:
        """What a lease that has not started is waiting on (DESIGN §10's queued_condition)."""
        if lease.state is LeaseState.PENDING:
            pool = self._pool(lease.pool)
            if pool.paused:
                return "pool_paused"
            return self._full(pool) or "awaiting_agent"
        if lease.state in (LeaseState.DISPATCHING, LeaseState.DISPATCHED):
            return "starting"
        return None

    def _full(self, pool: Pool) -> str | None:
        """Which ceiling keeps `pool` from handing out a lease now, if any."""
        for ceiling in self._ceilings(pool):
            if self.store.held_count(ceiling.scope, ceiling.name) >= (ceiling.limit or 0):
                return f"{ceiling.scope}_full"
        return None

    def start(self, actor: Principal, lease_id: str) -> Lease:
        lease = self._own_lease(actor, lease_id)
        while True:
            if lease.state is not LeaseState.DISPATCHED:
                self._refuse_if_stale(lease, "start")
                if lease.state in REPORTABLE:
                    return lease  # already started: starting again changes nothing
                raise InvalidTransition(f"lease {lease.id} is {lease.state}; it cannot start")
            new = self._started(lease, lease, self._pool(lease.pool), "start")
            try:
                self._write(lease, new)
                return new
            except Conflict:
                lease = self._lease(lease_id)

    def worker_heartbeat(
        self, actor: Principal, worker_id: str, leases: list[tuple[str, int]]
    ) -> list[tuple[str, int, Beat | TenureError]]:
        """Renew every lease one worker holds in one call; one answer per lease."""
        authz.require_worker(actor, None)
        found = self.store.get_leases([lease_id for lease_id, _ in leases])
        answers: list[tuple[str, int, Beat | TenureError]] = []
        seen: set[str] = set()
        for lease_id, fence in leases:
            try:
                lease = found.get(lease_id)
                if lease is None:
                    raise LeaseNotFound(f"lease {lease_id} does not exist")
                authz.require_worker(actor, lease.pool)
                if lease.worker_id != worker_id or lease.claimed_by != actor.token_id:
                    raise StaleLease(f"lease {lease_id} is not held by worker {worker_id}")
                if fence != lease.fence:
                    self._record_stale(lease, "heartbeat", fence)
                    raise StaleLease(f"fence {fence} of lease {lease_id} is not current")
                answers.append((lease_id, fence, self._beat(lease, None)))
                if lease.pool not in seen:
                    seen.add(lease.pool)
                    self._mark_seen(self._pool(lease.pool), worker_id, lease.worker_version)
            except TenureError as refused:
                answers.append((lease_id, fence, refused))
        return answers

    def list_workers(self, actor: Principal, pool_name: str) -> list[WorkerView]:
        authz.require_role(actor, "read")
        pool = self._pool(pool_name)
        authz.require_operator(actor, "read", pool.space)
        now = self.clock.now_ms()
        held = self.store.get_leases(self.store.due_leases(pool.name, None))
        by_worker: dict[str, list[Lease]] = {}
        for lease in sorted(held.values(), key=lambda x: x.created_at):
            if lease.worker_id and lease.state in REPORTABLE:
                by_worker.setdefault(lease.worker_id, []).append(lease)
        return [
            WorkerView(
                worker=w,
                reachable=now - w.last_seen <= pool.grace_seconds * 1000,
                leases=by_worker.get(w.worker_id, []),
            )
            for w in sorted(self.store.list_workers(pool.name), key=lambda w: w.worker_id)
        ]

    def _mark_seen(
        self, pool: Pool, worker_id: str, version: str | None, defer: bool = False
    ) -> None:
        now = self.clock.now_ms()
        grace = pool.grace_seconds * 1000
        window = int(grace * (SEEN_URGENT_SHARE if defer else SEEN_WRITE_SHARE))
        key = (pool.name, worker_id)
        cached = self._seen.get(key)
        if cached is None:
            known = self.store.get_worker(pool.name, worker_id)
            cached = (known.last_seen, known.worker_version) if known else None
        if cached is not None and now - cached[0] < window and cached[1] == version:
            self._seen[key] = cached
            return
        worker = Worker(pool=pool.name, worker_id=worker_id, worker_version=version, last_seen=now)
        self.store.put_worker(worker)
        self._seen[key] = (now, version)

    def heartbeat(self, actor: Principal, lease_id: str, lease_seconds: int | None) -> Beat:
        authz.require_lease(actor, lease_id)
        # Consistent (1 read unit): a heartbeat on a lease the sweeper just expired must be
        # refused as stale, not answered with an old "running".
        lease = self._lease(lease_id)
        beat = self._beat(lease, lease_seconds)
        if lease.worker_id:
            # One write per heartbeat at most: the worker's last_seen waits a beat when the
            # lease's deadline was just written, unless it is getting old.
            self._mark_seen(
                self._pool(lease.pool), lease.worker_id, lease.worker_version, beat.wrote
            )
        return beat

    def _beat(self, lease: Lease, lease_seconds: int | None) -> Beat:
        wrote = False
        while True:
            self._refuse_if_stale(lease, "heartbeat")
            if lease.state not in REPORTABLE:
                raise InvalidTransition(f"lease {lease.id} is {lease.state}; nothing to renew")
            pool = self._pool(lease.pool)
            now = self.clock.now_ms()
            wanted = lease_seconds or lease.lease_seconds or pool.toleration_seconds
            tol_ms = 1000 * wanted
            try:
                if lease.state is LeaseState.DISPATCHED:
                    new = self._started(
                        lease, replace(lease, lease_seconds=wanted), pool, "heartbeat"
                    )
                    self._write(lease, new)
                    lease, wrote = new, True
                elif wanted != lease.lease_seconds or rules.deadline_needs_write(
                    lease, now, tol_ms
                ):
                    new = replace(
                        lease,
                        lease_seconds=wanted,
                        heartbeat_at=now,
                        deadline=rules.fresh_deadline(now, tol_ms),
                    )
                    self.store.renew(new, expect=(lease.state, lease.fence))
                    lease, wrote = new, True
                return Beat(lease=lease, revoke=_revoke_signal(lease), wrote=wrote)
            except Conflict:
                lease = self._lease(lease.id)

    def complete(self, actor: Principal, lease_id: str, body: dict[str, Any]) -> Lease:
        outcome = body.get("outcome", "success")
        return self._report(actor, lease_id, ReportKind.COMPLETE, body, outcome)

    def fail(self, actor: Principal, lease_id: str, body: dict[str, Any]) -> Lease:
        return self._report(actor, lease_id, ReportKind.FAIL, body, "failure")

    def release(self, actor: Principal, lease_id: str, body: dict[str, Any]) -> Lease:
        return self._report(actor, lease_id, ReportKind.RELEASE, body, None)

    def _report(
        self,
        actor: Principal,
        lease_id: str,
        kind: ReportKind,
        body: dict[str, Any],
        outcome: str | None,
    ) -> Lease:
        lease = self._own_lease(actor, lease_id)
        rules.refuse_tokens(body, "the report")
        fp = rules.fingerprint(kind, body)
        report_id = body.get("report_id")
        while True:
            if lease.state.terminal:
                same = lease.report_fingerprint == fp or (
                    report_id is not None and lease.report_id == report_id
                )
                if same and lease.report_kind is not None:
                    return lease  # the first answer, again
                self._refuse_if_stale(lease, kind)
                raise InvalidTransition(f"lease {lease.id} already ended {lease.state}")
            if lease.state not in REPORTABLE:
                raise InvalidTransition(f"lease {lease.id} is {lease.state}; it has no holder")
            fence = body.get("fence")
            if fence is not None and fence != lease.fence:
                self._record_stale(lease, kind, fence)
                raise StaleLease(f"fence {fence} of lease {lease.id} is not current")
            try:
                change = self._final_change(lease, kind, body, outcome, fp, report_id)
                self._commit(change)
                return change.leases[0].new
            except Conflict:  # the lease (or its job) moved on meanwhile: judge it afresh
                lease = self._lease(lease_id)

    def _final_change(
        self,
        lease: Lease,
        kind: ReportKind,
        body: dict[str, Any],
        outcome: str | None,
        fp: str,
        report_id: str | None,
    ) -> Change:
        now = self.clock.now_ms()
        data = {k: v for k, v in body.items() if v is not None and k not in ("fence", "report_id")}
        if lease.state is LeaseState.CANCELLING:
            # The worker's report ends a revoked lease as the operator asked, whatever it says.
            killed = lease.revoke is Revoke.KILL
            state = LeaseState.KILLED if killed else LeaseState.CANCELLED
            reason = EndReason.KILLED if killed else EndReason.CANCELLED
            requeue = False
        elif kind is ReportKind.RELEASE:
            state, reason, requeue = LeaseState.CANCELLED, EndReason.RELEASED, True
        elif kind is ReportKind.COMPLETE and outcome == "success":
            state, reason, requeue = LeaseState.COMPLETED, EndReason.COMPLETED, False
        else:
            state, reason, requeue = LeaseState.FAILED, EndReason.FAILED, False
        ended = replace(
            lease,
            state=state,
            end_reason=reason,
            outcome=outcome if kind is ReportKind.COMPLETE else None,
            ended_at=now,
            revoke=None,
            report_kind=kind,
            report_fingerprint=fp,
            report_id=report_id,
            report=data or None,
        )
        event_type = {
            LeaseState.COMPLETED: "lease.completed",
            LeaseState.FAILED: "lease.failed",
            LeaseState.KILLED: "lease.killed",
        }.get(state, "lease.released" if requeue else "lease.cancelled")
        ended = _moved(lease, ended, event_type, {"report": kind.value}, now)
        change = Change(leases=[_over(lease, ended)])
        if requeue:
            return self._with_successor(change, lease, recovered=False)
        return change

    def _with_successor(self, change: Change, lease: Lease, recovered: bool) -> Change:
        """Add to `change` the job's next pending lease under fence + 1."""
        job = self.store.get_job(lease.job_id)
        if job is None or job.fence != lease.fence:
            raise Conflict(f"job {lease.job_id} moved on")
        now = self.clock.now_ms()
        successor = Lease(
            event_type="lease.created",
            event_data={"previous_lease_id": lease.id, "recovered": recovered},
            updated_at=now,
            id=self.ids.new_id("lease"),
            job_id=job.id,
            space=lease.space,
            pool=lease.pool,
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            task_id=lease.task_id,
            task_key=lease.task_key,
            workflow=lease.workflow,
            state=LeaseState.PENDING,
            fence=job.fence + 1,
            attempt=job.attempt,
            created_at=now,
        )
        next_job = replace(
            job,
            fence=successor.fence,
            lease_id=successor.id,
            recovery_count=job.recovery_count + (1 if recovered else 0),
        )
        return Change(
            leases=[*change.leases, LeaseWrite(successor)],
            jobs=[*change.jobs, JobWrite(next_job, expect_fence=job.fence)],
            tasks=change.tasks,
        )

    def expire(self, lease: Lease, pool: Pool) -> Lease | None:
        """End a held lease whose holder went silent (the sweeper's verdict, DESIGN §4).

        Returns None when the lease moved on first (a report won the race): nothing expired.
        """
        try:
            change = self._expiry_change(lease, pool, self.clock.now_ms())
            self._commit(change)
        except Conflict:
            return None
        return change.leases[0].new

    def _expiry_change(self, lease: Lease, pool: Pool, now: int) -> Change:
        base = replace(lease, ended_at=now, revoke=None)
        if lease.state is LeaseState.CANCELLING:
            # Already asked to stop: silence ends it the way the operator asked.
            killed = lease.revoke is Revoke.KILL
            ended = replace(
                base,
                state=LeaseState.KILLED if killed else LeaseState.CANCELLED,
                end_reason=EndReason.KILLED if killed else EndReason.CANCELLED,
            )
            kind = "lease.killed" if killed else "lease.cancelled"
            ended = _moved(lease, ended, kind, {"by": "sweeper"}, now)
            return Change(leases=[_over(lease, ended)])
        if pool.on_expiry is OnExpiry.FAIL:
            lost = replace(base, state=LeaseState.LOST, end_reason=EndReason.WORKER_LOST)
            lost = _moved(lease, lost, "lease.lost", {"on_expiry": "fail"}, now)
            return Change(leases=[_over(lease, lost)])
        job = self.store.get_job(lease.job_id)
        if job is None or job.fence != lease.fence:
            raise Conflict(f"job {lease.job_id} moved on")
        recovery = job.recovery_count + 1
        exhausted = job.attempt + recovery >= job.max_attempts
        lost = replace(base, state=LeaseState.LOST, end_reason=EndReason.EXPIRED)
        data = {"on_expiry": "requeue", "recovery_count": recovery, "exhausted": exhausted}
        change = Change(leases=[_over(lease, _moved(lease, lost, "lease.lost", data, now))])
        if exhausted:
            return self._exhausted(change, job, recovery, now)
        return self._with_successor(change, lease, recovered=True)

    def _exhausted(self, change: Change, job: Job, recovery: int, now: int) -> Change:
        jobs = [JobWrite(replace(job, recovery_count=recovery, exhausted=True), job.fence)]
        tasks: list[TaskWrite] = []
        if job.task_id is not None:
            task = self._task(job.task_id)
            flagged = replace(
                task,
                attention=True,
                version=task.version + 1,
                event_type="task.run.lease_recovery_exhausted",
                event_data={
                    "job_id": job.id,
                    "attempt": job.attempt,
                    "recovery_count": recovery,
                    "max_attempts": job.max_attempts,
                },
                updated_at=now,
            )
            tasks.append(TaskWrite(flagged, expect_job_id=job.id))
        return Change(leases=change.leases, jobs=jobs, tasks=tasks)

    def payload(self, actor: Principal, lease_id: str) -> dict[str, Any]:
        lease = self._own_lease(actor, lease_id)
        self._refuse_if_stale(lease, "payload")
        pool = self._pool(lease.pool)
        events = self.store.timeline(lease.subject_kind, lease.subject_id, None)
        recent = [_event_summary(e) for e in events[-ACTIVITY_IN_PAYLOAD:]]
        subject: dict[str, Any]
        if lease.subject_kind is SubjectKind.TASK:
            task = self._task(lease.task_id or "")
            subject = {
                "kind": "task",
                "key": task.key,
                "title": task.title,
                "body": task.body,
                "properties": task.properties,
                "dependencies": [],
                "prior_attempts": _prior_attempts(events, lease.id),
                "activity": recent,
            }
        elif lease.subject_kind is SubjectKind.WORKFLOW:
            wf = self.store.get_workflow(lease.space, lease.workflow or "")
            subject = {
                "kind": "workflow",
                "slug": lease.workflow,
                "name": wf.name if wf else None,
                "description": wf.description if wf else None,
                "activity": recent,
            }
        else:
            space = self._space(lease.space)
            subject = {"kind": "space", "key": space.key, "name": space.name, "activity": recent}
        return {"lease": lease, "subject": subject, "kind": pool.kind.value}

    # -------------------------------------------------------------------- helpers

    def _open_run(
        self,
        task: Task,
        pool: Pool,
        create_task: bool,
        expect_job_id: str | None,
        job_checks: list[tuple[str, str]] | None = None,
    ) -> tuple[Task, Lease]:
        now = self.clock.now_ms()
        job_id = self.ids.new_id("job")
        lease = Lease(
            event_type="lease.created",
            event_data={"pool": pool.name},
            updated_at=now,
            id=self.ids.new_id("lease"),
            job_id=job_id,
            space=task.space,
            pool=pool.name,
            subject_kind=SubjectKind.TASK,
            subject_id=task.id,
            task_id=task.id,
            task_key=task.key,
            workflow=task.workflow,
            state=LeaseState.PENDING,
            fence=1,
            attempt=1,
            created_at=now,
        )
        job = Job(
            id=job_id,
            space=task.space,
            pool=pool.name,
            subject_kind=SubjectKind.TASK,
            subject_id=task.id,
            task_id=task.id,
            lease_id=lease.id,
            max_attempts=task.max_attempts,
            created_at=now,
        )
        task = task.with_job(job_id)
        self._commit(
            Change(
                leases=[LeaseWrite(lease)],
                jobs=[JobWrite(job)],
                tasks=[TaskWrite(task, expect_job_id=expect_job_id, create=create_task)],
                job_checks=job_checks or [],
            )
        )
        return task, lease

    def _started(self, old: Lease, lease: Lease, pool: Pool, by: str) -> Lease:
        now = self.clock.now_ms()
        tol_ms = 1000 * (lease.lease_seconds or pool.toleration_seconds)
        started = replace(
            lease,
            state=LeaseState.RUNNING,
            started_at=now,
            heartbeat_at=now,
            deadline=rules.fresh_deadline(now, tol_ms),
        )
        return _moved(old, started, "lease.started", {"by": by}, now)

    def _write(self, old: Lease, new: Lease) -> None:
        """One conditional write: `new` lands only if the row still holds old's state and fence."""
        self._commit(Change(leases=[_over(old, new)]))

    def _commit(self, change: Change) -> None:
        """Commit, giving back the ceiling slots of every counted lease that ends here."""
        freed = [
            Ceiling(scope, name, -1)
            for write in change.leases
            if write.new.state.terminal
            and write.new.counted
            and write.expect is not None
            and write.expect[0] in REPORTABLE
            for scope, _, name in (entry.partition(":") for entry in write.new.counted)
        ]
        if freed:
            change = replace(change, ceilings=[*change.ceilings, *freed])
        self.store.commit(change)

    def _refuse_if_stale(self, lease: Lease, what: str) -> None:
        if lease.superseded:
            self._record_stale(lease, what, lease.fence)
            raise StaleLease(
                f"lease {lease.id} (fence {lease.fence}) was {lease.end_reason or lease.state}; "
                "its job has moved on"
            )

    def _record_stale(self, lease: Lease, what: str, fence: int) -> None:
        self.store.put_event(
            self._event(lease, "lease.stale_report", {"report": str(what), "fence": fence})
        )

    def _event(self, lease: Lease, type_: str, data: dict[str, Any]) -> Event:
        return Event(
            id=self.ids.new_id("ev"),
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            type=type_,
            at=self.clock.now_ms(),
            lease_id=lease.id,
            fence=lease.fence,
            data=data,
        )

    def _own_lease(self, actor: Principal, lease_id: str) -> Lease:
        authz.require_lease(actor, lease_id)
        return self._lease(lease_id)

    def _newest_lease(self, task: Task) -> Lease | None:
        if task.job_id is None:
            return None
        job = self.store.get_job(task.job_id)
        return self.store.get_lease(job.lease_id) if job else None

    def _lease(self, lease_id: str, consistent: bool = True) -> Lease:
        lease = (
            self.store.get_lease(lease_id, consistent=consistent)
            if len(lease_id) <= rules.MAX_ID_LENGTH
            else None
        )
        if lease is None:
            raise LeaseNotFound(f"lease {lease_id} does not exist")
        return lease

    def _task(self, task_id: str) -> Task:
        task = self.store.get_task(task_id) if len(task_id) <= rules.MAX_ID_LENGTH else None
        if task is None:
            raise TaskNotFound(f"task {task_id} does not exist")
        return task

    def _space(self, key: str) -> Space:
        space = self.store.get_space(key)
        if space is None:
            raise NotFound(f"space {key!r} does not exist")
        return space

    def _space_cached(self, key: str) -> Space:
        now = self.clock.now_ms()
        cached = self._spaces.get(key)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        space = self._space(key)
        self._spaces[key] = (now, space)
        return space

    def _pool(self, name: str) -> Pool:
        now = self.clock.now_ms()
        cached = self._pools.get(name)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        pool = self.store.get_pool(name) if len(name) <= rules.MAX_ID_LENGTH else None
        if pool is None:
            raise NotFound(f"pool {name!r} does not exist")
        self._pools[name] = (now, pool)
        return pool

    def _pool_in_space(self, name: str, space: str) -> Pool:
        pool = self._pool(name)
        if pool.space != space:
            raise ValidationFailed(f"pool: {name!r} belongs to space {pool.space!r}, not {space!r}")
        return pool


def _operator_plan(lease: Lease, action: str, now: int) -> tuple[Lease, str] | None:
    """What an operator action does to a lease (DESIGN §3), or None for a no-op."""
    state = lease.state
    if state.terminal:
        if action in ("cancel", "kill"):
            return None
        raise InvalidTransition(f"lease {lease.id} is {state}; it cannot {action}")
    if action in ("cancel", "kill") and state in QUEUED:
        ended_state = LeaseState.CANCELLED if action == "cancel" else LeaseState.KILLED
        reason = EndReason.CANCELLED if action == "cancel" else EndReason.KILLED
        ended = replace(lease, state=ended_state, end_reason=reason, ended_at=now)
        return ended, f"lease.{ended_state.value}"
    if action == "cancel":
        if state is LeaseState.CANCELLING:
            return None
        return replace(lease, state=LeaseState.CANCELLING, revoke=Revoke.CANCEL), "lease.cancelling"
    if action == "kill":
        if lease.revoke is Revoke.KILL:
            return None
        return replace(lease, state=LeaseState.CANCELLING, revoke=Revoke.KILL), "lease.killing"
    if action == "pause":
        if state is LeaseState.PAUSED:
            return None
        if state is not LeaseState.RUNNING:
            raise InvalidTransition(f"lease {lease.id} is {state}; only a running lease pauses")
        return replace(lease, state=LeaseState.PAUSED, revoke=Revoke.PAUSE), "lease.paused"
    if action == "resume":
        if state is LeaseState.RUNNING:
            return None
        if state is not LeaseState.PAUSED:
            raise InvalidTransition(f"lease {lease.id} is {state}; only a paused lease resumes")
        return replace(lease, state=LeaseState.RUNNING, revoke=None), "lease.resumed"
    raise ValueError(action)


def _over(seen: Lease, new: Lease) -> LeaseWrite:
    """Replace the row `seen` with `new`: fenced on its state and fence, and on its version and
    deadline so that no transition or heartbeat landing in between is overwritten."""
    return LeaseWrite(new, expect=(seen.state, seen.fence), seen=seen)


def _moved(old: Lease, new: Lease, event_type: str, data: dict[str, Any], now: int) -> Lease:
    """Mark `new` as the next version of `old`, naming the transition for the timeline."""
    return replace(
        new,
        version=old.version + 1,
        event_type=event_type,
        event_data=data,
        updated_at=now,
        # An ended lease leaves the sweeper's index: the row drops due_at, so does the answer.
        due_at=None if new.state.terminal else new.due_at,
    )


def _revoke_signal(lease: Lease) -> Revoke | None:
    if lease.state is LeaseState.PAUSED:
        return Revoke.PAUSE
    if lease.state is LeaseState.CANCELLING:
        return lease.revoke or Revoke.CANCEL
    return None


def _event_summary(event: Event) -> dict[str, Any]:
    return {"type": event.type, "at": event.at, "lease_id": event.lease_id, "fence": event.fence}


_ENDINGS = {"lease.completed", "lease.failed", "lease.cancelled", "lease.killed", "lease.lost"}


def _prior_attempts(events: list[Event], current_lease_id: str) -> list[dict[str, Any]]:
    return [
        {
            "lease_id": e.lease_id,
            "fence": e.fence,
            "ended": e.type.removeprefix("lease."),
            "at": e.at,
            "outcome": e.data.get("outcome"),
            "error": e.data.get("error"),
        }
        for e in events
        if e.type in _ENDINGS | {"lease.released"} and e.lease_id != current_lease_id
    ]


__all__ = ["HELD", "Beat", "Claimed", "LeaseService", "TaskView", "WorkerView"]
