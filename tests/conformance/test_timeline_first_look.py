"""A task timeline's newest page, the one a claim's payload reads, looks at its partition with
one Query of both kinds of row (event rows and lease anchors) before it reads either kind on
its own: on DynamoDB Local, a timeline that Query holds whole (a new task's has no row at all)
is read with it alone, and a longer one reads what it did before, to the same page, whatever
the mix of events and anchors and however small the page."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.domain.model import Event
from tenure.store import keys as k
from tenure.store.reads import FIRST_LOOK_ROWS, PagedReads

from tests.conftest import Rig

SHAPES = [(0, 0), (3, 2), (9, 0), (0, 12), (4, 7), (30, 3), (3, 30), (30, 30)]


def _fill(rig: Rig, task_id: str, events: int, anchors: int) -> None:
    for n in range(events):
        rig.store.put_event(Event(f"ev{n:03d}", "task", task_id, "task.commented", 1_000 + 2 * n))
    for n in range(anchors):
        lease = f"lease_{task_id}_{n:03d}"
        rig.store.put_anchor(
            Event(f"an{n:03d}", "task", task_id, "lease.created", 1_001 + 2 * n, lease_id=lease)
        )


class _Queries:
    """Counts the Queries of one timeline partition."""

    def __init__(self, rig: Rig, task_id: str) -> None:
        self.pk = k.timeline_pk("task", task_id)
        self.count = 0
        rig.store.client.meta.events.register("before-parameter-build.dynamodb.Query", self._seen)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("ExpressionAttributeValues", {}).get(":pk") == {"S": self.pk}:
            self.count += 1


def _page(rig: Rig, task_id: str, limit: int) -> tuple[list[tuple[str, str, int]], str | None]:
    page = rig.store.reads.timeline_page("task", task_id, limit, None, newest_first=True)
    return [(e.id, e.type, e.at) for e in page.events], page.next_cursor


@pytest.mark.parametrize(("events", "anchors"), SHAPES)
def test_the_newest_page_is_the_page_two_reads_gave(
    rig: Rig, events: int, anchors: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = f"task_look_{events}_{anchors}"
    _fill(rig, task_id, events, anchors)
    queries = _Queries(rig, task_id)
    for limit in (1, 5, 200):
        looked = _page(rig, task_id, limit)
        with monkeypatch.context() as apart:
            apart.setattr(PagedReads, "_first_look", lambda *_: (None, None))
            assert looked == _page(rig, task_id, limit), (events, anchors, limit)
    queries.count = 0
    _page(rig, task_id, 200)
    whole = events + anchors < FIRST_LOOK_ROWS
    assert queries.count == (1 if whole else 2 if anchors < FIRST_LOOK_ROWS else 3)


def test_a_new_task_s_claim_reads_its_timeline_with_one_query(rig: Rig) -> None:
    from tests.conformance.contract import ALPHA, SPACE, make_world
    from tests.conftest import ADMIN, WORKER

    make_world(rig.svc)
    task, _ = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    queries = _Queries(rig, task.id)
    bundle = rig.svc.payloads.claimed_payload(won.lease, won.task)
    assert bundle is not None and queries.count == 1
    assert [a["type"] for a in bundle["subject"]["activity"]] == ["lease.created", "lease.claimed"]
