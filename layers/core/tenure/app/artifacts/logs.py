"""A lease's logs and runtime coordinates: what the job printed, where it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.ports import LogLine, LogPage
from tenure.app.rows import AttachmentRows
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    CeilingReached,
    InvalidTransition,
    ValidationFailed,
)
from tenure.domain.model import Principal

if TYPE_CHECKING:
    from tenure.app.artifacts.artifacts import Artifacts
    from tenure.app.kernel import Kernel

# What one POST of logs may carry; a bigger batch is refused whole (the worker SDK's batches
# stay under both bounds).
MAX_LOG_EVENTS = 1000
MAX_LOG_BYTES = 256 * 1024
# CloudWatch Logs refuses events older than 14 days or more than 2 hours ahead: a timestamp
# outside that window is refused here, by name, rather than dropped there without a word.
MAX_LOG_AGE_MS = 14 * 86_400_000 - 60_000
MAX_LOG_AHEAD_MS = 2 * 3_600_000 - 60_000
# Each container is a log stream of its own (CloudWatch: made with CreateLogStream, whose
# rate every lease of the account and region shares). One POST names at most this many, so a
# request makes at most this many streams...
MAX_BATCH_CONTAINERS = 8
# ... and a lease keeps at most this many, counted on its row (the store's
# count_log_containers): as many as the reads and the reclaim reach (store/logs.py
# MAX_STREAMS), so no line is shipped where nothing would read or delete it.
MAX_LEASE_CONTAINERS = 50
# The (lease, container) pairs one process has counted and shipped to: a warm instance counts
# each once (no write per batch). Bounded: past it they are forgotten, which costs at most one
# more count each.
MAX_CONTAINERS_KEPT = 4096
# One read answers at most this many events (the next page follows with next_cursor).
LOG_PAGE = 1000


class Logs:
    def __init__(
        self, kernel: Kernel, artifacts: Artifacts, *, attachments: AttachmentRows
    ) -> None:
        self.artifacts = artifacts
        self.kernel = kernel
        self.attachments = attachments
        self._counted: set[tuple[str, str]] = set()

    def post_logs(self, actor: Principal, lease_id: str, events: list[dict[str, Any]]) -> int:
        """Store a batch of the job's lines; answers how many were accepted."""
        lease = self.kernel.owned.own_lease(actor, lease_id, authz.SHIP)
        self.artifacts.keeps_logs(lease)
        if self.kernel.catalog.reclaimed_at(lease) is not None:
            raise InvalidTransition(f"lease {lease_id} was reclaimed; it keeps no more logs")
        now = self.kernel.clock.now_ms()
        by_container: dict[str, list[LogLine]] = {}
        redacted = 0
        for i, event in enumerate(events):
            at = event.get("timestamp")
            at = now if at is None else int(at)
            if at < now - MAX_LOG_AGE_MS:
                raise ValidationFailed(f"events[{i}].timestamp: is more than 14 days old")
            if at > now + MAX_LOG_AHEAD_MS:
                raise ValidationFailed(f"events[{i}].timestamp: is more than 2 hours ahead")
            container = str(event.get("container") or "main")
            # A container names a log stream: refused like any other stored name. A message is
            # what the job printed: its tokens are masked, so the rest of the line is kept.
            fencing.refuse_token_fields({f"events[{i}].container": container})
            message, masked = fencing.redact_tokens(str(event["message"]))
            redacted += masked
            line = LogLine(at, container, str(event["stream"]), message)
            by_container.setdefault(container, []).append(line)
        if len(by_container) > MAX_BATCH_CONTAINERS:
            raise ValidationFailed(
                f"events: name {len(by_container)} containers; one batch may name at most "
                f"{MAX_BATCH_CONTAINERS}"
            )
        sink = self.artifacts.sink()
        self.artifacts.keep_detail(lease)  # before the first stream is made
        new = self._count(lease.id, list(by_container))
        accepted = 0
        for container, lines in by_container.items():
            accepted += sink.append(lease.id, container, lines, new=container in new)
            if len(self._counted) >= MAX_CONTAINERS_KEPT:
                self._counted.clear()
            self._counted.add((lease.id, container))
        if redacted:
            self.kernel.counters["log_tokens_redacted"] += redacted
        return accepted

    def _count(self, lease_id: str, containers: list[str]) -> set[str]:
        """Count the batch's containers on the lease (those this process has not counted
        yet): the ones no request had counted before, whose streams are still to be made."""
        unknown = [c for c in containers if (lease_id, c) not in self._counted]
        if not unknown:
            return set()
        try:
            return self.attachments.count_log_containers(lease_id, unknown, MAX_LEASE_CONTAINERS)
        except CeilingReached as full:
            raise ValidationFailed(
                f"events: lease {lease_id} keeps the logs of at most {MAX_LEASE_CONTAINERS} "
                "containers; ship these lines under a container it already has"
            ) from full

    def read_logs(
        self,
        actor: Principal,
        lease_id: str,
        container: str | None = None,
        tail: int | None = None,
        since: int | None = None,
        cursor: str | None = None,
    ) -> LogPage:
        lease = self.artifacts.visible_lease(actor, lease_id)
        self.artifacts.keeps_logs(lease)
        if tail is not None and cursor is not None:
            raise ValidationFailed("cursor: a tail is one page; it cannot be paged on")
        if self.kernel.catalog.reclaimed_at(lease) is not None:
            return LogPage([], False, None)
        return self.artifacts.sink().read(lease.id, container, since, tail, cursor, LOG_PAGE)

    def exec_target(self, actor: Principal, lease_id: str) -> dict[str, Any]:
        """Where a lease runs, and nothing else: no payload, environment, token or hash."""
        authz.require_role(actor, "read")
        lease = self.kernel.lease(lease_id)
        authz.require_operator(actor, "read", lease.space)
        return {
            "lease_id": lease.id,
            "state": lease.state.value,
            "pool": lease.pool,
            "kind": self.kernel.catalog.pool(lease.pool).kind.value,
            "worker_id": lease.worker_id,
            "worker_version": lease.worker_version,
            "claimed_at": lease.claimed_at,
            "host": lease.host,
        }
