"""The OutboundEvents parameter: endings by default, all or none, handed to the reactor (the
one function that publishes lease and task transitions), and the reactor's stream filter chosen
by it: every lease, task and graph row when every transition is published; otherwise only the
records that need a timeline row, a reaction or a bus entry, so a task's filing and a stamped
claim or start never invoke the reactor. (tests/conformance/test_reactor_filter_records.py
checks the filter against the stream records the service's own writes make.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse
from tenure.config import ENVIRONMENT
from tenure.domain import outbound
from tenure_cli.local.filters import passes, reactor_patterns
from tenure_cli.local.provision import Provisioner

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def test_the_parameter_offers_the_three_settings_and_defaults_to_endings(
    template: dict[str, Any],
) -> None:
    param = template["Parameters"]["OutboundEvents"]
    assert param["Type"] == "String"
    assert param["AllowedValues"] == list(outbound.SETTINGS)
    assert param["Default"] == outbound.ENDINGS == "endings"
    for named in ("endings", "all", "none", "task.completed", "task.needs_attention"):
        assert named in param["Description"], named


def test_the_reactor_alone_is_told_the_setting(template: dict[str, Any]) -> None:
    variable, source = ENVIRONMENT["outbound_events"]
    assert (variable, source) == ("TENURE_OUTBOUND_EVENTS", "template:ReactorFunction")
    told = {
        name
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and variable in (resource["Properties"].get("Environment") or {}).get("Variables", {})
    }
    assert told == {"ReactorFunction"}
    value = template["Resources"]["ReactorFunction"]["Properties"]["Environment"]["Variables"][
        variable
    ]
    assert value == {"Ref": "OutboundEvents"}


def test_the_local_stack_resolves_the_setting_a_deploy_would_give() -> None:
    nowhere = "http://127.0.0.1:1"  # no call is made: only the template is resolved
    for setting in outbound.SETTINGS:
        made = Provisioner(nowhere, nowhere, "t", "p", parameters={"OutboundEvents": setting})
        made.names = {"EventBus": "bus"}
        env = made.function_environment("ReactorFunction")
        assert env["TENURE_OUTBOUND_EVENTS"] == setting
    with pytest.raises(ValueError, match="OutboundEvents must be one of"):
        Provisioner(nowhere, nowhere, "t", "p", parameters={"OutboundEvents": "terminal"})


def _lease(event_type: str, stamps: dict[str, int] | None, state: str = "dispatched") -> Any:
    image: dict[str, Any] = {
        "PK": {"S": "LEASE#l1"},
        "SK": {"S": "LEASE"},
        "entity": {"S": "lease"},
        "event_type": {"S": event_type},
        "state": {"S": state},
        "version": {"N": "3"},
    }
    if stamps is not None:
        image["tl"] = {"M": {k: {"N": str(v)} for k, v in stamps.items()}}
    return {"eventName": "MODIFY", "dynamodb": {"NewImage": image}}


TASK_FILED = {
    "eventName": "INSERT",
    "dynamodb": {
        "NewImage": {"PK": {"S": "TASK#t1"}, "SK": {"S": "TASK"}, "entity": {"S": "task"}}
    },
}
TASK_MOVED = {
    "eventName": "MODIFY",
    "dynamodb": {
        "NewImage": {
            "PK": {"S": "TASK#t1"},
            "SK": {"S": "TASK"},
            "entity": {"S": "task"},
            "event_type": {"S": "task.escalated"},
        }
    },
}
GRAPH = {
    "eventName": "MODIFY",
    "dynamodb": {"NewImage": {"PK": {"S": "TASK#t1"}, "SK": {"S": "GRAPH"}}},
}
# (record, whether it needs the reactor when not every transition is published)
RECORDS = {
    "a task's filing": (TASK_FILED, False),
    "a task's first lease, its creation stamped": (_lease("lease.created", {"n": 1}), False),
    "a claim stamped on the row": (_lease("lease.claimed", {"n": 1, "c": 2}), False),
    "a claim that also started, both stamped": (_lease("lease.started", {"c": 2, "s": 3}), False),
    "a start stamped on the row": (_lease("lease.started", {"c": 2, "s": 3}, "running"), False),
    "a later lease's creation (its anchor row)": (_lease("lease.created", {}), True),
    "a claim the row could not tell": (_lease("lease.claimed", {"n": 1}), True),
    "a start the row could not tell": (_lease("lease.started", {"c": 2}), True),
    "a standalone lease's claim (no stamps)": (_lease("lease.claimed", None), True),
    "a standalone lease's creation": (_lease("lease.created", None), True),
    "a stamped completion (the lease's end)": (
        _lease("lease.completed", {"c": 2, "s": 3, "e": 4}, "completed"),
        True,
    ),
    "a failure": (_lease("lease.failed", {"c": 2}, "failed"), True),
    "a pause": (_lease("lease.paused", {"c": 2, "s": 3}, "paused"), True),
    "a retry's new lease": (_lease("lease.retried", {}, "pending"), True),
    "a rule's lease, its own creation": (_lease("lease.created", None, "pending"), True),
    "a task transition": (TASK_MOVED, True),
    "a graph row": (GRAPH, True),
}


def _filters(template: dict[str, Any]) -> Any:
    criteria = template["Resources"]["ReactorFunction"]["Properties"]["Events"]
    (stream,) = [e for e in criteria.values() if e["Type"] == "DynamoDB"]
    return stream["Properties"]["FilterCriteria"]


def test_the_stream_filter_is_chosen_by_the_setting(template: dict[str, Any]) -> None:
    """Two filter sets, chosen by a condition on OutboundEvents alone, each within Lambda's
    default of five filters and its 4,096 characters a pattern."""
    chosen = _filters(template)
    assert list(chosen) == ["Fn::If"]
    condition, every, narrow = chosen["Fn::If"]
    assert template["Conditions"][condition] == {"Fn::Equals": [{"Ref": "OutboundEvents"}, "all"]}
    for shape in (every, narrow):
        assert 1 <= len(shape["Filters"]) <= 5
        for entry in shape["Filters"]:
            assert isinstance(entry["Pattern"], str) and len(entry["Pattern"]) <= 4096
    assert reactor_patterns(template, "endings") == reactor_patterns(template, "none")
    assert reactor_patterns(template, "all") != reactor_patterns(template, "endings")
    assert reactor_patterns(template) == reactor_patterns(template, "endings"), "the default"


@pytest.mark.parametrize("setting", outbound.SETTINGS)
@pytest.mark.parametrize("name", list(RECORDS))
def test_each_setting_lets_through_what_the_reactor_needs(
    template: dict[str, Any], setting: str, name: str
) -> None:
    record, needed = RECORDS[name]
    want = True if setting == outbound.ALL else needed
    assert passes(reactor_patterns(template, setting), record) is want, (setting, name)


def test_a_filter_condition_on_anything_else_is_refused(template: dict[str, Any]) -> None:
    changed = {**template, "Conditions": {**template["Conditions"]}}
    (condition,) = [k for k, v in changed["Conditions"].items() if "OutboundEvents" in str(v)]
    changed["Conditions"][condition] = {"Fn::Equals": [{"Ref": "BillingMode"}, "PROVISIONED"]}
    with pytest.raises(ValueError, match="cannot judge"):
        reactor_patterns(changed, "endings")
