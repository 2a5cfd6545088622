"""The OutboundEvents parameter: endings by default, all or none, handed to the reactor (the
one function that publishes lease and task transitions), and a stream filter that lets through
the same records at every setting, since a record the bus does not get may still need its
timeline row, a reaction or a metric."""

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


def test_the_stream_filter_does_not_depend_on_the_setting(template: dict[str, Any]) -> None:
    """The filter patterns are fixed strings (no condition on OutboundEvents) and let a claim's
    record through: its LeasesClaimed metric comes from the reactor whatever the bus gets."""
    criteria = template["Resources"]["ReactorFunction"]["Properties"]["Events"]
    (stream,) = [e for e in criteria.values() if e["Type"] == "DynamoDB"]
    for entry in stream["Properties"]["FilterCriteria"]["Filters"]:
        assert isinstance(entry["Pattern"], str), "a filter that changes with a parameter"
    claim = {
        "eventName": "MODIFY",
        "dynamodb": {
            "NewImage": {
                "PK": {"S": "LEASE#l1"},
                "SK": {"S": "LEASE"},
                "entity": {"S": "lease"},
                "event_type": {"S": "lease.claimed"},
            }
        },
    }
    assert passes(reactor_patterns(template), claim)
