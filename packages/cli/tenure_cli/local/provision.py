"""Creates every resource of infra/template.yaml in DynamoDB Local and moto's server."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml

from tenure_cli.local.engines import ENGINE_REGION

# The template itself when this runs from a checkout; an installed wheel carries a copy beside
# this module instead (setup.py puts it there), since infra/ is not a package.
CHECKOUT_TEMPLATE = Path(__file__).resolve().parents[4] / "infra" / "template.yaml"
SHIPPED_TEMPLATE = Path(__file__).resolve().with_name("template.yaml")
# The local AWS side runs in one region whatever the caller's own AWS settings say: the one
# the engines keep the stack in (DynamoDB Local keeps each region's tables apart).
REGION = ENGINE_REGION
# moto's default account: the one its ARNs carry.
ACCOUNT_ID = "123456789012"
# AWS::NoValue resolves to this marker, and a property holding it is dropped (as CloudFormation
# drops it).
NO_VALUE = "\x00AWS::NoValue"
PSEUDO_PARAMETERS = {
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Region": REGION,
    "AWS::Partition": "aws",
    "AWS::NoValue": NO_VALUE,
}
# Served in-process by the local stack rather than created anywhere.
IN_PROCESS = {
    "AWS::Serverless::Function": "runs in the front door's worker processes or a local loop",
    "AWS::Serverless::HttpApi": "the local front door",
    "AWS::Serverless::LayerVersion": "the installed tenure package",
    "AWS::S3::BucketPolicy": "moto does not enforce bucket policies",
    "AWS::SNS::TopicPolicy": "moto does not enforce topic policies",
    "AWS::IAM::Role": "moto does not enforce IAM; the ARN is what the schedules name",
    "AWS::Lambda::Url": "a listener of the local front door",
    "AWS::Lambda::Permission": "nothing checks who may invoke a function here",
}
# Made on AWS only: nothing local emits their metrics or would scale on them.
AWS_ONLY = {
    "AWS::CloudWatch::Alarm": "not made locally (no CloudWatch metrics here)",
    "AWS::CloudWatch::Dashboard": "not made locally (no CloudWatch metrics here)",
    "AWS::ApplicationAutoScaling::ScalableTarget": "not made locally (no capacity scaling)",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "not made locally (no capacity scaling)",
}
# The order resources are made in: each only after what it refers to (a queue's dead-letter
# queue, a subscription's topic and queue). Unlisted kinds come last.
ORDER = [
    "AWS::DynamoDB::Table",
    "AWS::S3::Bucket",
    "AWS::SNS::Topic",
    "AWS::SQS::Queue",
    "AWS::Logs::LogGroup",
    "AWS::Events::EventBus",
    "AWS::Events::Rule",
    "AWS::SNS::Subscription",
    "AWS::SQS::QueuePolicy",
]
# A `${Name}` or `${Resource.Attribute}` in a Fn::Sub string.
SUB_REFERENCE = re.compile(r"\$\{([A-Za-z0-9.:]+)\}")
# stack.json's `aws.resources`: key -> the template resource whose Ref it holds.
STACK_RESOURCES = {
    "inbound_bucket": "InboundBucket",
    "inbound_topic_arn": "InboundEmailTopic",
    "inbound_queue_url": "InboundQueue",
    "inbound_dlq_url": "InboundDeadLetterQueue",
    "attachments_bucket": "AttachmentsBucket",
    "log_group": "LeaseLogs",
    "event_bus": "EventBus",
    "wake_queue_url": "WakeQueue",
}


def function_arn(prefix: str, logical: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{prefix}-{logical}"


def _units(throughput: dict[str, Any]) -> dict[str, int]:
    return {key: int(value) for key, value in throughput.items()}


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form tags (!Ref, !GetAtt, !Sub, …)."""


def _tag(name: str) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "Fn::GetAtt":
                value = str(value).split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {name: value}

    return construct


for _short, _long in {
    "!Ref": "Ref",
    "!GetAtt": "Fn::GetAtt",
    "!Sub": "Fn::Sub",
    "!Join": "Fn::Join",
    "!If": "Fn::If",
    "!Equals": "Fn::Equals",
    "!Not": "Fn::Not",
    "!Select": "Fn::Select",
}.items():
    _CfnLoader.add_constructor(_short, _tag(_long))


def template_path() -> Path:
    """infra/template.yaml of the checkout, else the copy the installed package carries."""
    for path in (CHECKOUT_TEMPLATE, SHIPPED_TEMPLATE):
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"neither {CHECKOUT_TEMPLATE} nor {SHIPPED_TEMPLATE} exists: the local stack is built "
        "from infra/template.yaml (run it from a checkout, or reinstall the package)"
    )


def load_template(path: Path | None = None) -> dict[str, Any]:
    text = (path or template_path()).read_text()
    return dict(yaml.load(text, Loader=_CfnLoader))


@dataclass
class Provisioned:
    logical_id: str
    kind: str
    local_name: str


class Provisioner:
    def __init__(
        self,
        ddb_endpoint: str,
        aws_endpoint: str,
        table_name: str,
        prefix: str,
        function_urls: dict[str, str] | None = None,
        parameters: dict[str, str] | None = None,
    ):
        # Each function URL's local listener (function's logical id -> its address, ending in
        # "/" as a function URL does): what a template's reference to that URL resolves to.
        self.function_urls = function_urls or {}
        self.ddb = boto3.client("dynamodb", endpoint_url=ddb_endpoint, region_name=REGION)
        self.aws_endpoint = aws_endpoint
        self.table_name = table_name
        self.prefix = prefix
        self.template = load_template()
        self.params = {k: v.get("Default") for k, v in self.template.get("Parameters", {}).items()}
        # Parameters given as a deploy would (`tenure local --outbound-events`), each one the
        # template declares and allows.
        for name, value in (parameters or {}).items():
            allowed = self.template["Parameters"][name].get("AllowedValues")
            if allowed is not None and value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
            self.params[name] = value
        self.names: dict[str, str] = {}
        self.arns: dict[str, dict[str, str]] = {}

    def _client(self, service: str) -> Any:
        make: Any = boto3.client
        return make(service, endpoint_url=self.aws_endpoint, region_name=REGION)

    def resolve(self, value: Any) -> Any:
        """The few intrinsic functions the template's provisioned properties use."""
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                if arg in PSEUDO_PARAMETERS:
                    return PSEUDO_PARAMETERS[arg]
                return self.params.get(arg, self.names.get(arg, arg))
            if fn == "Fn::GetAtt":
                logical, attr = arg
                return self.arns.get(logical, {}).get(attr, f"{logical}.{attr}")
            if fn == "Fn::If":
                name, then, otherwise = arg
                return self.resolve(then if self.condition(name) else otherwise)
            if fn == "Fn::Sub" and isinstance(arg, str):
                return SUB_REFERENCE.sub(lambda m: str(self._substitute(m[1])), arg)
        if isinstance(value, dict):
            resolved = {k: self.resolve(v) for k, v in value.items()}
            return {k: v for k, v in resolved.items() if v != NO_VALUE}
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v != NO_VALUE]
        return value

    def _substitute(self, name: str) -> Any:
        """One `${...}` of a Fn::Sub: a resource's attribute, or a Ref."""
        logical, dot, attr = name.partition(".")
        return self.resolve({"Fn::GetAtt": [logical, attr]} if dot else {"Ref": name})

    def condition(self, name: str) -> bool:
        """A template condition, as its parameters' local defaults make it."""
        return bool(self._evaluate(self.template.get("Conditions", {})[name]))

    def _evaluate(self, expr: Any) -> Any:
        if isinstance(expr, dict) and len(expr) == 1:
            ((fn, arg),) = expr.items()
            if fn == "Fn::Not":
                return not self._evaluate(arg[0])
            if fn == "Fn::Equals":
                return self._evaluate(arg[0]) == self._evaluate(arg[1])
            if fn == "Condition":
                return self.condition(arg)
        return self.resolve(expr)

    def run(self) -> list[Provisioned]:
        done: list[Provisioned] = []
        resources = self.template["Resources"]
        order = sorted(
            resources.items(),
            key=lambda kv: (
                ORDER.index(kv[1]["Type"]) if kv[1]["Type"] in ORDER else len(ORDER),
                # Dead-letter queues before the queues that redrive to them.
                "RedrivePolicy" in kv[1].get("Properties", {}),
            ),
        )
        for logical, res in order:
            kind, props = res["Type"], res.get("Properties", {})
            if "Condition" in res and not self.condition(res["Condition"]):
                done.append(Provisioned(logical, kind, f"skipped: {res['Condition']} is false"))
                continue
            if kind == "AWS::DynamoDB::Table":
                done.append(self._table(logical, props))
            elif kind == "AWS::S3::Bucket":
                done.append(self._bucket(logical, props))
            elif kind == "AWS::SQS::Queue":
                done.append(self._queue(logical, props))
            elif kind == "AWS::Logs::LogGroup":
                done.append(self._log_group(logical, props))
            elif kind == "AWS::SNS::Topic":
                done.append(self._topic(logical, props))
            elif kind == "AWS::SNS::Subscription":
                done.append(self._subscription(logical, props))
            elif kind == "AWS::SQS::QueuePolicy":
                done.extend(self._queue_policy(logical, props))
            elif kind == "AWS::Events::EventBus":
                done.append(self._event_bus(logical, props))
            elif kind == "AWS::Events::Rule":
                done.append(self._event_rule(logical, props))
            elif kind == "AWS::Serverless::Function":
                # Its ARN is what a schedule targets; the local scheduler loop reads it back.
                self.arns[logical] = {"Arn": function_arn(self.prefix, logical)}
                done.append(Provisioned(logical, kind, IN_PROCESS[kind]))
                done.extend(self._schedules(logical, props))
            elif kind == "AWS::Lambda::Url":
                target = self.resolve(props["TargetFunctionArn"])
                self.arns[logical] = {"FunctionUrl": self.function_urls.get(target, "")}
                where = self.function_urls.get(target) or "no local listener"
                done.append(Provisioned(logical, kind, where))
            elif kind == "AWS::Scheduler::ScheduleGroup":
                done.append(self._schedule_group(logical, props))
            elif kind == "AWS::IAM::Role":
                arn = f"arn:aws:iam::{ACCOUNT_ID}:role/{self.prefix}-{logical}"
                self.arns[logical] = {"Arn": arn}
                done.append(Provisioned(logical, kind, arn))
            elif kind in IN_PROCESS:
                done.append(Provisioned(logical, kind, IN_PROCESS[kind]))
            elif kind in AWS_ONLY:
                done.append(Provisioned(logical, kind, AWS_ONLY[kind]))
            else:
                raise ValueError(f"{logical}: the local stack cannot provision {kind}")
        return done

    def _table(self, logical: str, props: dict[str, Any]) -> Provisioned:
        # The capacity mode and, when PROVISIONED, the table's and indexes' units come from the
        # parameters (DynamoDB Local takes either mode).
        props = self.resolve(props)
        args: dict[str, Any] = {
            "TableName": self.table_name,
            "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
            "AttributeDefinitions": props["AttributeDefinitions"],
            "KeySchema": props["KeySchema"],
        }
        if "ProvisionedThroughput" in props:
            args["ProvisionedThroughput"] = _units(props["ProvisionedThroughput"])
        if props.get("GlobalSecondaryIndexes"):
            args["GlobalSecondaryIndexes"] = [
                {**gsi, "ProvisionedThroughput": _units(gsi["ProvisionedThroughput"])}
                if "ProvisionedThroughput" in gsi
                else gsi
                for gsi in props["GlobalSecondaryIndexes"]
            ]
        if "StreamSpecification" in props:
            args["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": props["StreamSpecification"]["StreamViewType"],
            }
        existing = self.ddb.list_tables()["TableNames"]
        if self.table_name not in existing:
            self.ddb.create_table(**args)
            self.ddb.get_waiter("table_exists").wait(TableName=self.table_name)
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            # CreateTable cannot turn TTL on; the template's specification is applied here.
            state = self.ddb.describe_time_to_live(TableName=self.table_name)
            if state["TimeToLiveDescription"].get("TimeToLiveStatus") not in (
                "ENABLED",
                "ENABLING",
            ):
                self.ddb.update_time_to_live(
                    TableName=self.table_name,
                    TimeToLiveSpecification={
                        "Enabled": True,
                        "AttributeName": ttl["AttributeName"],
                    },
                )
        desc = self.ddb.describe_table(TableName=self.table_name)["Table"]
        self.names[logical] = self.table_name
        self.arns[logical] = {
            "Arn": desc["TableArn"],
            "StreamArn": desc.get("LatestStreamArn", ""),
        }
        return Provisioned(logical, "AWS::DynamoDB::Table", self.table_name)

    def _bucket(self, logical: str, props: dict[str, Any]) -> Provisioned:
        s3 = self._client("s3")
        name = f"{self.prefix}-{logical.lower()}"
        s3.create_bucket(Bucket=name)
        if "BucketEncryption" in props:
            rules = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            s3.put_bucket_encryption(
                Bucket=name,
                ServerSideEncryptionConfiguration={
                    "Rules": [
                        {"ApplyServerSideEncryptionByDefault": r["ServerSideEncryptionByDefault"]}
                        for r in rules
                    ]
                },
            )
        if "PublicAccessBlockConfiguration" in props:
            s3.put_public_access_block(
                Bucket=name,
                PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"],
            )
        if "CorsConfiguration" in props:
            s3.put_bucket_cors(
                Bucket=name,
                CORSConfiguration={
                    "CORSRules": [
                        {
                            "AllowedMethods": rule["AllowedMethods"],
                            "AllowedOrigins": rule["AllowedOrigins"],
                            "MaxAgeSeconds": int(rule.get("MaxAge", 0)),
                        }
                        for rule in props["CorsConfiguration"]["CorsRules"]
                    ]
                },
            )
        if "LifecycleConfiguration" in props:
            rules = []
            for rule in self.resolve(props["LifecycleConfiguration"]["Rules"]):
                local: dict[str, Any] = {
                    "ID": rule["Id"],
                    "Status": rule["Status"],
                    "Filter": {"Prefix": rule.get("Prefix", "")},
                }
                if "ExpirationInDays" in rule:
                    local["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
                if "AbortIncompleteMultipartUpload" in rule:
                    days = rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
                    local["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": int(days)}
                rules.append(local)
            s3.put_bucket_lifecycle_configuration(
                Bucket=name, LifecycleConfiguration={"Rules": rules}
            )
        self.names[logical] = name
        self.arns[logical] = {"Arn": f"arn:aws:s3:::{name}"}
        return Provisioned(logical, "AWS::S3::Bucket", name)

    def _queue(self, logical: str, props: dict[str, Any]) -> Provisioned:
        sqs = self._client("sqs")
        name = f"{self.prefix}-{logical}"
        attrs: dict[str, str] = {
            key: str(props[key])
            for key in ("VisibilityTimeout", "MessageRetentionPeriod")
            if key in props
        }
        if "RedrivePolicy" in props:
            attrs["RedrivePolicy"] = json.dumps(self.resolve(props["RedrivePolicy"]))
        url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.names[logical] = url
        self.arns[logical] = {"Arn": arn, "QueueName": name}
        return Provisioned(logical, "AWS::SQS::Queue", url)

    def stack_resources(self) -> dict[str, str]:
        """stack.json's `aws.resources`: what each resource's Ref is in this run."""
        missing = sorted(ref for ref in STACK_RESOURCES.values() if ref not in self.names)
        if missing:
            raise ValueError(f"infra/template.yaml lacks {', '.join(missing)}")
        return {key: self.names[ref] for key, ref in STACK_RESOURCES.items()}

    def _topic(self, logical: str, props: dict[str, Any]) -> Provisioned:
        sns = self._client("sns")
        name = f"{self.prefix}-{logical}"
        attrs = {"DisplayName": props["DisplayName"]} if "DisplayName" in props else {}
        arn = str(sns.create_topic(Name=name, Attributes=attrs)["TopicArn"])
        self.names[logical] = arn  # a topic's Ref is its ARN
        self.arns[logical] = {"TopicArn": arn, "TopicName": name}
        return Provisioned(logical, "AWS::SNS::Topic", arn)

    def _subscription(self, logical: str, props: dict[str, Any]) -> Provisioned:
        sns = self._client("sns")
        raw = str(props.get("RawMessageDelivery", False)).lower()
        arn = sns.subscribe(
            TopicArn=self.resolve(props["TopicArn"]),
            Protocol=props["Protocol"],
            Endpoint=self.resolve(props["Endpoint"]),
            Attributes={"RawMessageDelivery": raw},
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
        self.names[logical] = arn
        return Provisioned(logical, "AWS::SNS::Subscription", arn)

    def _queue_policy(self, logical: str, props: dict[str, Any]) -> list[Provisioned]:
        sqs = self._client("sqs")
        policy = json.dumps(self.resolve(props["PolicyDocument"]))
        made = []
        for url in self.resolve(props["Queues"]):
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
            made.append(Provisioned(logical, "AWS::SQS::QueuePolicy", url))
        return made

    def _event_bus(self, logical: str, props: dict[str, Any]) -> Provisioned:
        events = self._client("events")
        # The template names the bus after the CloudFormation stack; locally the prefix does.
        name = f"{self.prefix}-{logical}"
        arn = events.create_event_bus(Name=name)["EventBusArn"]
        self.names[logical] = name  # a bus's Ref is its name
        self.arns[logical] = {"Arn": arn, "Name": name}
        return Provisioned(logical, "AWS::Events::EventBus", name)

    def _event_rule(self, logical: str, props: dict[str, Any]) -> Provisioned:
        """A rule on one of the template's buses, with its targets (queues, locally)."""
        events = self._client("events")
        name = f"{self.prefix}-{logical}"
        bus = self.resolve(props["EventBusName"])
        arn = events.put_rule(
            Name=name,
            EventBusName=bus,
            EventPattern=json.dumps(self.resolve(props["EventPattern"])),
            State=props.get("State", "ENABLED"),
            Description=props.get("Description", ""),
        )["RuleArn"]
        targets = [{"Id": t["Id"], "Arn": self.resolve(t["Arn"])} for t in props.get("Targets", [])]
        if targets:
            events.put_targets(Rule=name, EventBusName=bus, Targets=targets)
        self.names[logical] = name
        self.arns[logical] = {"Arn": arn}
        return Provisioned(logical, "AWS::Events::Rule", name)

    def _log_group(self, logical: str, props: dict[str, Any]) -> Provisioned:
        logs = self._client("logs")
        group = f"/{self.prefix}/{logical}"
        existing = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        if not any(g["logGroupName"] == group for g in existing):
            logs.create_log_group(logGroupName=group)
        days = self.resolve(props.get("RetentionInDays", {"Ref": "LogRetentionDays"}))
        logs.put_retention_policy(logGroupName=group, retentionInDays=int(days))
        self.names[logical] = group
        return Provisioned(logical, "AWS::Logs::LogGroup", group)

    def _schedule_group(self, logical: str, props: dict[str, Any]) -> Provisioned:
        scheduler = self._client("scheduler")
        name = f"{self.prefix}-rules"
        existing = scheduler.list_schedule_groups(NamePrefix=name)["ScheduleGroups"]
        if not any(g["Name"] == name for g in existing):
            scheduler.create_schedule_group(Name=name)
        self.names[logical] = name  # a group's Ref is its name
        return Provisioned(logical, "AWS::Scheduler::ScheduleGroup", name)

    def function_environment(self, logical: str) -> dict[str, str]:
        """A function's own Environment variables, resolved against what was provisioned."""
        props = self.template["Resources"][logical]["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        return {name: str(self.resolve(value)) for name, value in variables.items()}

    def _schedules(self, logical: str, props: dict[str, Any]) -> list[Provisioned]:
        made: list[Provisioned] = []
        for event_name, event in props.get("Events", {}).items():
            if event.get("Type") != "ScheduleV2":
                continue
            spec = event["Properties"]
            scheduler = self._client("scheduler")
            name = f"{self.prefix}-{logical}-{event_name}"
            existing = scheduler.list_schedules(NamePrefix=name)["Schedules"]
            if not any(s["Name"] == name for s in existing):
                scheduler.create_schedule(
                    Name=name,
                    ScheduleExpression=spec["ScheduleExpression"],
                    FlexibleTimeWindow=spec.get("FlexibleTimeWindow", {"Mode": "OFF"}),
                    Target={
                        "Arn": f"arn:aws:lambda:us-east-1:000000000000:function:{logical}",
                        "RoleArn": "arn:aws:iam::000000000000:role/tenure-local-scheduler",
                    },
                )
            made.append(Provisioned(f"{logical}.{event_name}", "AWS::Scheduler::Schedule", name))
        return made
