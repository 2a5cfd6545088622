"""Event waits: a task blocked until a named event with a key arrives (`kind: "event"`
blocks), and the signal that clears them (`POST /events {space, name, key, data?}`).

The protocol, and why it never leaves a block waiting for an event that came:

* placing: (1) write the wait row in the signal's partition, (2) commit the block on the task
  row, (3) read the signal's kept event; one kept within the instance's `event_ttl_seconds`
  clears the block at once.
* sending: (1) keep the event (one row, TTL), (2) read the signal's waits (consistent, bounded
  pages) and clear each open block among them, deleting each wait row as it is handled.

A placement whose step 3 finds no event began that read before the event was kept, so the
sender's read of the waits began after the wait row was written and finds it. If the block
itself is not committed yet when the sender looks, the sender's read of the task came before
that commit, hence before step 3, which then sees the kept event. Both sides may clear the
same block: each clear is a conditional write of the task row on its version, so exactly one
lands and records `task.event_received`, the other finds the block closed.

One request clears at most PAGES_PER_REQUEST pages of PAGE waits; past that it hands on: the
next clear it makes carries `more`, and the reactor, seeing that task row change, clears the
next pages the same way, until the partition is empty.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tenure.app.autonomy.blocks import BLOCK_TRIES, EventWait, block_out
from tenure.app.rows import EventWaitRows, TaskRows
from tenure.domain import authz, documents, fencing
from tenure.domain.errors import Conflict, LeaseTokenMismatch, Unavailable, ValidationFailed
from tenure.domain.events import TASK_EVENT_RECEIVED
from tenure.domain.fencing import iso_ms
from tenure.domain.model import Event, KeptEvent, Principal

if TYPE_CHECKING:
    from tenure.app.autonomy.blocks import Blocks
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.domain.events import TaskMoved

MAX_NAME_CHARS = 128
MAX_DATA_BYTES = 65_536
# Waits cleared per page (one consistent Query of the signal's partition), and pages per
# request or per reactor invocation: at most 100 blocks cleared in one call.
PAGE = 25
PAGES_PER_REQUEST = 4
# Orphan waits (a placement that failed after its wait row) are deleted without a write on
# any task; a hand-off looks this many pages ahead for a block to carry `more` on.
HANDOFF_PAGES = 40
EVENTS_IN_PAYLOAD = 20


def check_signal(name: str, key: str) -> None:
    for field, value in (("name", name), ("key", key)):
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME_CHARS:
            raise ValidationFailed(f"{field}: 1 to {MAX_NAME_CHARS} characters")


def received(events: list[Event]) -> list[dict[str, Any]]:
    """A payload's `events`: the task's last EVENTS_IN_PAYLOAD received, oldest first, from
    the timeline the payload already read."""
    got = [e.data.get("event") for e in events if e.type == TASK_EVENT_RECEIVED]
    return [dict(g) for g in got if isinstance(g, dict)][-EVENTS_IN_PAYLOAD:]


class EventWaits:
    def __init__(
        self, kernel: Kernel, blocks: Blocks, *, event_waits: EventWaitRows, tasks: TaskRows
    ) -> None:
        self.blocks = blocks
        self.kernel = kernel
        self.event_waits = event_waits
        self.tasks = tasks

    # ---------------------------------------------------------------- waiting

    def block(
        self,
        actor: Principal,
        task_id: str,
        kind: str,
        reason: str | None,
        expires_in_seconds: int | None = None,
        event: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Any block, as `POST /tasks/{id}/blocks` and the MCP block tools take it: an `event`
        block waits here, the others are placed as typed blocks."""
        if kind == "event":
            if event is None or key is None:
                raise ValidationFailed("event and key: an event block names both")
            return self.place(actor, task_id, event, key, reason)
        if reason is None:
            raise ValidationFailed("reason: required")
        return self.blocks.block_task(actor, task_id, kind, reason, expires_in_seconds)

    def place(
        self, actor: Principal, task_id: str, name: str, key: str, reason: str | None
    ) -> dict[str, Any]:
        """Block the task until (name, key) is signalled in its space (or was, within the
        instance's event_ttl_seconds before)."""
        check_signal(name, key)
        fencing.refuse_token_fields({"event": name, "key": key})
        task = self.blocks.task_for_block(actor, task_id)
        wait = EventWait(name, key, self.kernel.ids.new_id("blk"))
        self.event_waits.put_event_wait(task.space, name, key, task.id, wait.block_id)
        block = self.blocks.block_task(
            actor, task_id, "event", reason or f"waiting for event {name}", wait=wait
        )
        kept = self.event_waits.kept_event(task.space, name, key)
        if kept is None or kept.expires_at <= self.kernel.clock.now_ms():
            return block
        # The event came first (or at the same moment): the block is cleared as placed.
        self._clear(task.id, wait.block_id, kept, more=False)
        self._drop(kept, task.id, wait.block_id)
        now = self.kernel.clock.now_ms()
        return block_out((self.kernel.task(task.id).blocks or {}).get(wait.block_id, block), now)

    # ---------------------------------------------------------------- signalling

    def send(self, actor: Principal, space: str, name: str, key: str, data: Any) -> int:
        """Keep the event and clear every block of the space waiting for it; the number this
        request cleared (the rest, past PAGES_PER_REQUEST pages, clear in the background)."""
        self._may_signal(actor, space)
        check_signal(name, key)
        fencing.refuse_token_fields({"name": name, "key": key})
        if len(json.dumps(data, separators=(",", ":")).encode()) > MAX_DATA_BYTES:
            raise ValidationFailed(f"data: at most {MAX_DATA_BYTES} bytes of JSON")
        # Kept on a row and copied into each cleared block: what the table cannot store would
        # fail every block placed for it later, not this request.
        wrong = documents.unstorable_at_any_size(data, "data")
        if wrong:
            raise ValidationFailed(f"data: {wrong}")
        # Kept, written to each task's timeline and handed to its payloads: never a token.
        fencing.refuse_tokens(data, "data")
        self.kernel.catalog.space(space)
        now = self.kernel.clock.now_ms()
        ttl = self.kernel.catalog.fresh_instance().event_ttl_seconds
        kept = KeptEvent(space, name, key, now, now + ttl * 1000, data, actor.token_id)
        self.event_waits.put_kept_event(kept)
        self.kernel.counters["events_sent"] += 1
        return self._clear_pages(kept, PAGES_PER_REQUEST)

    def on_task(self, moved: TaskMoved, context: Context) -> None:
        """The reactor's hand-on: a clear that carried `more` continues with the next pages
        (a replayed record finds those waits gone, or their blocks closed)."""
        new = moved.task
        if new.event_type != TASK_EVENT_RECEIVED:
            return
        data = new.event_data or {}
        event = data.get("event")
        if not data.get("more") or not isinstance(event, dict):
            return
        kept = KeptEvent(
            space=new.space,
            name=str(event["name"]),
            key=str(event["key"]),
            at=int(data["at_ms"]),
            expires_at=0,
            data=event.get("data"),
            by=str(data.get("by") or ""),
        )
        self._clear_pages(kept, PAGES_PER_REQUEST)

    def _may_signal(self, actor: Principal, space: str) -> None:
        if actor.kind == "lease":
            lease = self.kernel.owned.acting_lease(actor)
            if lease.space != space:
                raise LeaseTokenMismatch("a lease token signals only in its own lease's space")
            return
        authz.require_operator(actor, "member", space)

    def _clear_pages(self, kept: KeptEvent, pages: int) -> int:
        cleared = 0
        for _ in range(pages):
            waits = self.event_waits.event_waits(kept.space, kept.name, kept.key, PAGE)
            if not waits:
                return cleared
            for task_id, block_id in waits:
                cleared += self._clear(task_id, block_id, kept, more=False)
                self._drop(kept, task_id, block_id)
        # Past this call's pages: the next clear that lands carries `more`.
        for _ in range(HANDOFF_PAGES):
            waits = self.event_waits.event_waits(kept.space, kept.name, kept.key, PAGE)
            if not waits:
                return cleared
            for task_id, block_id in waits:
                landed = self._clear(task_id, block_id, kept, more=True)
                self._drop(kept, task_id, block_id)
                if landed:
                    return cleared + 1
        self.kernel.counters["event_waits_orphaned"] += 1
        return cleared

    def _drop(self, kept: KeptEvent, task_id: str, block_id: str) -> None:
        self.event_waits.drop_event_wait(kept.space, kept.name, kept.key, task_id, block_id)

    def _clear(self, task_id: str, block_id: str, kept: KeptEvent, more: bool) -> bool:
        """Clear the block if it is still open and waits for this signal; True when this
        call's write closed it (exactly one caller's does)."""
        for _ in range(BLOCK_TRIES):
            task = self.tasks.get_task(task_id)
            block = (task.blocks or {}).get(block_id) if task is not None else None
            if task is None or block is None or task.space != kept.space:
                return False  # not placed (yet, or ever): its placement sees the kept event
            if block.get("state") != "open" or block.get("kind") != "event":
                return False
            if (block.get("event"), block.get("key")) != (kept.name, kept.key):
                return False
            now = self.kernel.clock.now_ms()
            closed = {**block, "state": "cleared", "closed_at": now, "closed_by": "event"}
            event = {"name": kept.name, "key": kept.key, "data": kept.data, "at": iso_ms(kept.at)}
            extra: dict[str, Any] = {"event": event, "at_ms": kept.at}
            if more:
                extra["more"] = True
            try:
                task = self.blocks.close(
                    task, [closed], TASK_EVENT_RECEIVED, kept.by or "", None, extra
                )
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                continue
            self.kernel.counters["event_blocks_cleared"] += 1
            self.blocks.resume_if_ready(task)
            return True
        raise Unavailable(f"task {task_id} kept changing; send the event again", retry_after=1)
