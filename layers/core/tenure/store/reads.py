"""The bounded, paged reads of the DynamoDB store: the operator's lease list, a pool's workers,
a subject's timeline. Each call reads a bounded number of items and hands back one cursor
codec's cursor (store.cursors); the contract tests hold the fake to the same pages."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tenure.app.ports import (
    LIST_SCAN_BUDGET,
    TIMELINE_CAP,
    WORKER_SCAN_BUDGET,
    WORKERS_CAP,
    EventPage,
    LeasePage,
    TaskEntry,
    TaskPage,
    WorkerPage,
)
from tenure.domain.model import Event, Lease, Worker, first_job_id
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.timeline import derived_reclaim, first_lease_id, stamped_events
from tenure.store import codec, conditions, cursors, expressions, items, keys
from tenure.store.table import Table

# Anchors read beyond what a page's bound needs, on each side of its cursor (see _anchors).
ANCHOR_SLACK = 2
# The rows a task timeline's newest page looks at first, both prefixes in one Query
# (_first_look): few enough to stay within one 4 KB read, the least a Query is billed.
FIRST_LOOK_ROWS = 10


class PagedReads:
    """The store's paged reads, on the table's metered, retried primitives."""

    def __init__(self, rows: Table) -> None:
        self.rows = rows

    # Per-call page budgets (app/ports.py); a store may lower them (the contract tests do).
    list_budget = LIST_SCAN_BUDGET
    worker_budget = WORKER_SCAN_BUDGET
    timeline_cap = TIMELINE_CAP

    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        return self.worker_page(pool, limit, None, now_ms).workers

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        kind, shape = keys.WORKER_CURSOR
        start = keys.worker_start(pool, cursors.decode(cursor, kind, shape)) if cursor else None
        now_s = (time.time_ns() // 1_000_000 if now_ms is None else now_ms) // 1000
        found: list[dict[str, Any]] = []
        examined = 0
        while True:
            # One more than the page, to know whether anything follows it.
            size = min(limit + 1 - len(found), self.worker_budget - examined)
            request: dict[str, Any] = {
                "KeyConditionExpression": expressions.IN_PARTITION,
                "FilterExpression": conditions.NOT_EXPIRED,
                "ExpressionAttributeValues": codec.values(pk=keys.workers_pk(pool), now=now_s),
                "Limit": size,
            }
            if start:
                request["ExclusiveStartKey"] = codec.dump(start)
            out = self.rows.query(**request)
            examined += int(out.get("ScannedCount", 0))
            found.extend(codec.load(r) for r in out.get("Items", []))
            end = out.get("LastEvaluatedKey")
            if len(found) > limit:
                return WorkerPage(
                    [items.worker_from(r) for r in found[:limit]],
                    cursors.encode(kind, str(found[limit - 1][keys.SK])),
                )
            if not end:
                return WorkerPage([items.worker_from(r) for r in found], None)
            start = codec.load(end)
            if examined >= self.worker_budget:
                return WorkerPage(
                    [items.worker_from(r) for r in found], cursors.encode(kind, str(start[keys.SK]))
                )

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        """Newest first, examining at most about `list_budget` index entries (and reading at
        most as many lease rows, eventually consistent like the indexes) per call.

        A lease is listed through one of two KEYS_ONLY indexes, never both: its own by_space
        entry, or (a task's first lease made with its task, `via_task`) its task's
        tasks_by_space entry, which sits at the lease's own place in the list (keys.
        first_lease_position). Each round reads both down from where the last one stopped
        and merges them: everything at or above the higher of the two places where a source
        was cut short is complete, so it is looked at in order, and the rest is read again
        next round. A filter is applied to the rows read by key. The cursor resumes right
        after the last lease listed or the last place looked at: a filtered page may hold
        fewer than `limit` leases (even none) and still carry a cursor; it is null only once
        both indexes have nothing further.

        `subjects` keeps the leases of those subject kinds. Without the task kind, only the
        by_space index is read: every tasks_by_space entry stands for a task's lease, so the
        leases of a workflow or a space are not read past the (usually far more) leases that
        tasks were filed with.
        """
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        kind, shape = keys.LEASE_CURSOR
        below = cursors.decode_in(cursor, kind, shape, space) if cursor else None
        filtered = state is not None or pool is not None or subjects is not None
        found: list[tuple[str, Lease]] = []
        read = 0
        # Which may hold more below.
        sources = {
            keys.SPACE_INDEX: True,
            keys.TASKS_INDEX: subjects is None or SubjectKind.TASK in subjects,
        }
        while True:
            # One more than the page, to learn whether anything follows; filtered, read
            # ahead in chunks. The budget is shared by the sources still read.
            want = limit + 1 - len(found)
            room = max(1, (self.list_budget - read) // sum(sources.values()))
            size = min(want if not filtered else max(want, 50), room)
            rounds = {
                index: self._list_entries(index, space, below, size)
                for index, live in sources.items()
                if live
            }
            # Places below the higher of the places where a source was cut are not all read.
            cuts = [rows[-1][0] for rows, cut in rounds.values() if cut]
            floor = max(cuts) if cuts else None
            places: list[tuple[str, str, bool]] = []  # (place, lease id, through its task)
            for index, (rows, cut) in rounds.items():
                read += len(rows)
                places.extend(rows)
                # A source read to its end, all of it looked at now, holds nothing more.
                sources[index] = cut or bool(floor and rows and rows[-1][0] < floor)
            ready = sorted((p for p in places if floor is None or p[0] >= floor), reverse=True)
            leases = self._leases_of([p[1] for p in ready])
            for place, lease_id, through_task in ready:
                lease = leases.get(lease_id)
                # Not there to read any more; or a first lease made before it was listed
                # through its task, which its own entry lists.
                if lease is None or bool(lease.via_task) is not through_task:
                    continue
                if _kept(lease, state, pool, subjects):
                    found.append((place, lease))
                if len(found) > limit:
                    return LeasePage(
                        [x for _, x in found[:limit]],
                        cursors.encode_in(kind, space, found[limit - 1][0]),
                    )
            if floor is None:
                return LeasePage([x for _, x in found], None)
            below = floor
            if read >= self.list_budget:
                return LeasePage([x for _, x in found], cursors.encode_in(kind, space, floor))

    def _leases_of(self, ids: list[str]) -> dict[str, Lease]:
        """The lease rows of these ids, by id: one batched read, eventually consistent."""
        rows = self.rows.batch_get([keys.lease_key(i) for i in dict.fromkeys(ids)], False)
        return {lease.id: lease for lease in map(items.lease_from, rows)}

    def _list_entries(
        self, index: str, space: str, below: str | None, size: int
    ) -> tuple[list[tuple[str, str, bool]], bool]:
        """Up to `size` entries of the space's lease list in one of its two indexes, newest
        first, below the list position `below`: (position, lease id, through its task) each;
        and whether the read was cut short (more may follow)."""
        tasks = index == keys.TASKS_INDEX
        pk, sk = (keys.TASKS_PK, keys.TASKS_SK) if tasks else (keys.SPACE_PK, keys.SPACE_SK)
        partition = keys.task_list_pk(space) if tasks else keys.space_list_pk(space)
        condition = f"{pk} = :s"
        values: dict[str, Any] = {"s": partition}
        if below is not None:
            condition += f" AND {sk} < :below"
            values["below"] = keys.task_list_bound(below) if tasks else below
        out = self.rows.query(
            IndexName=index,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=codec.values(**values),
            ScanIndexForward=False,
            Limit=size,
        )
        entries = [codec.load(row) for row in out.get("Items", [])]
        if tasks:
            found = [
                (
                    keys.first_lease_position(str(e[sk])),
                    first_lease_id(keys.task_id_of(e)),
                    True,
                )
                for e in entries
            ]
        else:
            found = [(str(e[sk]), keys.lease_id_of(e), False) for e in entries]
        return found, bool(out.get("LastEvaluatedKey")) and bool(found)

    def task_page(self, space: str, limit: int, cursor: str | None) -> TaskPage:
        """One Query of `limit` + 1 tasks_by_space entries (KEYS_ONLY), then the rows by key in
        three batched rounds: tasks with their graph rows, their latest jobs, those jobs'
        leases. At most 4 x `limit` + 1 items, eventually consistent like the index."""
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        kind, shape = keys.TASK_CURSOR
        request: dict[str, Any] = {
            "IndexName": keys.TASKS_INDEX,
            "KeyConditionExpression": expressions.TASKS_OF_SPACE,
            "ExpressionAttributeValues": codec.values(s=keys.task_list_pk(space)),
            "ScanIndexForward": False,
            "Limit": limit + 1,  # one more, to know whether anything follows
        }
        if cursor:
            start = keys.task_list_start(space, cursors.decode(cursor, kind, shape))
            request["ExclusiveStartKey"] = codec.dump(start)
        out = self.rows.query(**request)
        entries = [codec.load(row) for row in out.get("Items", [])]
        more = len(entries) > limit or bool(entries and out.get("LastEvaluatedKey"))
        entries = entries[:limit]
        ids = [keys.task_id_of(e) for e in entries]
        rows = self.rows.batch_get(
            [key for t in ids for key in (keys.task_key(t), keys.task_graph_key(t))], False
        )
        graphs = {keys.task_id_of(r): r for r in rows if r[keys.SK] == keys.GRAPH_SK}
        tasks = {
            keys.task_id_of(r): items.task_from(r) for r in rows if r[keys.SK] != keys.GRAPH_SK
        }
        jobs = {
            str(r["id"]): str(r["lease_id"])
            for r in self.rows.batch_get(
                [keys.job_key(t.job_id) for t in tasks.values() if t.job_id], False
            )
        }
        # A task's first job may have no row yet: its lease is the task's first.
        for filed in tasks.values():
            job_id = filed.job_id
            if job_id and job_id not in jobs and job_id == first_job_id(filed.id):
                jobs[job_id] = first_lease_id(filed.id)
        wanted = list(jobs.values())
        leases = {
            lease.id: lease
            for lease in map(
                items.lease_from,
                self.rows.batch_get([keys.lease_key(x) for x in wanted], False),
            )
        }
        found: list[TaskEntry] = []
        for task_id, entry in zip(ids, entries, strict=True):
            task = tasks.get(task_id)
            if task is None:
                continue  # not there to read any more
            lease_id = jobs.get(task.job_id or "")
            found.append(
                TaskEntry(
                    task=task,
                    graph=items.graph_from(task_id, graphs.get(task_id, {})),
                    lease=leases.get(lease_id) if lease_id else None,
                    cursor=cursors.encode(kind, str(entry[keys.TASKS_SK])),
                )
            )
        last = cursors.encode(kind, str(entries[-1][keys.TASKS_SK])) if entries else None
        return TaskPage(found, last if more else None)

    def timeline(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int | None,
        held: Sequence[Lease] = (),
    ) -> list[Event]:
        """The newest `limit` events (None: the newest TIMELINE_CAP), oldest first. `held`:
        lease rows the caller has in hand (the row a claim just wrote, the row a report read
        consistently); their stamps are taken from them, not from a read of them again."""
        want = self.timeline_cap if limit is None else min(limit, self.timeline_cap)
        newest: list[Event] = []
        cursor: str | None = None
        while len(newest) < want:
            page = self.timeline_page(
                subject_kind, subject_id, want - len(newest), cursor, newest_first=True, held=held
            )
            newest.extend(page.events)
            cursor = page.next_cursor
            if cursor is None:
                break
        return newest[::-1]

    def timeline_page(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int,
        cursor: str | None,
        newest_first: bool = False,
        held: Sequence[Lease] = (),
        reclaimed: Callable[[Lease], int | None] | None = None,
    ) -> EventPage:
        """Up to `limit` events after `cursor`: the subject's event rows, and on a task's
        timeline also the events its leases hold as stamps (domain/timeline.py), found by
        their anchors (and the task's first lease by its id). A task's leases follow one
        another, so the leases whose events can fall on this page are the `limit` + 2 anchors
        next to the cursor (and, oldest first, the one lease the cursor falls inside), and the
        first lease: the page reads a bounded number of items. A lease in `held` (a row the
        caller read or wrote in this request) is not read again. With `reclaimed`, a lease
        that ended with nothing to delete also shows its derived `lease.reclaimed`, dated its
        pool's retention after its end: always for the first lease (read on every page); for
        a later one, on the pages its anchor is read for."""
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        kind, shape = keys.EVENT_CURSOR
        pk = keys.timeline_pk(subject_kind, subject_id)
        start = cursors.decode(cursor, kind, shape) if cursor else None
        first_look = (
            self._first_look(pk, limit + 1, limit + 2)
            if subject_kind == SubjectKind.TASK and start is None and newest_first
            else (None, None)
        )
        events_read, anchors_read = first_look
        found, horizon = (
            (events_read, None)
            if events_read is not None
            else self._event_rows(pk, start, limit + 1, newest_first)
        )
        if subject_kind == SubjectKind.TASK:
            anchors, anchors_horizon = (
                (anchors_read, None)
                if anchors_read is not None
                else self._anchors(pk, start, limit + 2, newest_first)
            )
            horizon = _nearest(horizon, anchors_horizon, newest_first)
            # The task's first lease, when it was made with the task, has no anchor: it is
            # read by its id (domain/timeline.py first_lease_id), on every page — one item more.
            named = dict.fromkeys(
                [first_lease_id(subject_id), *(a.lease_id for a in anchors if a.lease_id)]
            )
            in_hand = {lease.id: lease for lease in held if lease.id in named}
            unread = [keys.lease_key(i) for i in named if i not in in_hand]
            leases = self.rows.batch_get(unread, consistent=False) if unread else []
            for event in anchors:
                found.setdefault(keys.event_sk(event.at, event.id), event)
            for lease in [*in_hand.values(), *map(items.lease_from, leases)]:
                for event in stamped_events(lease):  # a row of the same event wins
                    found.setdefault(keys.event_sk(event.at, event.id), event)
                derived = derived_reclaim(lease, reclaimed(lease)) if reclaimed else None
                if derived is not None:
                    found.setdefault(keys.event_sk(derived.at, derived.id), derived)
        beyond = sorted(
            (sk for sk in found if start is None or (sk < start if newest_first else sk > start)),
            reverse=newest_first,
        )
        if horizon is not None:
            # A 1 MB cut: nothing past the last row read may go on this page, or the rows
            # between it and them would never be shown. The next page starts there.
            beyond = [sk for sk in beyond if (sk >= horizon if newest_first else sk <= horizon)]
        page = beyond[:limit]
        events = [found[sk] for sk in page]
        if page and (len(beyond) > limit or horizon is not None):
            return EventPage(events, cursors.encode(kind, page[-1]))
        return EventPage(events, None)

    def _event_rows(
        self, pk: str, start: str | None, want: int, newest_first: bool
    ) -> tuple[dict[str, Event], str | None]:
        """Up to `want` event rows after `start`, by sort key; and, when a 1 MB cut left
        some unread, the sort key of the last row read (None when none were left)."""
        request: dict[str, Any] = {
            "KeyConditionExpression": expressions.EVENTS_OF,
            "ExpressionAttributeValues": codec.values(pk=pk, ev=keys.EVENT_PREFIX),
            "ScanIndexForward": not newest_first,
            "Limit": want,
        }
        if start:
            request["ExclusiveStartKey"] = codec.dump({keys.PK: pk, keys.SK: start})
        out = self.rows.query(**request)
        rows = [codec.load(r) for r in out.get("Items", [])]
        cut = bool(out.get("LastEvaluatedKey")) and len(rows) < want
        horizon = str(rows[-1][keys.SK]) if cut and rows else None
        return {str(r[keys.SK]): items.event_from(r) for r in rows}, horizon

    def _first_look(
        self, pk: str, want: int, leases: int
    ) -> tuple[dict[str, Event] | None, list[Event] | None]:
        """A task timeline's newest page: its event rows and its anchors as _event_rows and
        _anchors read them from no cursor, newest first, from one Query of the first
        FIRST_LOOK_ROWS rows of both prefixes; None for a prefix that Query cannot answer,
        which is then read by its own. Anchors sort after events, so newest first they come
        first: once an event row is read, every anchor was. A new task's timeline (no rows
        at all) is one Query, not two, and a longer one costs what it did."""
        anchors_wanted = leases + ANCHOR_SLACK
        out = self.rows.query(
            KeyConditionExpression=expressions.BETWEEN_LOW_AND_HIGH,
            ExpressionAttributeValues=codec.values(
                pk=pk, low=keys.EVENT_PREFIX, high=keys.ANCHOR_PREFIX + "~"
            ),
            ScanIndexForward=False,
            Limit=min(FIRST_LOOK_ROWS, want + anchors_wanted),
        )
        rows = [codec.load(r) for r in out.get("Items", [])]
        whole = not out.get("LastEvaluatedKey")
        event_rows = [r for r in rows if str(r[keys.SK]).startswith(keys.EVENT_PREFIX)]
        anchor_rows = [r for r in rows if str(r[keys.SK]).startswith(keys.ANCHOR_PREFIX)]
        events = (
            {str(r[keys.SK]): items.event_from(r) for r in event_rows[:want]}
            if whole or len(event_rows) >= want
            else None
        )
        anchors = (
            [items.event_from(r) for r in anchor_rows[:anchors_wanted]]
            if whole or event_rows or len(anchor_rows) >= anchors_wanted
            else None
        )
        return events, anchors

    def _anchors(
        self, pk: str, start: str | None, want: int, newest_first: bool
    ) -> tuple[list[Event], str | None]:
        """The anchors (each lease's first event) of the leases that can have events after
        `start`: newest first, the `want` leases created last at or before it; oldest first,
        the leases created last at or before it (the cursor may fall inside the life of the
        last of them) and the `want` created after it. ANCHOR_SLACK more on each side: two
        instances' clocks may disagree by a few milliseconds, so a lease's successor can be
        stamped a little before its last event. With the anchors, the event sort key past
        which a 1 MB cut left leases unread (None when none were left)."""
        top = keys.ANCHOR_PREFIX + "~"  # after every anchor: '~' sorts after the digits
        at = keys.ANCHOR_PREFIX + start.removeprefix(keys.EVENT_PREFIX) if start else None
        if newest_first:
            spans = [(keys.ANCHOR_PREFIX, at or top, False, want + ANCHOR_SLACK)]
        elif at is None:
            spans = [(keys.ANCHOR_PREFIX, top, True, want + ANCHOR_SLACK)]
        else:
            spans = [
                (keys.ANCHOR_PREFIX, at, False, 1 + ANCHOR_SLACK),
                (at, top, True, want + ANCHOR_SLACK),
            ]
        found: list[Event] = []
        horizon: str | None = None
        for low, high, forward, limit in spans:
            out = self.rows.query(
                KeyConditionExpression=expressions.BETWEEN_LOW_AND_HIGH,
                ExpressionAttributeValues=codec.values(pk=pk, low=low, high=high),
                ScanIndexForward=forward,
                Limit=limit,
            )
            rows = [codec.load(r) for r in out.get("Items", [])]
            # A span read the page's way and cut short of its limit: later leases are unread.
            if forward != newest_first and out.get("LastEvaluatedKey") and 0 < len(rows) < limit:
                last = str(rows[-1][keys.SK])
                horizon = keys.EVENT_PREFIX + last.removeprefix(keys.ANCHOR_PREFIX)
            found.extend(items.event_from(r) for r in rows)
        return found, horizon


def _nearest(one: str | None, other: str | None, newest_first: bool) -> str | None:
    """Of two horizons (sort keys a page may not go past), the one nearer the cursor."""
    if one is None or other is None:
        return one or other
    return max(one, other) if newest_first else min(one, other)


def _kept(
    lease: Lease,
    state: LeaseState | None,
    pool: str | None,
    subjects: frozenset[SubjectKind] | None,
) -> bool:
    """Whether a lease read for a list passes its filters (None: not filtered on)."""
    return (
        (state is None or lease.state is state)
        and (pool is None or lease.pool == pool)
        and (subjects is None or lease.subject_kind in subjects)
    )
