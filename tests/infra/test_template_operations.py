"""The template's operating parts: alarms and their optional topic, the dashboard, the
capacity mode with auto scaling on the table and every index, and the local stack still
provisioning the table from it in either mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse
from tenure_cli.local.provision import Provisioner

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def _of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _metrics(alarm: dict[str, Any]) -> set[str]:
    props = alarm["Properties"]
    if "MetricName" in props:
        return {props["MetricName"]}
    named = {m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
    queries = " ".join(str(m.get("Expression", "")) for m in props["Metrics"])
    return named | {n for n in ("ThrottledRequests",) if n in queries}


def test_every_alarm_notifies_the_topic_only_when_one_is_given(template: dict[str, Any]) -> None:
    alarms = _of(template, "AWS::CloudWatch::Alarm")
    assert template["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert template["Conditions"]["NotifiesAlarms"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }
    when = {"Fn::If": ["NotifiesAlarms", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == when, name
        assert alarm["Properties"]["OKActions"] == when, name


def test_the_alarms_watch_the_dlqs_the_sweeper_the_api_and_the_table(
    template: dict[str, Any],
) -> None:
    alarms = _of(template, "AWS::CloudWatch::Alarm")
    watched = set().union(*(_metrics(a) for a in alarms.values()))
    assert watched >= {
        "ApproximateNumberOfMessagesVisible",
        "SweeperPasses",
        "ReclaimBacklog",
        "MassExpiryHolds",
        "5xx",
        "Count",
        "ThrottledRequests",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
    }
    queues = {
        a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for a in alarms.values()
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    assert queues == {"InboundDeadLetterQueue", "ReactorDeadLetterQueue"}
    stopped = alarms["SweeperStoppedAlarm"]["Properties"]
    assert (stopped["EvaluationPeriods"], stopped["TreatMissingData"]) == (3, "breaching")
    api = alarms["Api5xxAlarm"]["Properties"]
    (rate,) = [m for m in api["Metrics"] if m.get("ReturnData")]
    assert "100 *" in rate["Expression"] and api["Threshold"] == 1
    assert {m["MetricStat"]["Period"] for m in api["Metrics"] if "MetricStat" in m} == {300}


def test_the_dashboard_shows_transitions_depth_age_and_cost_drivers(
    template: dict[str, Any],
) -> None:
    (dashboard,) = _of(template, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    widgets = json.loads(body)["widgets"]
    text = json.dumps(widgets)
    for name in (
        "Claims",
        "LeasesCompleted",
        "LeasesFailed",
        "LeasesExpired",
        "QueuedLeases",
        "OldestQueuedAgeSeconds",
        "ConsumedWriteCapacityUnits",
        "Invocations",
    ):
        assert name in text, name


def test_the_dashboard_counts_claims_where_they_are_served(template: dict[str, Any]) -> None:
    # A claim stamped on its lease reaches the reactor only when every transition is
    # published, so the claims line is the Claims metric of the functions that serve claims
    # (the HTTP API's, the worker's and the claim function's, all under service "api"), which
    # counts every claim at every OutboundEvents setting.
    (dashboard,) = _of(template, "AWS::CloudWatch::Dashboard").values()
    widgets = json.loads(dashboard["Properties"]["DashboardBody"]["Fn::Sub"])["widgets"]
    lines = [m for w in widgets for m in w["properties"].get("metrics", [])]
    claims = [m for m in lines if isinstance(m[-1], dict) and m[-1].get("label") == "claims"]
    assert claims == [["Tenure", "Claims", "service", "api", {"label": "claims"}]]
    assert "LeasesClaimed" not in json.dumps(widgets)


def test_provisioned_mode_scales_reads_and_writes_of_the_table_and_every_index(
    template: dict[str, Any],
) -> None:
    table = template["Resources"]["LeaseTable"]["Properties"]
    indexes = [g["IndexName"] for g in table["GlobalSecondaryIndexes"]]
    for spec in [table] + table["GlobalSecondaryIndexes"]:
        assert spec["ProvisionedThroughput"]["Fn::If"][0] == "Provisioned"
        assert spec["ProvisionedThroughput"]["Fn::If"][2] == {"Ref": "AWS::NoValue"}
    targets = _of(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    scaled = set()
    for target in targets.values():
        assert target["Condition"] == "Provisioned"
        props = target["Properties"]
        resource = props["ResourceId"]["Fn::Sub"]
        scaled.add((resource, props["ScalableDimension"].rsplit(":", 1)[1]))
    expected = {"table/${LeaseTable}"} | {f"table/${{LeaseTable}}/index/{i}" for i in indexes}
    assert scaled == {(r, u) for r in expected for u in ("ReadCapacityUnits", "WriteCapacityUnits")}
    policies = _of(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    assert len(policies) == len(targets)
    for policy in policies.values():
        tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["TargetValue"] == 70


class _Table(Provisioner):
    """The provisioner's table step only, recording what CreateTable would get."""

    def __init__(self, billing: str) -> None:
        from tenure_cli.local.provision import load_template

        self.template = load_template()
        self.params = {k: v.get("Default") for k, v in self.template["Parameters"].items()}
        self.params["BillingMode"] = billing
        self.names, self.arns = {}, {}


@pytest.mark.parametrize("billing", ["PAY_PER_REQUEST", "PROVISIONED"])
def test_the_local_stack_resolves_the_table_in_either_mode(billing: str) -> None:
    rig = _Table(billing)
    props = rig.template["Resources"]["LeaseTable"]["Properties"]
    resolved = rig.resolve(props)
    assert resolved["BillingMode"] == billing
    if billing == "PROVISIONED":
        assert resolved["ProvisionedThroughput"] == {
            "ReadCapacityUnits": 5,
            "WriteCapacityUnits": 5,
        }
        assert all("ProvisionedThroughput" in g for g in resolved["GlobalSecondaryIndexes"])
    else:
        assert "ProvisionedThroughput" not in resolved
        assert all("ProvisionedThroughput" not in g for g in resolved["GlobalSecondaryIndexes"])
