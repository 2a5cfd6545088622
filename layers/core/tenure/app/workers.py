"""Worker liveness: when a worker was last heard from, and whether it reads reachable."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app.rows import LeaseRows, QueueRows, WorkerRows
from tenure.domain import authz
from tenure.domain.model import Lease, Pool, Principal, Worker
from tenure.domain.states import REPORTABLE
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# The most a stored last_seen may lag a worker's real last contact, as a share of its pool's
# grace: `reachable` adds it before judging, so a worker never reads unreachable early. Claims
# and the worker heartbeat (the SDK's way to renew) write last_seen once it is this old —
# with 10 s renewals and a 50 s grace, once every third heartbeat.
SEEN_LAG_SHARE = 0.5
# A single lease's heartbeat writes it sooner, at this share, so that it can wait a beat
# (until SEEN_LAG_SHARE) when the same heartbeat wrote the lease's deadline: one write per
# heartbeat at most.
SEEN_WRITE_SHARE = 0.25
# How many workers (and their held leases) one GET /workers reads at most.
WORKERS_PAGE = 200
HELD_PAGE = 500
# How many workers' rows a process keeps to judge heartbeats without a read.
SEEN_KEPT = 4096


def reachable(worker: Worker, pool: Pool, now: int) -> bool:
    """Reachable unless not heard from for the pool's grace.

    The stored last_seen lags the worker's real last contact by less than SEEN_LAG_SHARE of
    grace, so that lag is added before judging: a worker never reads unreachable early. It
    reads unreachable between 1.0 and 1.5 graces after its last contact."""
    return now - worker.last_seen <= pool.grace_seconds * 1000 * (1 + SEEN_LAG_SHARE)


def unreachable_since(workers: list[Worker], pool: Pool) -> int | None:
    """When the last of a pool's `workers`, none of them reachable now, stopped reading
    reachable: when the pool last had a reachable worker (None: no row says it had one; rows
    are kept a day past their worker's last contact)."""
    grace = pool.grace_seconds * 1000 * (1 + SEEN_LAG_SHARE)
    return max((int(w.last_seen + grace) for w in workers), default=None)


def _said(runtime: dict[str, Any] | None, credentials: dict[str, Any] | None) -> dict[str, Any]:
    """The words a worker said this time (a None one it did not say)."""
    words = {"runtime": runtime, "credentials": credentials}
    return {name: value for name, value in words.items() if value is not None}


@record
class WorkerView:
    worker: Worker
    reachable: bool
    leases: list[Lease]


class Workers:
    """Worker liveness: the last-seen rows (written at most once per grace), what a worker
    says about its runtime and credentials, and the worker list."""

    def __init__(
        self, kernel: Kernel, *, leases: LeaseRows, queues: QueueRows, workers: WorkerRows
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.queues = queues
        self.workers = workers
        # The rows this process last read or wrote, so a heartbeat judges without a read: the
        # most recent SEEN_KEPT only, since a token may claim with any number of new worker
        # ids (forgetting one costs one read the next time it is heard from).
        self._seen: OrderedDict[tuple[str, str], Worker] = OrderedDict()

    def list_workers(self, actor: Principal, pool_name: str) -> list[WorkerView]:
        return self.worker_page(actor, pool_name, WORKERS_PAGE, None)[0]

    def worker_page(
        self, actor: Principal, pool_name: str, limit: int, cursor: str | None
    ) -> tuple[list[WorkerView], str | None]:
        """One page of the pool's workers by worker_id (at most `limit`, WORKERS_PAGE at
        most), each with the leases it holds, and where the next page starts (None after
        the last)."""
        authz.require_role(actor, "read")
        pool = self.kernel.catalog.pool(pool_name)
        authz.require_operator(actor, "read", pool.space)
        now = self.kernel.clock.now_ms()
        held = self.leases.get_leases(self.queues.due_leases(pool.name, None, limit=HELD_PAGE))
        by_worker: dict[str, list[Lease]] = {}
        for lease in sorted(held.values(), key=lambda x: x.created_at):
            if lease.worker_id and lease.state in REPORTABLE:
                by_worker.setdefault(lease.worker_id, []).append(lease)
        page = self.workers.worker_page(
            pool.name, max(1, min(limit, WORKERS_PAGE)), cursor, now_ms=now
        )
        views = [
            WorkerView(
                worker=w,
                reachable=reachable(w, pool, now),
                leases=by_worker.get(w.worker_id, []),
            )
            for w in sorted(page.workers, key=lambda w: w.worker_id)
        ]
        return views, page.next_cursor

    def mark_seen(
        self,
        pool: Pool,
        worker_id: str,
        version: str | None,
        share: float = SEEN_LAG_SHARE,
        runtime: dict[str, Any] | None = None,
        credentials: dict[str, Any] | None = None,
    ) -> None:
        """Note that the worker was heard from, running `version`. `runtime` / `credentials`
        are what it says of them (None: it said nothing, the stored word stands). A word is
        judged against the table's row, not this process's copy, since another process may
        have stored a newer one: a word different from the row's is written at once, so is a
        new version; otherwise the write waits until the stored last_seen is `share` of the
        pool's grace old (at most SEEN_LAG_SHARE), so a heartbeat that says the same as before
        costs nothing more than that read."""
        said = {"worker_version": version, **_said(runtime, credentials)}
        self._hear(pool, worker_id, said, share)

    def worker_says(
        self,
        pool: Pool,
        worker_id: str,
        runtime: dict[str, Any] | None,
        credentials: dict[str, Any] | None,
    ) -> None:
        """A worker heartbeat naming a pool it holds nothing in: how its runtime and its
        credentials stand there (when every reachable worker of a pool refuses, its queued
        leases say so), and a sign of life. It does not say the worker's version: the stored
        one stands."""
        self._hear(pool, worker_id, _said(runtime, credentials), SEEN_LAG_SHARE)

    def _hear(self, pool: Pool, worker_id: str, said: dict[str, Any], share: float) -> None:
        """The write of what the worker `said` (its version, its words), and that it was heard
        now: only those, every other field as stored, so nothing is written back from a copy.
        Skipped while the row already says it all and its last_seen is younger than `share`
        of the pool's grace."""
        now = self.kernel.clock.now_ms()
        window = int(pool.grace_seconds * 1000 * min(share, SEEN_LAG_SHARE))
        key = (pool.name, worker_id)
        words = said.keys() - {"worker_version"}
        known = self._known(key, fresh=bool(words))
        if (
            known is not None
            and now - known.last_seen < window
            and all(getattr(known, name) == value for name, value in said.items())
        ):
            self._remember(key, known)
            return
        heard = Worker(pool=pool.name, worker_id=worker_id, last_seen=now, **said)
        self.workers.note_worker(heard, frozenset(said))
        self._remember(key, replace(known, last_seen=now, **said) if known else heard)

    def _known(self, key: tuple[str, str], fresh: bool) -> Worker | None:
        """The worker's row: this process's copy unless `fresh` (then, and without a copy,
        read from the table)."""
        copy = None if fresh else self._seen.get(key)
        return copy or self.workers.get_worker(*key)

    def _remember(self, key: tuple[str, str], worker: Worker) -> None:
        self._seen[key] = worker
        self._seen.move_to_end(key)
        while len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)
