"""The deploy guide's commands parse as written, and its deployer policy covers the template.

No AWS account is needed, and none is used: each shell command in the guide's code blocks
(docs/operations.md from "Deploying to AWS" to "Configuration", and README's "Deploying") is
checked offline. `tenure` commands go through the CLI's own parser; `aws` commands are looked
up in botocore's service models (the service, the operation, each option, the required ones,
and `--query` compiled as JMESPath); `sam` commands' options are held to the SAM CLI's, from
its command reference (and from `sam <command> --help` where a SAM CLI is installed); `make`
targets are dry-run. A command of any other program fails the test, so nothing in the guide
goes unchecked.

The guide's IAM policy is held to the resource types the SAM transform makes of
infra/template.yaml: every type must be listed below with the actions CloudFormation takes on
it, each allowed by the policy for a resource named as CloudFormation would name it in the
stack `tenure`; the AWS actions of the guide's own `aws` commands must be allowed too.
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import botocore.session
import jmespath
import pytest
from botocore import xform_name
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse
from tenure_cli.main import parser as tenure_parser

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
README = ROOT / "README.md"
TEMPLATE = ROOT / "infra" / "template.yaml"

# The options each `sam` command of the guide may use, from the SAM CLI command reference
# (docs.aws.amazon.com/serverless-application-model/latest/developerguide/
# sam-cli-command-reference-sam-<command>.html): the ones a deploy needs, and the options
# every command shares (--region, --profile, --config-env, --config-file, --debug, --help).
SAM_SHARED = {"--region", "--profile", "--config-env", "--config-file", "--debug", "--help"}
SAM_OPTIONS = {
    "build": {"--use-container", "-u", "--cached", "--parallel", "--template-file", "-t"},
    "deploy": {
        "--guided",
        "-g",
        "--stack-name",
        "--capabilities",
        "--parameter-overrides",
        "--confirm-changeset",
        "--no-confirm-changeset",
        "--resolve-s3",
        "--s3-bucket",
        "--template-file",
        "-t",
        "--tags",
        "--no-execute-changeset",
        "--no-fail-on-empty-changeset",
    },
    "delete": {"--stack-name", "--no-prompts", "--s3-bucket", "--s3-prefix", "--save-params"},
    "validate": {"--template-file", "--template", "-t", "--lint"},
}
# The AWS CLI's own options, accepted by every `aws` command.
AWS_GLOBAL = {"--query", "--output", "--region", "--profile", "--no-cli-pager", "--endpoint-url"}
AWS_OUTPUTS = {"json", "text", "table", "yaml", "yaml-stream"}
# `aws s3 …` is the CLI's own file command, not an API operation: its options from the AWS CLI
# reference (docs.aws.amazon.com/cli/latest/reference/s3/rm.html), and what it calls.
S3_OPTIONS = {"rm": {"--recursive", "--dryrun", "--quiet", "--include", "--exclude"}}
# What each calls, on the bucket and on its objects.
S3_ACTIONS = {"rm": ("s3:ListBucket", "s3:DeleteObject")}
# The CLI's service names that are not botocore's.
AWS_SERVICES = {"s3api": "s3"}

ACCOUNT = "111122223333"
STACK_ARN = f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/tenure/0a1b2c3d"
TABLE_ARN = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/tenure-LeaseTable-1A2B3C4D"
BUCKET_ARN = "arn:aws:s3:::tenure-attachmentsbucket-1a2b3c4d"
FUNCTION_ARN = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:tenure-ApiFunction-1A2B3C4D"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/tenure-ApiFunctionRole-1A2B3C4D"
API_ARN = "arn:aws:apigateway:us-east-1::/apis/a1b2c3d4"
TOPIC_ARN = f"arn:aws:sns:us-east-1:{ACCOUNT}:tenure-InboundEmailTopic-1A2B3C4D"
ANY = "*"  # an action IAM authorizes on no particular resource


def _on(arn: str, *actions: str) -> list[tuple[str, str]]:
    return [(action, arn) for action in actions]


# What CloudFormation does to each resource type the transform makes: create, read, update,
# delete, and a resource as CloudFormation names it in the stack `tenure`.
RESOURCE_TYPES: dict[str, list[tuple[str, str]]] = {
    "AWS::DynamoDB::Table": _on(
        TABLE_ARN,
        "dynamodb:CreateTable",
        "dynamodb:DescribeTable",
        "dynamodb:UpdateTable",
        "dynamodb:DeleteTable",
        "dynamodb:UpdateTimeToLive",
        "dynamodb:DescribeTimeToLive",
        "dynamodb:UpdateContinuousBackups",
        "dynamodb:DescribeContinuousBackups",
    )
    + _on(ANY, "kms:DescribeKey", "kms:CreateGrant"),
    "AWS::S3::Bucket": _on(
        BUCKET_ARN,
        "s3:CreateBucket",
        "s3:DeleteBucket",
        "s3:PutEncryptionConfiguration",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutBucketOwnershipControls",
        "s3:PutLifecycleConfiguration",
        "s3:GetBucketLocation",
    ),
    "AWS::S3::BucketPolicy": _on(
        BUCKET_ARN, "s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucketPolicy"
    ),
    "AWS::Lambda::Function": _on(
        FUNCTION_ARN,
        "lambda:CreateFunction",
        "lambda:GetFunction",
        "lambda:UpdateFunctionCode",
        "lambda:UpdateFunctionConfiguration",
        "lambda:PutFunctionConcurrency",
        "lambda:DeleteFunction",
        "lambda:TagResource",
    )
    + _on(ROLE_ARN, "iam:PassRole"),
    "AWS::Lambda::Permission": _on(FUNCTION_ARN, "lambda:AddPermission", "lambda:RemovePermission"),
    "AWS::Lambda::Url": _on(
        FUNCTION_ARN,
        "lambda:CreateFunctionUrlConfig",
        "lambda:GetFunctionUrlConfig",
        "lambda:UpdateFunctionUrlConfig",
        "lambda:DeleteFunctionUrlConfig",
    ),
    "AWS::Lambda::LayerVersion": _on(
        f"arn:aws:lambda:us-east-1:{ACCOUNT}:layer:tenure-core:1",
        "lambda:PublishLayerVersion",
        "lambda:GetLayerVersion",
        "lambda:DeleteLayerVersion",
    ),
    "AWS::Lambda::EventSourceMapping": _on(
        f"arn:aws:lambda:us-east-1:{ACCOUNT}:event-source-mapping:0a1b2c3d",
        "lambda:CreateEventSourceMapping",
        "lambda:GetEventSourceMapping",
        "lambda:UpdateEventSourceMapping",
        "lambda:DeleteEventSourceMapping",
    )
    + _on(TABLE_ARN + "/stream/2026-01-01T00:00:00.000", "dynamodb:DescribeStream"),
    "AWS::IAM::Role": _on(
        ROLE_ARN,
        "iam:CreateRole",
        "iam:GetRole",
        "iam:PutRolePolicy",
        "iam:DeleteRolePolicy",
        "iam:AttachRolePolicy",
        "iam:DetachRolePolicy",
        "iam:DeleteRole",
        "iam:TagRole",
    ),
    "AWS::Logs::LogGroup": _on(
        f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/lambda/tenure-ApiFunction-1A2B3C4D",
        "logs:CreateLogGroup",
        "logs:PutRetentionPolicy",
        "logs:DescribeLogGroups",
        "logs:DeleteLogGroup",
    ),
    "AWS::ApiGatewayV2::Api": _on(
        API_ARN, "apigateway:POST", "apigateway:GET", "apigateway:PUT", "apigateway:DELETE"
    ),
    "AWS::ApiGatewayV2::Stage": _on(
        API_ARN + "/stages/$default", "apigateway:POST", "apigateway:PATCH", "apigateway:DELETE"
    )
    + _on(
        ANY,
        "logs:CreateLogDelivery",
        "logs:GetLogDelivery",
        "logs:UpdateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:DescribeResourcePolicies",
    ),
    "AWS::SQS::Queue": _on(
        f"arn:aws:sqs:us-east-1:{ACCOUNT}:tenure-InboundQueue-1A2B3C4D",
        "sqs:CreateQueue",
        "sqs:GetQueueAttributes",
        "sqs:SetQueueAttributes",
        "sqs:DeleteQueue",
    ),
    "AWS::SQS::QueuePolicy": _on(
        f"arn:aws:sqs:us-east-1:{ACCOUNT}:tenure-InboundQueue-1A2B3C4D", "sqs:SetQueueAttributes"
    ),
    "AWS::SNS::Topic": _on(
        TOPIC_ARN, "sns:CreateTopic", "sns:GetTopicAttributes", "sns:DeleteTopic"
    ),
    "AWS::SNS::TopicPolicy": _on(TOPIC_ARN, "sns:SetTopicAttributes"),
    "AWS::SNS::Subscription": _on(TOPIC_ARN, "sns:Subscribe")
    + _on(
        TOPIC_ARN + ":0a1b2c3d-0000-4000-8000-000000000000",
        "sns:GetSubscriptionAttributes",
        "sns:Unsubscribe",
    ),
    "AWS::Events::EventBus": _on(
        f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/tenure-events",
        "events:CreateEventBus",
        "events:DescribeEventBus",
        "events:DeleteEventBus",
    ),
    "AWS::Events::Rule": _on(
        f"arn:aws:events:us-east-1:{ACCOUNT}:rule/tenure-events/tenure-WakeRule-1A2B3C4D",
        "events:PutRule",
        "events:DescribeRule",
        "events:PutTargets",
        "events:RemoveTargets",
        "events:DeleteRule",
    ),
    "AWS::Scheduler::ScheduleGroup": _on(
        f"arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule-group/tenure-rules",
        "scheduler:CreateScheduleGroup",
        "scheduler:GetScheduleGroup",
        "scheduler:DeleteScheduleGroup",
    ),
    "AWS::Scheduler::Schedule": _on(
        f"arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/default/tenure-EveryMinute-1A2B3C4D",
        "scheduler:CreateSchedule",
        "scheduler:GetSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:DeleteSchedule",
    )
    + _on(
        f"arn:aws:iam::{ACCOUNT}:role/tenure-SweeperFunctionEveryMinuteRole-1A2B", "iam:PassRole"
    ),
    "AWS::SES::ReceiptRuleSet": _on(
        ANY, "ses:CreateReceiptRuleSet", "ses:DescribeReceiptRuleSet", "ses:DeleteReceiptRuleSet"
    ),
    "AWS::SES::ReceiptRule": _on(
        ANY,
        "ses:CreateReceiptRule",
        "ses:DescribeReceiptRule",
        "ses:UpdateReceiptRule",
        "ses:DeleteReceiptRule",
    ),
    "AWS::CloudWatch::Alarm": _on(
        f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:tenure-Api5xxAlarm-1A2B3C4D",
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:DeleteAlarms",
    ),
    "AWS::CloudWatch::Dashboard": _on(
        f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/tenure-tenure",
        "cloudwatch:PutDashboard",
        "cloudwatch:GetDashboard",
        "cloudwatch:DeleteDashboards",
    ),
    "AWS::ApplicationAutoScaling::ScalableTarget": _on(
        ANY,
        "application-autoscaling:RegisterScalableTarget",
        "application-autoscaling:DescribeScalableTargets",
        "application-autoscaling:DeregisterScalableTarget",
        "iam:CreateServiceLinkedRole",
    ),
    "AWS::ApplicationAutoScaling::ScalingPolicy": _on(
        ANY,
        "application-autoscaling:PutScalingPolicy",
        "application-autoscaling:DescribeScalingPolicies",
        "application-autoscaling:DeleteScalingPolicy",
    ),
}

SAM_BUCKET = "arn:aws:s3:::aws-sam-cli-managed-default-samclisourcebucket-1a2b3c4d"
# Beyond the resources: the deploy itself (a change set of the SAM transform, on the stack and
# on the SAM CLI's managed stack and bucket) and `tenure admin bootstrap` / `migrate` (the
# table found through the stack, its items read and written).
DEPLOY_ITSELF: list[tuple[str, str]] = [
    *_on(
        STACK_ARN,
        "cloudformation:CreateChangeSet",
        "cloudformation:DescribeChangeSet",
        "cloudformation:ExecuteChangeSet",
        "cloudformation:DescribeStacks",
        "cloudformation:DescribeStackEvents",
        "cloudformation:DescribeStackResources",
        "cloudformation:GetTemplate",
        "cloudformation:DeleteStack",
    ),
    *_on(
        "arn:aws:cloudformation:us-east-1:aws:transform/Serverless-2016-10-31",
        "cloudformation:CreateChangeSet",
    ),
    *_on(
        f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/aws-sam-cli-managed-default/0a1b",
        "cloudformation:CreateChangeSet",
        "cloudformation:ExecuteChangeSet",
        "cloudformation:DescribeStacks",
    ),
    *_on(ANY, "cloudformation:GetTemplateSummary", "cloudformation:ValidateTemplate"),
    *_on(SAM_BUCKET, "s3:CreateBucket", "s3:PutBucketVersioning", "s3:ListBucket"),
    *_on(SAM_BUCKET + "/tenure/0a1b2c3d.template", "s3:PutObject", "s3:GetObject"),
    *_on(
        TABLE_ARN,
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "dynamodb:BatchGetItem",
        "dynamodb:TransactWriteItems",
    ),
]
# Where each `aws` service's commands in the guide act, for the policy check.
GUIDE_RESOURCES = {"cloudformation": STACK_ARN, "dynamodb": TABLE_ARN, "s3": BUCKET_ARN}


# ---- the guide's commands --------------------------------------------------------------


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def guide() -> str:
    ops = _section(OPERATIONS.read_text(), "\n## Deploying to AWS\n", "\n## Configuration\n")
    readme = _section(README.read_text(), "\n## Deploying\n", "\n## ")
    return ops + readme


def commands(text: str) -> list[list[str]]:
    """Every simple command in the ```sh blocks: continuation lines joined, comments dropped,
    `a && b` and `a; b` split, leading VAR=value assignments and `export` lines skipped, and
    each `<…>` placeholder made a word (`<command>` a harmless `true`)."""
    found: list[list[str]] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n", " ", block)
        for line in joined.splitlines():
            line = line.replace("<command>", "true")
            line = re.sub(r"<[^<>]+>", "PLACEHOLDER", line)
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", ";", "||", "|"):
                    while command and re.fullmatch(r"[A-Z_]+=\S*", command[0]):
                        command.pop(0)
                    if command and command[0] != "export":
                        found.append(command)
                    command = []
                else:
                    command.append(word)
    return found


GUIDE_COMMANDS = commands(guide())


def _ids() -> list[str]:
    return [" ".join(c)[:60] for c in GUIDE_COMMANDS]


def test_the_guide_walks_a_whole_deploy() -> None:
    programs = [c[0] for c in GUIDE_COMMANDS]
    text = [" ".join(c) for c in GUIDE_COMMANDS]
    for wanted in ("sam build", "sam deploy --guided", "tenure admin bootstrap", "sam delete"):
        assert any(t.startswith(wanted) for t in text), wanted
    assert {"aws", "make", "sam", "tenure"} <= set(programs)


@pytest.mark.parametrize("argv", GUIDE_COMMANDS, ids=_ids())
def test_each_command_of_the_guide_parses_as_written(argv: list[str]) -> None:
    program, args = argv[0], argv[1:]
    if program == "tenure":
        check_tenure(args)
    elif program == "aws":
        check_aws(args)
    elif program == "sam":
        check_sam(args)
    elif program == "make":
        done = subprocess.run(
            ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    else:
        pytest.fail(f"{program}: the guide runs a program this test cannot check")


def check_tenure(args: list[str]) -> None:
    try:
        tenure_parser().parse_args(args)
    except SystemExit as refused:
        pytest.fail(f"tenure {' '.join(args)}: refused by the CLI's parser ({refused.code})")


def _aws_options(args: list[str]) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    name = None
    for word in args:
        if word.startswith("--"):
            name = word
            options[name] = []
        elif name is not None:
            options[name].append(word)
        else:
            options.setdefault("", []).append(word)  # a positional argument
    return options


def _aws_common(options: dict[str, list[str]]) -> None:
    if "--query" in options:
        jmespath.compile(" ".join(options["--query"]))
    if "--output" in options:
        assert options["--output"] and options["--output"][0] in AWS_OUTPUTS, options["--output"]


def check_aws(args: list[str]) -> None:
    assert len(args) >= 2, "aws SERVICE OPERATION …"
    service, operation, rest = args[0], args[1], args[2:]
    options = _aws_options(rest)
    _aws_common(options)
    if service == "s3":
        known = S3_OPTIONS.get(operation)
        assert known is not None, f"aws s3 {operation}: not a file command this test knows"
        paths = options.pop("", [])
        assert paths and all(p.startswith("s3://") for p in paths), paths
        for option in options:
            assert option in known | AWS_GLOBAL, f"aws s3 {operation} {option}"
        return
    session = botocore.session.get_session()
    model = session.get_service_model(AWS_SERVICES.get(service, service))
    operations = {xform_name(op, "-"): op for op in model.operation_names}
    assert operation in operations, f"aws {service}: no operation {operation}"
    shape = model.operation_model(operations[operation]).input_shape
    members = shape.members if shape is not None else {}
    by_option = {f"--{xform_name(m, '-')}": m for m in members}
    given = set()
    assert "" not in options, f"aws {service} {operation}: stray words {options['']}"
    for option, values in options.items():
        if option in AWS_GLOBAL:
            continue
        negated = option.replace("--no-", "--", 1)
        if option.startswith("--no-") and negated in by_option:
            member = by_option[negated]
            assert members[member].type_name == "boolean", option
            assert values == [], f"{option} takes no value"
        else:
            assert option in by_option, f"aws {service} {operation}: no option {option}"
            member = by_option[option]
            if members[member].type_name == "boolean":
                assert values == [], f"{option} takes no value"
            else:
                assert values, f"{option} needs a value"
        given.add(member)
    required = set(shape.required_members) if shape is not None else set()
    assert required <= given, f"aws {service} {operation}: missing {required - given}"


def _installed_sam() -> str | None:
    venv = ROOT / ".tenure" / "sam-venv" / "bin" / "sam"
    return str(venv) if venv.exists() else shutil.which("sam")


@functools.cache
def sam_help(sam: str, command: str) -> str:
    """`sam COMMAND --help` (the SAM CLI takes seconds to start: once per command)."""
    return subprocess.run(
        [sam, command, "--help"], capture_output=True, text=True, timeout=120, check=False
    ).stdout


def check_sam(args: list[str]) -> None:
    assert args, "sam COMMAND …"
    command, rest = args[0], args[1:]
    assert command in SAM_OPTIONS, f"sam {command}: not a command this test knows"
    options = [w.split("=", 1)[0] for w in rest if w.startswith("-")]
    for option in options:
        assert option in SAM_OPTIONS[command] | SAM_SHARED, f"sam {command}: no option {option}"
    sam = _installed_sam()
    if sam is not None:  # the SAM CLI itself, where there is one, has the last word
        shown = sam_help(sam, command)
        for option in options:
            assert re.search(rf"(^|[\s,/]){re.escape(option)}\b", shown), f"sam {command} {option}"


def test_sam_options_are_a_subset_of_the_installed_sam_cli() -> None:
    """Where a SAM CLI is installed (make deploy-check SAM_CLI=1), the list above is its own."""
    sam = _installed_sam()
    if sam is None:
        pytest.skip("no SAM CLI here (make deploy-check SAM_CLI=1 installs one)")
    for command, options in SAM_OPTIONS.items():
        shown = sam_help(sam, command)
        assert "Usage:" in shown, f"sam {command} --help printed no usage"
        for option in options | SAM_SHARED:
            assert re.search(rf"(^|[\s,/]){re.escape(option)}\b", shown), f"sam {command} {option}"


# ---- the deployer's policy -------------------------------------------------------------


def deployer_policy() -> dict[str, Any]:
    section = _section(
        OPERATIONS.read_text(), "### What a deployer needs: IAM permissions", "\n### "
    )
    blocks = re.findall(r"```json\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "one policy, in one json block"
    policy: dict[str, Any] = json.loads(blocks[0])
    return policy


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def allows(policy: dict[str, Any], action: str, resource: str) -> bool:
    """Whether an Allow statement names the action (case-insensitive, wildcards) on the
    resource (case-sensitive, wildcards). Conditions are taken as met."""
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        actions = [a.lower() for a in _listed(statement["Action"])]
        if not any(fnmatch.fnmatchcase(action.lower(), a) for a in actions):
            continue
        if any(fnmatch.fnmatchcase(resource, r) for r in _listed(statement["Resource"])):
            return True
    return False


def transformed_types() -> set[str]:
    template = dict(yaml_parse(TEMPLATE.read_text()))
    packaged = copy.deepcopy(template)
    for res in packaged["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://bucket/{Path(props[key]).name}.zip"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the translator needs one, any
        out = transform(packaged, {}, NoManagedPolicies())
    # Conditions are CloudFormation's to evaluate: every conditional resource is here.
    return {r["Type"] for r in out["Resources"].values()}


def test_the_policy_is_valid_and_scoped_to_the_stack() -> None:
    policy = deployer_policy()
    assert policy["Version"] == "2012-10-17"
    for statement in policy["Statement"]:
        assert set(statement) <= {"Sid", "Effect", "Action", "Resource", "Condition"}
        for action in _listed(statement["Action"]):
            assert re.fullmatch(r"[a-z0-9-]+:[A-Za-z*]+", action), action
            assert action.split(":")[1] != "*", f"{action}: a whole service is too much"
    # The roles CloudFormation creates and passes are the stack's own, not any role.
    assert not allows(policy, "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/Admin")
    assert not allows(
        policy, "dynamodb:DeleteTable", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/x"
    )
    assert not allows(policy, "s3:DeleteObject", "arn:aws:s3:::someone-elses-bucket/key")


def test_every_resource_type_of_the_template_is_listed_here() -> None:
    unknown = transformed_types() - set(RESOURCE_TYPES)
    assert unknown == set(), (
        f"new resource types {sorted(unknown)}: list CloudFormation's actions on them in "
        "RESOURCE_TYPES and allow them in docs/operations.md's deployer policy"
    )


def test_the_policy_allows_what_a_deploy_and_a_teardown_do() -> None:
    policy = deployer_policy()
    wanted = [pair for kind in sorted(transformed_types()) for pair in RESOURCE_TYPES[kind]]
    wanted += DEPLOY_ITSELF
    for argv in GUIDE_COMMANDS:  # the guide's own aws commands
        if argv[0] != "aws":
            continue
        service, operation = argv[1], argv[2]
        if service == "s3":
            on_bucket, on_objects = S3_ACTIONS[operation]
            wanted += [(on_bucket, BUCKET_ARN), (on_objects, BUCKET_ARN + "/key")]
            continue
        model = botocore.session.get_session().get_service_model(service)
        name = {xform_name(op, "-"): op for op in model.operation_names}[operation]
        wanted.append((f"{model.signing_name}:{name}", GUIDE_RESOURCES[service]))
    denied = sorted({f"{a} on {r}" for a, r in wanted if not allows(policy, a, r)})
    assert denied == [], "\n".join(denied)
