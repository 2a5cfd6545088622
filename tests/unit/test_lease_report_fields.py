"""`GET /leases/{id}` shows what the final report said once the lease has ended: outcome,
result, details, error and end_reason (null before)."""

from __future__ import annotations

from tenure.api.views import lease_view

from tests.unit.support import Rig, as_lease

REPORTED = ("outcome", "result", "details", "error", "end_reason")


def test_a_running_lease_shows_no_report_yet(rig: Rig) -> None:
    view = lease_view(rig.running())
    assert {k: view[k] for k in REPORTED} == dict.fromkeys(REPORTED)


def test_a_completed_lease_shows_its_result_and_details(rig: Rig) -> None:
    lease = rig.running()
    body = {"result": {"rows": 3}, "details": {"log": "ok"}}
    rig.svc.reports.complete(as_lease(lease.id), lease.id, body)
    view = lease_view(rig.lease(lease.id))
    assert (view["outcome"], view["result"], view["details"], view["error"]) == (
        "success",
        {"rows": 3},
        {"log": "ok"},
        None,
    )
    assert view["end_reason"] is not None


def test_a_failed_lease_shows_its_error(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "disk full"})
    view = lease_view(rig.lease(lease.id))
    assert (view["error"], view["result"], view["outcome"]) == ("disk full", None, None)
    assert view["end_reason"] is not None
