"""Every AWS call a Lambda function's code makes in the tests, noted as IAM authorizes it.

Which function: each function's code is entered through the callables in `ENTRIES` (what its
functions/<dir>/app.py handler calls, and the reactor's pieces the local stack and the
conformance tier call directly). `install` wraps them so that a call runs with `FUNCTION`
set to the template's function name; a context variable, so it reaches the threads that
anyio hands the MCP tools to. The outermost entry wins: the worker function checking a bearer
with the authorizer's code is still the worker function. Calls made outside any entry (a
test's own setup, the service driven directly) belong to no function and are not noted.

What is noted: botocore's `before-parameter-build` event, which every API call and every
presigned URL passes through with the request's own parameters, becomes one or more IAM
requests (`Call`): action, resource and the condition keys a policy may test, as IAM
evaluates that operation (a transaction is one request per item, a CopyObject a read of the
source and a write of the target, a DeleteObjects a DeleteObject per key). A presigned URL is
noted as the request it signs: S3 runs the later PUT or GET with the signer's permissions.
A HEAD or GET that S3 answers 404 also needs s3:ListBucket (without it S3 answers 403), so
`after-call` notes that too. Resources are written as CloudFormation `Fn::Sub` strings over
the template's logical names (`${LeaseTable.Arn}`), so the check resolves them with the same
names it resolves the policies with.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import botocore.handlers

FUNCTION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "lambda_function", default=None
)

# The template's function name -> the callables its code is entered through. A test holds
# the first of each to what functions/<dir>/app.py's handler calls.
ENTRIES: dict[str, tuple[tuple[str, str], ...]] = {
    "ApiFunction": (("tenure.api.app", "handle"),),
    "WorkerFunction": (("tenure.api.worker", "handle"),),
    "ClaimFunction": (("tenure.api.worker", "handle_claim"),),
    "AuthorizerFunction": (
        ("tenure.api.authorizer", "verdict"),
        ("tenure.api.authorizer", "authorize"),  # what the local stack calls
    ),
    "SweeperFunction": (
        ("tenure.triggers.sweep", "handle"),
        ("tenure.triggers.sweep", "run_pass"),  # what the local stack's sweeper loop calls
    ),
    "ReactorFunction": (
        ("tenure.triggers.stream", "lambda_handler"),
        ("tenure.triggers.stream", "handle"),  # the local stack's stream pump
        ("tenure.triggers.stream", "process"),  # the conformance tier's reactions
        ("tenure.triggers.stream", "react"),
    ),
    "SchedulerFunction": (("tenure.triggers.rule_schedule", "handle"),),
    "InboundFunction": (("tenure.triggers.inbound.handler", "handle"),),
}

# The service keeps everything in one table, and the template has one: every table is it.
TABLE = "LeaseTable"
SECURE = ("aws:SecureTransport", "true")  # every AWS endpoint the functions call is HTTPS


@dataclass(frozen=True)
class Call:
    """One IAM request: `resource` is an Fn::Sub string over the template's names."""

    function: str
    action: str
    resource: str
    context: tuple[tuple[str, str | tuple[str, ...]], ...] = (SECURE,)
    presigned: bool = False

    def describe(self) -> str:
        how = " (a presigned URL)" if self.presigned else ""
        return f"{self.function}: {self.action} on {self.resource}{how}"

    def to_json(self) -> dict[str, Any]:
        context = [
            [key, list(value) if isinstance(value, tuple) else value] for key, value in self.context
        ]
        return {
            "function": self.function,
            "action": self.action,
            "resource": self.resource,
            "context": context,
            "presigned": self.presigned,
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Call:
        context = tuple(
            (str(key), tuple(value) if isinstance(value, list) else str(value))
            for key, value in row["context"]
        )
        return cls(row["function"], row["action"], row["resource"], context, row["presigned"])


# Where each process of a run appends the calls it notes, one JSON line per distinct call the
# first time that process makes it: a run of several processes (pytest beside the local stack
# it starts, and the workers that stack forks) is judged from the files afterwards.
SINK = "TENURE_AWS_CALLS_FILE"


@dataclass
class Log:
    """What the run noted: each distinct call, how often, and the first test that made it."""

    calls: Counter[Call]
    first: dict[Call, str]
    test: str = "(outside a test)"
    sink: str | None = None

    def note(self, call: Call) -> None:
        self.calls[call] += 1
        if call in self.first:
            return
        self.first[call] = self.test
        if self.sink:
            line = json.dumps({**call.to_json(), "test": self.test}) + "\n"
            # One write of one line to a file opened for appending: lines of processes writing
            # at once do not interleave.
            fd = os.open(self.sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)


LOG = Log(Counter(), {}, sink=os.environ.get(SINK) or None)


def read(path: str | os.PathLike[str]) -> dict[Call, str]:
    """The calls a run's processes appended to `path`, each with the first test that made it."""
    found: dict[Call, str] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            found.setdefault(Call.from_json(row), row["test"])
    return found


def _wrap(function: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def entered(*args: Any, **kwargs: Any) -> Any:
        if FUNCTION.get() is not None:
            return fn(*args, **kwargs)
        token = FUNCTION.set(function)
        try:
            return fn(*args, **kwargs)
        finally:
            FUNCTION.reset(token)

    entered.__dict__["aws_calls_function"] = function
    return entered


def install() -> None:
    """Wrap every entry and hook every botocore session made from now on (once)."""
    for module_name in {m for entries in ENTRIES.values() for m, _ in entries}:
        wrap_entries(importlib.import_module(module_name))
    hook_botocore(botocore.handlers.BUILTIN_HANDLERS)


def wrap_entries(module: Any) -> None:
    """Wrap the entries `module` defines (once)."""
    for function, entries in ENTRIES.items():
        for module_name, name in entries:
            fn = getattr(module, name, None) if module.__name__ == module_name else None
            if fn is not None and "aws_calls_function" not in fn.__dict__:
                setattr(module, name, _wrap(function, fn))


def hook_botocore(hooks: list[Any]) -> None:
    """Note every call of the sessions made from now on: `hooks` is botocore's list of the
    handlers each new session registers. A process started with tests/infra/stack_calls on
    its path has its own pair there already, which hands the calls here."""
    if any(getattr(entry[1], "aws_calls_hook", False) for entry in hooks):
        return
    hooks.append((_BEFORE, _before))
    hooks.append((_AFTER, _after))


_BEFORE = "before-parameter-build"
_AFTER = "after-call"


def _before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    function = FUNCTION.get()
    if function is None:
        return
    service, op = model.service_model.service_name, model.name
    presigned = bool(context.get("is_presign_request"))
    for action, resource, keys in requests_of(function, service, op, params):
        LOG.note(Call(function, action, resource, (SECURE, *keys), presigned))
    if service == "s3" and op in ("HeadObject", "GetObject"):
        context["aws_calls_bucket"] = params.get("Bucket")


def _after(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
    function = FUNCTION.get()
    bucket = context.get("aws_calls_bucket")
    if function is None or bucket is None or getattr(http_response, "status_code", 0) != 404:
        return
    # S3 answers a missing key 404 only to a caller that may list the bucket (else 403).
    LOG.note(Call(function, "s3:ListBucket", _bucket_arn(function, bucket)))


Keys = tuple[tuple[str, str | tuple[str, ...]], ...]
Request = tuple[str, str, Keys]


def requests_of(function: str, service: str, op: str, params: dict[str, Any]) -> list[Request]:
    """The IAM requests one botocore operation is authorized as."""
    mapped = _MAPPERS.get(service)
    found = mapped(function, op, params) if mapped else None
    if found is None:
        return [(f"unmapped:{service}:{op}", "*", ())]
    return found


def _sub(text: str) -> str:
    """A literal for an Fn::Sub string (`${` would start a reference)."""
    return text.replace("${", "${!")


# ------------------------------------------------------------------------------- DynamoDB

_NAME = re.compile(r"(?<![\w:.#])#?[A-Za-z_]\w*(?!\w*\s*\()")
_KEYWORDS = {"and", "or", "not", "between", "in", "set", "remove", "add", "delete"}


def attribute_names(params: dict[str, Any]) -> tuple[str, ...]:
    """The top-level attribute names a request names (the `dynamodb:Attributes` key): its key,
    its item, and every name in its expressions (a `#placeholder` as what it stands for)."""
    names: set[str] = set()
    for field in ("Key", "Item"):
        names |= set(params.get(field) or {})
    names |= set(params.get("AttributesToGet") or [])
    aliases = params.get("ExpressionAttributeNames") or {}
    for field in (
        "UpdateExpression",
        "ConditionExpression",
        "ProjectionExpression",
        "FilterExpression",
        "KeyConditionExpression",
    ):
        for token in _NAME.findall(str(params.get(field) or "")):
            if token.lower() not in _KEYWORDS:
                names.add(aliases.get(token, token))
    return tuple(sorted(names))


def _item_keys(params: dict[str, Any], returns: bool) -> Keys:
    keys: Keys = (("dynamodb:Attributes", attribute_names(params)),)
    if returns:
        keys += (("dynamodb:ReturnValues", str(params.get("ReturnValues") or "NONE")),)
    return keys


def _table_arn(index: str | None = None) -> str:
    return f"${{{TABLE}.Arn}}" + (f"/index/{_sub(index)}" if index else "")


_IN_TRANSACTION = {
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
}
_TABLE_OPS = {"CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive"}


def _dynamodb(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    if op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        return [(f"dynamodb:{op}", _table_arn(), _item_keys(params, op != "GetItem"))]
    if op in ("Query", "Scan"):
        index = params.get("IndexName")
        select = params.get("Select") or (
            "SPECIFIC_ATTRIBUTES"
            if params.get("ProjectionExpression")
            else "ALL_PROJECTED_ATTRIBUTES"
            if index
            else "ALL_ATTRIBUTES"
        )
        keys: Keys = (
            ("dynamodb:Attributes", attribute_names(params)),
            ("dynamodb:Select", str(select)),
        )
        return [(f"dynamodb:{op}", _table_arn(index), keys)]
    if op in ("BatchGetItem", "BatchWriteItem"):
        # One request per table named; the service has one table.
        return [(f"dynamodb:{op}", _table_arn(), ()) for _ in (params.get("RequestItems") or {})]
    if op == "TransactWriteItems":
        found: list[Request] = []
        for item in params.get("TransactItems") or []:
            for kind, body in item.items():
                found.append((_IN_TRANSACTION[kind], _table_arn(), _item_keys(body, False)))
        return found
    if op == "TransactGetItems":
        return [
            ("dynamodb:GetItem", _table_arn(), _item_keys(item["Get"], False))
            for item in params.get("TransactItems") or []
        ]
    if op in _TABLE_OPS:
        return [(f"dynamodb:{op}", _table_arn(), ())]
    return None


# ------------------------------------------------------------------------------------ S3


def _bucket_logical(function: str, bucket: str) -> str | None:
    from tenure.config import settings

    if bucket == settings().attachments_bucket:
        return "AttachmentsBucket"
    if function == "InboundFunction":
        # The one bucket not in the settings is the one an SES notification names: the
        # template's receipt rule stores mail only in the inbound bucket.
        return "InboundBucket"
    return None


def _bucket_arn(function: str, bucket: str) -> str:
    logical = _bucket_logical(function, bucket)
    return f"${{{logical}.Arn}}" if logical else f"(no template bucket is named {bucket})"


def _object_arn(function: str, bucket: str, key: str) -> str:
    return f"{_bucket_arn(function, bucket)}/{_sub(key)}"


def _copy_source(source: Any) -> tuple[str, str]:
    if isinstance(source, dict):
        return str(source["Bucket"]), str(source["Key"])
    bucket, _, key = unquote(str(source)).lstrip("/").partition("/")
    return bucket, key.split("?versionId=")[0]


def _s3(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    bucket = str(params.get("Bucket"))
    if op == "PutObject":
        return [("s3:PutObject", _object_arn(function, bucket, params["Key"]), ())]
    if op in ("GetObject", "HeadObject"):  # HEAD is authorized as s3:GetObject
        return [("s3:GetObject", _object_arn(function, bucket, params["Key"]), ())]
    if op == "DeleteObject":
        return [("s3:DeleteObject", _object_arn(function, bucket, params["Key"]), ())]
    if op == "DeleteObjects":  # no s3:DeleteObjects action: each key is a DeleteObject
        objects = (params.get("Delete") or {}).get("Objects") or []
        return [("s3:DeleteObject", _object_arn(function, bucket, o["Key"]), ()) for o in objects]
    if op == "CopyObject":
        source_bucket, source_key = _copy_source(params["CopySource"])
        return [
            ("s3:GetObject", _object_arn(function, source_bucket, source_key), ()),
            ("s3:PutObject", _object_arn(function, bucket, params["Key"]), ()),
        ]
    if op in ("ListObjectsV2", "ListObjects"):
        keys: Keys = (("s3:prefix", str(params["Prefix"])),) if params.get("Prefix") else ()
        return [("s3:ListBucket", _bucket_arn(function, bucket), keys)]
    return None


# ------------------------------------------------------------------------- CloudWatch Logs


def _log_arn(group: str, stream: str) -> str:
    """A log stream's ARN, or with `stream` empty the form IAM evaluates a log group's
    actions on (`log-group:NAME:log-stream:`, matched by the `log-group:NAME:*` a log
    group's Arn attribute is)."""
    from tenure.config import settings

    if group != settings().log_group:
        return f"(no template log group is named {group})"
    return (
        "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${LeaseLogs}"
        f":log-stream:{_sub(stream)}"
    )


_STREAM_OPS = {"CreateLogStream", "PutLogEvents", "GetLogEvents", "DeleteLogStream"}
_GROUP_OPS = {"FilterLogEvents", "DescribeLogStreams"}


def _logs(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    group = str(params.get("logGroupName") or params.get("logGroupIdentifier"))
    if op in _STREAM_OPS:
        return [(f"logs:{op}", _log_arn(group, str(params["logStreamName"])), ())]
    if op in _GROUP_OPS:
        return [(f"logs:{op}", _log_arn(group, ""), ())]
    return None


# ------------------------------------------------------------------ Scheduler, EventBridge


def _scheduler(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    from tenure.config import settings

    cfg = settings()
    if op == "ListSchedules":
        return [("scheduler:ListSchedules", "*", ())]
    if op not in ("CreateSchedule", "UpdateSchedule", "DeleteSchedule", "GetSchedule"):
        return None
    group = str(params.get("GroupName") or "default")
    named = "${RuleScheduleGroup}" if group == cfg.schedule_group else _sub(group)
    found: list[Request] = [
        (
            f"scheduler:{op}",
            "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/"
            f"{named}/{_sub(str(params['Name']))}",
            (),
        )
    ]
    role = (params.get("Target") or {}).get("RoleArn")
    if role:  # the schedule is handed the role: the caller must be allowed to pass it
        passed = "${RuleSchedulerRole.Arn}" if role == cfg.scheduler_role_arn else _sub(role)
        found.append(
            ("iam:PassRole", passed, (("iam:PassedToService", "scheduler.amazonaws.com"),))
        )
    return found


_BUSES = "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus"


def _events(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    from tenure.config import settings

    if op != "PutEvents":
        return None
    bus = settings().event_bus
    found: list[Request] = []
    for name in sorted({str(e.get("EventBusName") or "default") for e in params["Entries"]}):
        if bus is not None and (name == bus or name.endswith(f":event-bus/{bus}")):
            arn = "${EventBus.Arn}"
        else:
            arn = f"{_BUSES}/{_sub(name.rsplit('/', 1)[-1])}"
        found.append(("events:PutEvents", arn, ()))
    return found


def _sqs(function: str, op: str, params: dict[str, Any]) -> list[Request] | None:
    if op not in ("SendMessage", "SendMessageBatch"):
        return None
    name = urlsplit(str(params["QueueUrl"])).path.rsplit("/", 1)[-1]
    return [(f"sqs:{op}", f"(no template queue is known by the name {name})", ())]


_MAPPERS: dict[str, Callable[[str, str, dict[str, Any]], list[Request] | None]] = {
    "dynamodb": _dynamodb,
    "s3": _s3,
    "logs": _logs,
    "scheduler": _scheduler,
    "events": _events,
    "sqs": _sqs,
}


def noted(function: str | None = None) -> Iterator[Call]:
    return (c for c in LOG.calls if function is None or c.function == function)
