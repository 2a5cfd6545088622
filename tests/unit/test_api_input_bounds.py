"""What a request may name is what the service can keep and show: an instant past what it
sorts and prints, or a number past what the table keeps, is 422 naming its field, with
nothing written, never a 500 (or a row that breaks every later read of its space)."""

from __future__ import annotations

from typing import Any

from tests.unit.support import ADMIN, READER, WORKER, Rig, as_lease
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)

BODY = {"space": "OPS", "title": "t", "pool": "builders"}
# Instants no request may name: past the end of 2199 in UTC (in year 10000 there), before
# the epoch, and year 1 at +14:00 (in year 0 in UTC).
BEYOND = (
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59Z",
    "2200-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "0001-01-01T00:00:00+14:00",
)
HUGE = (10**40, 2**63, 10**30)


def _refused(got: Answer, field: str) -> None:
    assert (got.status, got.code) == (422, "validation_failed"), got.data
    assert field in got.data["error"]["message"], got.data


def _listed(http: Any) -> int:  # noqa: F811
    got = http("GET", "/tasks?space=OPS", actor=READER)
    assert got.status == 200, got.data
    return len(got.data["tasks"])


def test_a_not_before_the_service_cannot_keep_is_refused_and_nothing_is_filed(
    http: Any,  # noqa: F811
) -> None:
    later = http("POST", "/tasks", {"space": "OPS", "title": "later"}).data["task"]["id"]
    before = _listed(http)
    for at in BEYOND:
        _refused(http("POST", "/tasks", {**BODY, "not_before": at}), "not_before")
        _refused(
            http("POST", f"/tasks/{later}/enqueue", {"pool": "builders", "not_before": at}),
            "not_before",
        )
    assert _listed(http) == before
    # The last instant it keeps is taken, and the space's lists still read.
    kept = http("POST", "/tasks", {**BODY, "not_before": "2199-12-31T23:59:59+00:00"})
    assert kept.status == 201, kept.data
    assert kept.data["lease"]["timing"]["not_before"] == "2199-12-31T23:59:59.000Z"
    assert _listed(http) == before + 1
    assert http("GET", "/leases?space=OPS", actor=READER).status == 200


def test_a_log_since_needs_its_offset_and_a_time_the_service_keeps(http: Any) -> None:  # noqa: F811
    lease = http("POST", "/tasks", BODY).data["lease"]["id"]
    for since in ("2026-12-01T09:00:00", *BEYOND[:3]):
        got = http("GET", f"/leases/{lease}/logs?since={since}", actor=READER)
        _refused(got, "since")
    # Past the since, the read goes on (this rig keeps no logs: it answers so).
    ok = http("GET", f"/leases/{lease}/logs?since=2026-12-01T09:00:00%2B01:00", actor=READER)
    assert ok.code == "unsupported_runtime", ok.data


def test_a_max_active_past_what_any_count_reaches_is_refused(http: Any) -> None:  # noqa: F811
    for big in HUGE:
        _refused(
            http("POST", "/spaces", {"key": "BIG", "name": "b", "max_active": big}, actor=ADMIN),
            "max_active",
        )
        _refused(http("PATCH", "/pools/builders", {"max_active": big}, actor=ADMIN), "max_active")
        _refused(http("PATCH", "/instance", {"max_active": big}, actor=ADMIN), "max_active")
    assert http("GET", "/spaces/BIG", actor=ADMIN).status == 404
    top = http("PATCH", "/pools/builders", {"max_active": 1_000_000_000}, actor=ADMIN)
    assert top.status == 200 and top.data["pool"]["max_active"] == 1_000_000_000


def test_a_fence_past_any_lease_s_is_refused_on_every_report(http: Any, rig: Rig) -> None:  # noqa: F811
    http("POST", "/tasks", BODY)
    won = rig.claim()
    lease = as_lease(won.lease.id)
    path = f"/leases/{won.lease.id}"
    for big in HUGE:
        _refused(http("POST", f"{path}/complete", {"fence": big}, actor=lease), "fence")
        _refused(http("POST", f"{path}/fail", {"fence": big, "error": "e"}, actor=lease), "fence")
        _refused(http("POST", f"{path}/release", {"fence": big}, actor=lease), "fence")
        beats = {"leases": [{"id": won.lease.id, "fence": big}]}
        _refused(http("POST", "/workers/w1/heartbeat", beats, actor=WORKER), "fence")
    assert rig.store.get_lease(won.lease.id).state == won.lease.state  # nothing applied
    done = http("POST", f"{path}/complete", {"fence": won.lease.fence}, actor=lease)
    assert done.status == 200, done.data


def test_more_blockers_than_a_filing_holds_are_refused_by_the_model(http: Any) -> None:  # noqa: F811
    many = [f"OPS-{n}" for n in range(1, 50)]
    _refused(
        http("POST", "/tasks", {"space": "OPS", "title": "t", "depends_on": many}), "depends_on"
    )


def test_a_row_an_earlier_release_let_through_still_reads_and_can_be_cancelled(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    task = http("POST", "/tasks", {"space": "OPS", "title": "far"}).data["task"]["id"]
    far = rig.svc.filing.enqueue(ADMIN, task, "builders", 10**15)  # in the year 33658
    for path in ("/tasks?space=OPS", "/leases?space=OPS", f"/leases/{far.id}", f"/tasks/{task}"):
        got = http("GET", path, actor=READER)
        assert got.status == 200, (path, got.data)
    lease = http("GET", f"/leases/{far.id}", actor=READER).data
    assert lease["timing"]["not_before"] == "9999-12-31T23:59:59.999Z"
    cancelled = http("POST", f"/leases/{far.id}/cancel", {}, actor=ADMIN)
    assert cancelled.status == 200, cancelled.data


def test_an_event_s_occurred_at_is_a_time_the_service_keeps(http: Any) -> None:  # noqa: F811
    rule = {
        "space": "OPS",
        "name": "on-deploy",
        "pool": "builders",
        "subject": {"kind": "task", "title": "deployed"},
        "trigger": {"topic": "deploy", "match": {}},
    }
    assert http("POST", "/rules", rule, actor=ADMIN).status == 201
    for at in BEYOND:
        got = http(
            "POST", "/events", {"space": "OPS", "topic": "deploy", "data": {}, "occurred_at": at}
        )
        _refused(got, "occurred_at")
    fine = {"space": "OPS", "topic": "deploy", "data": {}, "occurred_at": "2026-01-01T00:00:00Z"}
    assert http("POST", "/events", fine).status == 202


def test_a_rule_s_subject_properties_hold_only_numbers_the_table_keeps(http: Any) -> None:  # noqa: F811
    for bad in (float("nan"), float("inf"), 10**40):
        rule = {
            "space": "OPS",
            "name": "bad-props",
            "pool": "builders",
            "subject": {"kind": "task", "title": "t", "properties": {"x": bad}},
            "trigger": {"topic": "deploy", "match": {}},
        }
        _refused(http("POST", "/rules", rule, actor=ADMIN), "subject.properties")
    assert http("GET", "/rules?space=OPS", actor=READER).data["rules"] == []
