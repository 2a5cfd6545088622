"""The HTTP contract's pure half: error statuses, validation messages, request models, views."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from tenure.api import models as m
from tenure.api.errors import STATUS, describe_validation, error_event, error_response, status_of
from tenure.api.views import iso, lease_view
from tenure.app.conditions import QueuedCondition
from tenure.domain import errors as e
from tenure.domain.states import EndReason, LeaseState, Revoke, SubjectKind

from tests.unit.support import T0, Rig, make_lease

# The API's error table (docs/api.md), row by row.
DOCUMENTED_ERRORS = [
    (e.InvalidRequest, 400, "invalid_request"),
    (e.Unauthenticated, 401, "unauthenticated"),
    (e.LeaseTokenMismatch, 403, "lease_token_mismatch"),
    (e.Forbidden, 403, "forbidden"),
    (e.LeaseNotFound, 404, "lease_not_found"),
    (e.TaskNotFound, 404, "task_not_found"),
    (e.NotFound, 404, "not_found"),
    (e.StaleLease, 409, "stale_lease"),
    (e.InvalidTransition, 409, "invalid_transition"),
    (e.AlreadyExists, 409, "already_exists"),
    (e.MissingScope, 422, "missing_scope"),
    (e.ValidationFailed, 422, "validation_failed"),
    (e.UnverifiedCreatedTasks, 422, "unverified_created_tasks"),  # a refused completion
    (e.UnsupportedRuntime, 501, "unsupported_runtime"),
    (e.Unavailable, 503, "unavailable"),
]


@pytest.mark.parametrize(("cls", "status", "code"), DOCUMENTED_ERRORS)
def test_every_domain_error_maps_to_its_documented_status_and_code(
    cls: type[e.TenureError], status: int, code: str
) -> None:
    err = cls("something")
    assert (status_of(err), err.code, err.message) == (status, code, "something")


def test_every_public_domain_error_has_a_status() -> None:
    public = {
        cls
        for _, cls in inspect.getmembers(e, inspect.isclass)
        if issubclass(cls, e.TenureError)
        and cls is not e.TenureError
        and not issubclass(cls, e.Conflict)  # Conflict and CeilingReached stay internal
    }
    assert public == set(STATUS)
    assert public == {cls for cls, _, _ in DOCUMENTED_ERRORS}


def test_unavailable_is_a_503_that_says_when_to_come_back() -> None:
    err = e.Unavailable("the table is throttling", retry_after=7)
    answer = error_response(err)
    assert (answer.status_code, answer.headers["Retry-After"]) == (503, "7")
    assert json.loads(str(answer.body)) == {
        "error": {"code": "unavailable", "message": "the table is throttling"}
    }
    early = error_event(err)
    assert (early["statusCode"], early["headers"]["Retry-After"]) == (503, "7")
    assert early["body"] == answer.body


def test_other_errors_carry_no_retry_after() -> None:
    assert "Retry-After" not in error_response(e.StaleLease("old")).headers


def test_an_internal_conflict_or_unknown_error_is_a_500() -> None:
    assert status_of(e.Conflict("lost")) == 500
    assert status_of(e.TenureError("?")) == 500

    class Narrower(e.LeaseNotFound):
        pass

    assert status_of(Narrower("x")) == 404


def _body_errors(model: type[BaseModel], body: Any) -> list[dict[str, Any]]:
    """The errors as the resolver reports them: each location under `body`."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return [{**err, "loc": ("body", *err["loc"])} for err in caught.value.errors()]


def test_a_body_that_is_not_json_is_an_invalid_request() -> None:
    err = describe_validation([{"type": "json_invalid", "loc": ("body", 1), "msg": "bad"}])
    assert isinstance(err, e.InvalidRequest)


@pytest.mark.parametrize("kind", ["model_attributes_type", "dict_type", "model_type", "missing"])
def test_a_body_that_is_not_a_json_object_is_an_invalid_request(kind: str) -> None:
    err = describe_validation([{"type": kind, "loc": ("body",), "msg": "nope"}])
    assert isinstance(err, e.InvalidRequest)


def test_an_unknown_field_is_validation_failed_naming_the_field() -> None:
    err = describe_validation(_body_errors(m.Enqueue, {"pool": "p", "colour": "red"}))
    assert isinstance(err, e.ValidationFailed)
    assert err.message == "colour: is not a known field"


def test_a_missing_field_inside_an_object_is_validation_failed_not_invalid_request() -> None:
    err = describe_validation(_body_errors(m.Enqueue, {}))
    assert isinstance(err, e.ValidationFailed)
    assert err.message.startswith("pool: ")


def test_nested_fields_are_named_by_their_path_and_all_problems_are_listed() -> None:
    body = {"leases": [{"id": "a", "fence": 1}, {"id": "b", "fence": 0}], "x": 1}
    err = describe_validation(_body_errors(m.WorkerHeartbeat, body))
    assert isinstance(err, e.ValidationFailed)
    assert "leases.1.fence: " in err.message
    assert "x: is not a known field" in err.message
    assert err.message.count("; ") == 1


def test_a_whole_object_rule_names_its_fields_without_the_value_error_prefix() -> None:
    body = {"name": "p", "space": "OPS", "kind": "agent", "renew_seconds": 30, "grace_seconds": 20}
    err = describe_validation(_body_errors(m.PoolCreate, body))
    assert isinstance(err, e.ValidationFailed)
    assert "grace_seconds" in err.message
    assert "Value error" not in err.message


# ---------------------------------------------------------------------------- models

MINIMAL: dict[type[BaseModel], dict[str, Any]] = {
    m.SpaceCreate: {"key": "OPS", "name": "Operations"},
    m.WorkflowCreate: {"space": "OPS", "slug": "nightly", "name": "Nightly"},
    m.PoolCreate: {"name": "builders", "space": "OPS", "kind": "command"},
    m.TokenCreate: {"name": "ci", "kind": "operator"},
    m.TaskCreate: {"space": "OPS", "title": "Build"},
    m.Enqueue: {"pool": "builders"},
    m.Claim: {"worker_id": "w1"},
    m.NextClaim: {"worker_id": "w1", "claim_id": "c-1"},
    m.Heartbeat: {},
    m.LeaseFence: {"id": "lease_1", "fence": 1},
    m.WorkerHeartbeat: {"leases": []},
    m.Complete: {},
    m.Fail: {"error": "boom"},
    m.Release: {},
    m.LogEventIn: {"stream": "stdout", "message": "hello"},
    m.LogBatch: {"events": [{"stream": "stdout", "message": "hello"}]},
    m.AttachmentCreate: {"filename": "out.txt", "content_type": "text/plain", "byte_size": 5},
    m.AgentSettings: {"model": "claude-sonnet-5"},
    m.ClassifierOutput: {},
    m.ClassifierSettings: {},
    m.PoolPatch: {},
    m.RetrySettings: {},
    m.RetryBackoff: {},
    m.InstancePatch: {},
    m.RuntimeState: {"state": "ok"},
    m.CredentialsState: {"state": "unreachable"},
    m.TaskPatch: {"pool": "builders"},
    m.Drain: {},
    m.BulkRelease: {"lease_ids": ["lease_1"]},
    m.BulkFail: {"lease_ids": ["lease_1"], "reason": "stuck"},
    m.BlockCreate: {"kind": "needs_input", "reason": "which branch?"},
    m.BlockClear: {},
    m.TaskRecover: {"note": "fixed"},
    m.TaskApprove: {},
    m.TaskReject: {"note": "not now"},
    m.TaskCancel: {"reason": "called off"},
}


def test_every_request_model_is_covered_here() -> None:
    declared = {
        cls
        for _, cls in inspect.getmembers(m, inspect.isclass)
        if issubclass(cls, m.Strict) and cls is not m.Strict
    }
    assert declared == set(MINIMAL)


@pytest.mark.parametrize("model", list(MINIMAL), ids=lambda x: x.__name__)
def test_every_request_model_accepts_its_minimal_body_and_rejects_unknown_fields(
    model: type[BaseModel],
) -> None:
    model.model_validate(MINIMAL[model])
    errors = _body_errors(model, {**MINIMAL[model], "surprise": True})
    assert [err["type"] for err in errors] == ["extra_forbidden"]


def test_a_cancel_reason_is_1_to_500_characters() -> None:
    assert _rejects(m.TaskCancel, reason="")
    assert _rejects(m.TaskCancel, reason="x" * 501)
    assert not _rejects(m.TaskCancel, reason="x" * 500, subtree=True)
    assert _rejects(m.TaskCancel, subtree="maybe")


def _rejects(model: type[BaseModel], **fields: Any) -> bool:
    try:
        model.model_validate({**MINIMAL[model], **fields})
    except ValidationError:
        return True
    return False


@pytest.mark.parametrize(
    ("value", "ok"), [(0, True), (20, True), (19.5, True), (20.5, False), (21, False), (-1, False)]
)
def test_claim_wait_seconds_is_at_most_twenty(value: float, ok: bool) -> None:
    assert _rejects(m.Claim, wait_seconds=value) is not ok


@pytest.mark.parametrize(
    ("value", "ok"), [(4, False), (5, True), (300, True), (43200, True), (43201, False), (0, False)]
)
@pytest.mark.parametrize("model", [m.Claim, m.Heartbeat])
def test_lease_seconds_stays_within_5_and_43200(
    model: type[BaseModel], value: int, ok: bool
) -> None:
    assert _rejects(model, lease_seconds=value) is not ok


def test_pool_timings_must_be_ordered_renew_grace_toleration() -> None:
    assert _rejects(m.PoolCreate, renew_seconds=30, grace_seconds=20)
    assert _rejects(m.PoolCreate, grace_seconds=400)  # toleration 300 < grace
    assert not _rejects(m.PoolCreate, renew_seconds=20, grace_seconds=20, toleration_seconds=20)
    assert _rejects(m.PoolCreate, renew_seconds=0)
    assert _rejects(m.PoolCreate, on_expiry="retry")
    assert _rejects(m.PoolCreate, kind="lambda")
    pool = m.PoolCreate.model_validate(MINIMAL[m.PoolCreate])
    assert (pool.renew_seconds, pool.grace_seconds, pool.toleration_seconds) == (10, 50, 300)


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (m.SpaceCreate, {"key": "ops"}),
        (m.SpaceCreate, {"name": "   "}),
        # The document's maxLength counts every character: blanks that trimming would drop too.
        (m.SpaceCreate, {"name": "\x85" + "a" * 500}),
        (m.TaskCreate, {"title": "a" * 500 + " "}),
        (m.SpaceCreate, {"max_active": 0}),
        (m.TaskCreate, {"title": ""}),
        (m.TaskCreate, {"max_attempts": 0}),
        (m.TaskCreate, {"max_attempts": 101}),
        (m.TaskCreate, {"properties": {"blob": "x" * 40_000}}),
        (m.TaskCreate, {"space": 7}),
        (m.TokenCreate, {"kind": "worker", "role": "admin"}),
        (m.TokenCreate, {"kind": "operator", "pools": ["builders"]}),
        (m.TokenCreate, {"role": "owner"}),
        (m.Claim, {"worker_id": ""}),
        (m.Claim, {"worker_id": "has space"}),
        (m.LeaseFence, {"fence": 0}),
        (m.WorkerHeartbeat, {"leases": [{"id": f"l{i}", "fence": 1} for i in range(101)]}),
        (m.Complete, {"outcome": "maybe"}),
        (m.Complete, {"report_id": ""}),
        (m.Complete, {"details": {"blob": "x" * 40_000}}),
        (m.Fail, {"error": ""}),
        (m.Release, {"reason": "x" * 501}),
    ],
)
def test_request_models_reject_values_out_of_range(
    model: type[BaseModel], fields: dict[str, Any]
) -> None:
    assert _rejects(model, **fields)


def test_the_json_the_api_receives_is_not_coerced_from_strings() -> None:
    assert _rejects(m.TaskCreate, max_attempts="3")
    assert _rejects(m.LeaseFence, fence="1")
    assert _rejects(m.Claim, lease_seconds="40")


def _int_fields() -> list[tuple[type[BaseModel], str]]:
    """Every integer field of every request model (the JSON Schema says "integer")."""
    found = []
    for model in MINIMAL:
        for name, prop in model.model_json_schema()["properties"].items():
            kinds = [prop.get("type")] + [x.get("type") for x in prop.get("anyOf", [])]
            if "integer" in kinds:
                found.append((model, name))
    return found


def _valid(model: type[BaseModel], name: str, value: Any) -> dict[str, Any]:
    body = {**MINIMAL[model], name: value}
    if model is m.PoolCreate:  # keep the timings ordered
        body = {**body, "renew_seconds": 5, "grace_seconds": 40, "toleration_seconds": 40}
        body[name] = value
    return body


def test_integer_fields_are_found() -> None:
    assert len(_int_fields()) >= 10


@pytest.mark.parametrize(("model", "name"), _int_fields(), ids=lambda x: getattr(x, "__name__", x))
def test_every_integer_field_takes_an_integral_float_and_refuses_others(
    model: type[BaseModel], name: str
) -> None:
    prop = model.model_json_schema()["properties"][name]
    tops = [x.get("maximum") for x in [prop, *prop.get("anyOf", [])] if "maximum" in x]
    top = int(min([40, *tops]))  # inside the field's bounds (a priority stops at 9)
    got = model.model_validate(_valid(model, name, float(top)))
    assert getattr(got, name) == top and type(getattr(got, name)) is int
    for bad in (top + 0.5, str(top), True, float("inf")):
        with pytest.raises(ValidationError):
            model.model_validate(_valid(model, name, bad))


def test_integer_bounds_stay_in_the_json_schema() -> None:
    prop = m.Claim.model_json_schema()["properties"]["lease_seconds"]["anyOf"][0]
    assert (prop["type"], prop["minimum"], prop["maximum"]) == ("integer", 5, 43200)


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        ({"claim_id": "c-1", "host": "box-7"}, True),
        ({"claim_id": "x" * 128, "host": "h" * 255}, True),
        ({"claim_id": ""}, False),
        ({"claim_id": "x" * 129}, False),
        ({"host": "h" * 256}, False),
        ({"claim_id": 7}, False),
    ],
)
def test_a_claim_may_carry_a_claim_id_and_a_host(fields: dict[str, Any], ok: bool) -> None:
    assert _rejects(m.Claim, **fields) is not ok


# ------------------------------------------------------------------------------ views


def _claimed_lease(rig: Rig) -> tuple[dict[str, Any], str]:
    won = rig.claimed()
    lease = rig.lease(won.lease.id)
    return lease_view(lease, rig.svc.conditions.queued_condition_of(lease)), won.token


def test_lease_view_is_deterministic_and_json(rig: Rig) -> None:
    won = rig.claimed()
    lease = rig.lease(won.lease.id)
    assert json.dumps(lease_view(lease)) == json.dumps(lease_view(rig.lease(won.lease.id)))
    assert json.loads(json.dumps(lease_view(lease))) == lease_view(lease)


def test_lease_view_never_contains_the_raw_token(rig: Rig) -> None:
    view, token = _claimed_lease(rig)
    text = json.dumps(view)
    assert token not in text
    assert token.rsplit(".", 1)[1] not in text
    lease = rig.store.get_lease(view["id"])
    assert lease is not None and lease.token_hash is not None
    assert view["claim_token_hash_truncated"] == lease.token_hash[:8]
    assert lease.token_hash not in text


def test_lease_view_shows_the_documented_fields(rig: Rig) -> None:
    view, _ = _claimed_lease(rig)
    for name in ["id", "state", "attempt", "pool", "subject_kind", "task", "workflow", "timing"]:
        assert name in view
    assert (view["state"], view["attempt"], view["fence"], view["pool"]) == (
        "dispatched",
        1,
        1,
        "builders",
    )
    assert view["task"] == {"id": view["task"]["id"], "key": "OPS-1"}
    assert view["workflow"] is None
    assert view["worker_version"] == "1.0"
    assert view["queued_condition"] == {
        "code": "starting",
        "label": "starting",
        "needs_person": False,
    }
    assert view["timing"]["claimed_at"] == iso(T0) == "2026-01-01T00:00:00.000Z"
    assert view["timing"]["deadline"] == "2026-01-01T00:07:30.000Z"


@pytest.mark.parametrize(
    ("kind", "workflow", "task", "expect_task", "expect_workflow"),
    [
        (
            SubjectKind.TASK,
            "nightly",
            "task_1",
            {"id": "task_1", "key": "OPS-1"},
            {"slug": "nightly"},
        ),
        (SubjectKind.WORKFLOW, "nightly", None, None, {"slug": "nightly"}),
        (SubjectKind.SPACE, None, None, None, None),
    ],
)
def test_lease_view_task_and_workflow_follow_the_subject(
    kind: SubjectKind,
    workflow: str | None,
    task: str | None,
    expect_task: Any,
    expect_workflow: Any,
) -> None:
    lease = make_lease("l", subject_kind=kind, task_id=task, task_key="OPS-1", workflow=workflow)
    view = lease_view(lease)
    assert (view["subject_kind"], view["task"], view["workflow"]) == (
        kind.value,
        expect_task,
        expect_workflow,
    )


def test_a_lease_view_shows_the_condition_the_service_judged() -> None:
    condition = QueuedCondition("pool_full", "pool full", False)
    view = lease_view(make_lease("l", state=LeaseState.PENDING), condition)
    assert view["queued_condition"] == {
        "code": "pool_full",
        "label": "pool full",
        "needs_person": False,
    }
    assert lease_view(make_lease("l", state=LeaseState.RUNNING))["queued_condition"] is None


def test_lease_view_of_an_ended_lease_shows_how_it_ended() -> None:
    lease = make_lease(
        "l",
        state=LeaseState.CANCELLED,
        end_reason=EndReason.RELEASED,
        revoke=Revoke.CANCEL,
        ended_at=T0 + 1,
    )
    view = lease_view(replace(lease, outcome=None))
    assert (view["state"], view["end_reason"], view["revoke"]) == (
        "cancelled",
        "released",
        "cancel",
    )
    assert view["timing"]["ended_at"] == "2026-01-01T00:00:00.001Z"


def test_a_title_is_stored_without_the_blanks_around_it() -> None:
    created = m.TaskCreate.model_validate({"space": "OPS", "title": "  deploy  "})
    assert created.title == "deploy"
