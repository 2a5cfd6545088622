"""The HTTP routes over the fake store: statuses, envelopes and bytes, no network."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.domain import errors as e
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.rules_support import leases_of_no_task
from tests.unit.support import ADMIN, MEMBER, READER, WORKER, Rig, as_lease


@dataclasses.dataclass
class Answer:
    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def code(self) -> str | None:
        data = self.json()
        return data["error"]["code"] if isinstance(data, dict) and "error" in data else None


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(method: str, path: str, body: Any = None, actor: Principal | None = READER) -> Answer:
        raw = body if isinstance(body, str) else json.dumps(body) if body is not None else ""
        event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw.encode())
        principal = json.dumps(dataclasses.asdict(actor)) if actor else ""
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return Answer(out["statusCode"], out.get("body") or "")

    return call


@pytest.mark.parametrize("limit", ["101", "0", "-1", "many"])
def test_list_leases_with_a_limit_out_of_range_is_validation_failed(http: Any, limit: str) -> None:
    got = http("GET", f"/leases?space=OPS&limit={limit}")
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.json()["error"]["message"].startswith("limit: ")


def test_list_leases_accepts_a_limit_of_one_hundred_and_answers_a_page(http: Any) -> None:
    got = http("GET", "/leases?space=OPS&limit=100")
    assert (got.status, got.json()) == (200, {"leases": [], "next_cursor": None})


def test_list_leases_without_a_space_is_missing_scope(http: Any) -> None:
    got = http("GET", "/leases?limit=10")
    assert (got.status, got.code) == (422, "missing_scope")


def test_list_leases_with_a_bad_cursor_is_validation_failed(http: Any) -> None:
    got = http("GET", "/leases?space=OPS&cursor=bm90LWEtY3Vyc29y")
    assert (got.status, got.code) == (422, "validation_failed")


def test_list_leases_refuses_a_cursor_handed_out_for_another_space(rig: Rig, http: Any) -> None:
    # A cursor names a place in one space's list: replayed on another space it is refused,
    # never read as a place in that list.
    rig.svc.spaces.create_space(ADMIN, "DEV", "Development", None)
    for _ in range(2):
        rig.task()
    page = http("GET", "/leases?space=OPS&limit=1", actor=ADMIN)
    cursor = page.json()["next_cursor"]
    assert page.status == 200 and cursor
    assert http("GET", f"/leases?space=OPS&limit=1&cursor={cursor}", actor=ADMIN).status == 200
    got = http("GET", f"/leases?space=DEV&limit=1&cursor={cursor}", actor=ADMIN)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.json()["error"]["message"].startswith("cursor")


def test_list_leases_by_subject_kind_finds_leases_of_no_task_behind_newer_task_leases(
    rig: Rig, http: Any
) -> None:
    # The leases of a workflow or the space are read apart from the (many) leases tasks were
    # filed with: a read budget smaller than those newer leases still finds them on one page.
    minted = leases_of_no_task(rig)
    task_leases = []
    for _ in range(5):
        _, lease = rig.task()
        assert lease is not None
        task_leases.append(lease.id)
        rig.advance(1)
    rig.store.list_budget = 3
    for query in ("subject_kind=workflow,space", "subject_kind=space&subject_kind=workflow"):
        got = http("GET", f"/leases?space=OPS&limit=10&{query}")
        assert got.status == 200, got.body
        assert [x["id"] for x in got.json()["leases"]] == minted, query
        assert got.json()["next_cursor"] is None
    got = http("GET", "/leases?space=OPS&limit=10&subject_kind=workflow").json()
    assert [x["subject_kind"] for x in got["leases"]] == ["workflow"]
    # Unfiltered, the same budget reads only the newest three.
    page = http("GET", "/leases?space=OPS&limit=10").json()
    assert [x["id"] for x in page["leases"]] == task_leases[::-1][:3]
    assert page["next_cursor"] is not None
    rig.store.list_budget = 100
    tasks = http("GET", "/leases?space=OPS&limit=10&subject_kind=task").json()
    assert [x["id"] for x in tasks["leases"]] == task_leases[::-1]


@pytest.mark.parametrize(
    ("said", "where"),
    [
        ("tasks", "subject_kind.0"),
        ("TASK", "subject_kind.0"),
        ("", "subject_kind.0"),
        ("task,", "subject_kind.1"),
        ("workflow,,space", "subject_kind.1"),
        ("space&subject_kind=nope", "subject_kind.1"),
        ("space;task", "subject_kind.0"),
    ],
)
def test_list_leases_by_an_unknown_subject_kind_is_validation_failed_naming_it(
    http: Any, said: str, where: str
) -> None:
    got = http("GET", f"/leases?space=OPS&subject_kind={said}")
    assert (got.status, got.code) == (422, "validation_failed"), said
    assert got.json()["error"]["message"] == (
        f"{where}: Input should be 'task', 'workflow' or 'space'"
    )


def test_list_leases_by_more_subject_kinds_than_there_are_is_validation_failed(
    http: Any,
) -> None:
    got = http("GET", "/leases?space=OPS&subject_kind=task,workflow,space,task")
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.json()["error"]["message"].startswith("subject_kind: ")
    assert http("GET", "/leases?space=OPS&subject_kind=task,workflow,space").status == 200


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("{not json", 400, "invalid_request"),
        ("[1, 2]", 400, "invalid_request"),
        ('"text"', 400, "invalid_request"),
        ("", 400, "invalid_request"),
        ('{"key": "DEV", "name": "Dev", "colour": "red"}', 422, "validation_failed"),
        ('{"key": "dev", "name": "Dev"}', 422, "validation_failed"),
        ('{"name": "Dev"}', 422, "validation_failed"),
    ],
)
def test_bodies_that_are_not_objects_or_break_the_schema(
    http: Any, body: str, status: int, code: str
) -> None:
    got = http("POST", "/spaces", body, actor=ADMIN)
    assert (got.status, got.code) == (status, code)
    assert set(got.json()) == {"error"} and set(got.json()["error"]) == {"code", "message"}


def test_a_body_that_is_not_json_names_where_it_broke(http: Any) -> None:
    body = '{"key": "DEV",\n  "name": "Dev",}'  # a trailing comma on the second line
    got = http("POST", "/spaces", body, actor=ADMIN)
    assert (got.status, got.code) == (400, "invalid_request")
    message = got.json()["error"]["message"]
    assert message.startswith("the body is not valid JSON")
    assert "line 2, column 17" in message


def test_claim_with_wait_seconds_above_twenty_is_validation_failed(http: Any) -> None:
    got = http("POST", "/pools/builders/claim", {"worker_id": "w1", "wait_seconds": 21}, WORKER)
    assert (got.status, got.code) == (422, "validation_failed")
    assert "wait_seconds" in got.json()["error"]["message"]


def test_no_principal_is_unauthenticated(http: Any) -> None:
    got = http("GET", "/leases?space=OPS", actor=None)
    assert (got.status, got.code) == (401, "unauthenticated")


def test_an_anonymous_request_is_unauthenticated_before_its_body_is_judged(http: Any) -> None:
    got = http("POST", "/spaces", "{not json", actor=None)
    assert (got.status, got.code) == (401, "unauthenticated")


def test_claim_answers_204_on_an_empty_queue_and_the_token_once_otherwise(
    http: Any, rig: Rig
) -> None:
    empty = http("POST", "/pools/builders/claim", {"worker_id": "w1"}, WORKER)
    assert (empty.status, empty.body) == (204, "")
    rig.task()
    got = http("POST", "/pools/builders/claim", {"worker_id": "w1"}, WORKER)
    assert got.status == 200
    data = got.json()
    lease_id, token = data["lease"]["id"], data["token"]
    assert data["fence"] == 1
    assert data["claim_token_hash"] == rig.lease(lease_id).token_hash
    again = http("GET", f"/leases/{lease_id}")
    assert again.status == 200 and token not in again.body
    activity = http("GET", f"/tasks/{data['lease']['task']['id']}/activity")
    assert activity.status == 200 and token not in activity.body


def test_the_same_complete_twice_answers_the_same_bytes(http: Any, rig: Rig) -> None:
    lease = rig.running()
    body = {"outcome": "success", "details": {"n": 1.5}, "report_id": "r-1"}
    first = http("POST", f"/leases/{lease.id}/complete", body, as_lease(lease.id))
    rig.advance(30)
    second = http("POST", f"/leases/{lease.id}/complete", body, as_lease(lease.id))
    assert first.status == second.status == 200
    assert second.body == first.body


def test_a_stale_report_is_a_409_stale_lease(http: Any, rig: Rig) -> None:
    lease = rig.running()
    http("POST", f"/leases/{lease.id}/release", None, as_lease(lease.id))
    got = http("POST", f"/leases/{lease.id}/heartbeat", None, as_lease(lease.id))
    assert (got.status, got.code) == (409, "stale_lease")


def test_a_lease_token_on_an_operator_route_is_403_lease_token_mismatch(
    http: Any, rig: Rig
) -> None:
    lease = rig.running()
    got = http("POST", f"/leases/{lease.id}/cancel", None, as_lease(lease.id))
    assert (got.status, got.code) == (403, "lease_token_mismatch")
    other = http("GET", f"/leases/{lease.id}", None, as_lease("lease_other"))
    assert (other.status, other.code) == (403, "lease_token_mismatch")


def test_cancel_of_a_terminal_lease_answers_200_with_the_lease_as_it_is(
    http: Any, rig: Rig
) -> None:
    lease = rig.running()
    done = http("POST", f"/leases/{lease.id}/complete", {}, as_lease(lease.id))
    got = http("POST", f"/leases/{lease.id}/cancel", None, MEMBER)
    assert got.status == 200
    assert got.json() == done.json()


def test_unknown_ids_are_404_with_their_own_codes(http: Any) -> None:
    assert http("GET", "/leases/lease_nope").code == "lease_not_found"
    assert http("GET", "/tasks/task_nope").code == "task_not_found"
    assert http("GET", "/nowhere").status == 404


@pytest.mark.parametrize("raw", [None, ""], ids=["absent", "empty"])
def test_complete_with_an_absent_or_empty_body_is_a_success(
    http: Any, rig: Rig, raw: str | None
) -> None:
    lease = rig.running()
    got = http("POST", f"/leases/{lease.id}/complete", raw, as_lease(lease.id))
    assert got.status == 200, got.body
    assert (got.json()["lease"]["state"], got.json()["lease"]["outcome"]) == (
        "completed",
        "success",
    )


@pytest.mark.parametrize("raw", [None, ""], ids=["absent", "empty"])
@pytest.mark.parametrize("route", ["heartbeat", "release"])
def test_every_report_takes_an_absent_or_empty_body_as_the_empty_object(
    http: Any, rig: Rig, raw: str | None, route: str
) -> None:
    lease = rig.running()
    got = http("POST", f"/leases/{lease.id}/{route}", raw, as_lease(lease.id))
    assert got.status == 200, got.body


@pytest.mark.parametrize("raw", [None, ""], ids=["absent", "empty"])
def test_fail_with_an_absent_body_names_the_missing_error(
    http: Any, rig: Rig, raw: str | None
) -> None:
    lease = rig.running()
    got = http("POST", f"/leases/{lease.id}/fail", raw, as_lease(lease.id))
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.json()["error"]["message"].startswith("error: ")


def test_an_empty_body_elsewhere_is_still_not_an_object(http: Any) -> None:
    got = http("POST", "/pools/builders/claim", "", WORKER)
    assert (got.status, got.code) == (400, "invalid_request")


@pytest.mark.parametrize(("limit", "status"), [("40.0", 200), ("40.5", 422)])
def test_an_integral_limit_is_an_integer(http: Any, limit: str, status: int) -> None:
    assert http("GET", f"/leases?space=OPS&limit={limit}").status == status


def test_an_integral_float_in_a_body_is_an_integer(http: Any, rig: Rig) -> None:
    lease = rig.running()
    got = http("POST", f"/leases/{lease.id}/heartbeat", {"lease_seconds": 60.0}, as_lease(lease.id))
    assert got.status == 200, got.body
    got = http("POST", f"/leases/{lease.id}/heartbeat", {"lease_seconds": 60.5}, as_lease(lease.id))
    assert (got.status, got.code) == (422, "validation_failed")


def test_listing_workers_without_a_pool_is_validation_failed(http: Any) -> None:
    for query in ("", "?pool="):
        got = http("GET", f"/workers{query}")
        assert (got.status, got.code) == (422, "validation_failed")
        assert got.json()["error"]["message"].startswith("pool: ")


@pytest.mark.parametrize(
    "fields", [{"claim_id": ""}, {"claim_id": "c" * 129}, {"host": "h" * 256}, {"host": 7}]
)
def test_a_claim_id_or_host_out_of_shape_is_validation_failed(
    http: Any, fields: dict[str, Any]
) -> None:
    got = http("POST", "/pools/builders/claim", {"worker_id": "w1", **fields}, WORKER)
    assert (got.status, got.code) == (422, "validation_failed")
    assert next(iter(fields)) in got.json()["error"]["message"]


def test_a_throttled_table_is_a_503_with_retry_after(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def throttled(*_: Any) -> Any:
        raise e.Unavailable("the table kept throttling", retry_after=3)

    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(rig.svc.operator, "get_lease", throttled)
    event = to_event("GET", "/api/v1/leases/lease_1", {"host": "unit"}, b"")
    principal = json.dumps(dataclasses.asdict(READER))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out = api.handle(event, None)
    assert out["statusCode"] == 503
    assert {k.lower(): v for k, v in out["headers"].items()}["retry-after"] == "3"
    assert json.loads(out["body"]) == {
        "error": {"code": "unavailable", "message": "the table kept throttling"}
    }


@pytest.mark.parametrize(
    ("method", "path", "actor"),
    [
        ("GET", "/leases?space=OPS&limt=5", READER),
        ("GET", "/workers?pool=builders&limt=5", READER),
        ("GET", "/leases/lease_1?limt=5", READER),
        ("POST", "/pools/builders/claim?limt=5", WORKER),
    ],
)
def test_an_unknown_query_parameter_is_validation_failed_naming_it(
    http: Any, method: str, path: str, actor: Principal
) -> None:
    body = {"worker_id": "w1"} if method == "POST" else None
    got = http(method, path, body, actor)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.json()["error"]["message"] == "limt: is not a known query parameter"


def test_a_lease_token_with_an_unknown_query_parameter_is_still_a_mismatch(http: Any) -> None:
    got = http("GET", "/leases?limt=5", None, as_lease("lease_1"))
    assert (got.status, got.code) == (403, "lease_token_mismatch")


def test_claims_204s_and_stale_reports_become_metrics(http: Any, rig: Rig) -> None:
    from tenure.api.surface import metrics

    metrics.clear_metrics()
    assert http("POST", "/pools/builders/claim", {"worker_id": "w1"}, WORKER).status == 204
    rig.task()
    won = http("POST", "/pools/builders/claim", {"worker_id": "w1"}, WORKER).json()
    lease_id = won["lease"]["id"]
    stale = http("POST", f"/leases/{lease_id}/complete", {"fence": 9}, as_lease(lease_id))
    assert stale.code == "stale_lease"
    counted = {name: sum(m["Value"]) for name, m in metrics.metric_set.items()}
    assert counted == {"EmptyClaims": 1, "Claims": 1, "StaleReports": 1}
    metrics.clear_metrics()


def test_a_token_the_authorizer_could_not_read_is_read_again_by_the_api(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A throttle while the authorizer reads the token is neither API Gateway's 500 nor a
    refusal: the verdict says so, and the API function reads the token itself — 503 with
    Retry-After while the table still throttles, the route's answer once it does not."""
    from tenure.api.authorizer import authorize

    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    throttling = [True]

    def authenticate(token: str | None) -> Principal:
        if throttling[0]:
            raise e.Unavailable("the table kept throttling", retry_after=2)
        assert token == "tnr_o_reader"
        return READER

    monkeypatch.setattr(rig.svc.tokens, "authenticate", authenticate)
    event = to_event(
        "GET", "/api/v1/leases?space=OPS", {"authorization": "Bearer tnr_o_reader"}, b""
    )
    verdict = authorize(event)
    assert verdict["isAuthorized"] is True
    assert verdict["context"]["principal"] == "" and verdict["context"]["unavailable"]
    event["requestContext"]["authorizer"] = {"lambda": dict(verdict["context"])}
    out = api.handle(event, None)
    assert out["statusCode"] == 503
    assert {k.lower(): v for k, v in out["headers"].items()}["retry-after"] == "2"

    throttling[0] = False  # the same cached verdict, the table answering again
    event = to_event(
        "GET", "/api/v1/leases?space=OPS", {"authorization": "Bearer tnr_o_reader"}, b""
    )
    event["requestContext"]["authorizer"] = {"lambda": dict(verdict["context"])}
    out = api.handle(event, None)
    assert out["statusCode"] == 200, out.get("body")
    assert json.loads(out["body"])["leases"] == []
