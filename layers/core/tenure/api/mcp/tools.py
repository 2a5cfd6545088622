"""The MCP tool table: each tool's name, input model, who it is offered to, and the
one service call it makes. The token decides the tools (`offered`) and, through core/authz and
the same service methods as the HTTP routes, what each may touch.

`task_block` and `task_unblock` act on the task of the caller's own lease: a
block placed with the running lease's token also releases that lease, no attempt used.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pydantic
from pydantic import BaseModel, Field, StringConstraints, field_validator
from pydantic.json_schema import SkipJsonSchema

from tenure.api import models, views
from tenure.api.mcp.runs import RUN_TOOLS
from tenure.api.mcp.tool import Tool, lease_mcp, mcp_view
from tenure.api.routes import BASE
from tenure.app.tenure import Tenure
from tenure.domain import authz, errors
from tenure.domain.fencing import TOKEN_SHAPE
from tenure.domain.model import Principal
from tenure.domain.states import LeaseState, SubjectKind

# Over MCP one page answers (no cursor): 50 leases unless asked, never more than 200.
LIST_DEFAULT = 50
LIST_MAX = 200
# One page of log lines: an agent's context is the reader, so the tail is bounded too.
LOGS_TAIL_MAX = 1000

LeaseId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ListArgs(models.Strict):
    space_key: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        description="the space whose leases to list (a lease token: its own lease's space)"
    )
    state: LeaseState | None = Field(None, description="only leases in this state")
    limit: Annotated[int, Field(ge=1, le=LIST_MAX)] = Field(
        LIST_DEFAULT, description="how many leases, newest first (one page)"
    )
    cursor: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        None, description="the next_cursor of the page before"
    )
    subject_kind: (
        Annotated[list[SubjectKind], Field(min_length=1, max_length=len(SubjectKind))] | None
    ) = Field(
        None,
        description="only leases of these subject kinds; a workflow's or the space's leases are "
        "read apart from the tasks', so they are found however many task leases came after",
    )


class LeaseArgs(models.Strict):
    lease_id: LeaseId = Field(description="the lease's id")


class LogsArgs(models.Strict):
    lease_id: LeaseId = Field(description="the lease's id")
    container: (
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None
    ) = Field(None, description="one container's lines (default: every container)")
    tail: Annotated[int, Field(ge=1, le=LOGS_TAIL_MAX)] | None = Field(
        None, description="keep only the last N lines"
    )
    since: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        None, description="ISO-8601 lower bound on the lines' timestamps"
    )


class NoArgs(models.Strict):
    pass


# Over HTTP a final report may carry `next`, a claim of the worker's next lease answered in the
# same call with that lease's token. MCP never hands out a lease token, so no MCP report claims:
# `next` is left out of the tools' schemas and refused by name rather than stored unread.
NO_CLAIM = "a report over MCP claims nothing; a worker token claims with task_run_claim_next"


def _claims_nothing(value: Any) -> None:
    if value is not None:
        raise ValueError(NO_CLAIM)


# Nor does an MCP report renew the worker's other leases (`heartbeat` rides only on a report
# sent with the worker token): left out and refused by name, as `next` is.
NO_BEATS = "a report over MCP renews no other lease; heartbeat goes with the worker token"


def _renews_nothing(value: Any) -> None:
    if value is not None:
        raise ValueError(NO_BEATS)


class CompleteArgs(models.Complete):
    next: SkipJsonSchema[None] = Field(None, exclude=True)
    heartbeat: SkipJsonSchema[None] = Field(None, exclude=True)
    _no_claim = field_validator("next", mode="before")(_claims_nothing)
    _no_beats = field_validator("heartbeat", mode="before")(_renews_nothing)


class FailArgs(models.Fail):
    next: SkipJsonSchema[None] = Field(None, exclude=True)
    heartbeat: SkipJsonSchema[None] = Field(None, exclude=True)
    _no_claim = field_validator("next", mode="before")(_claims_nothing)
    _no_beats = field_validator("heartbeat", mode="before")(_renews_nothing)


# ------------------------------------------------------------------------ operations


def _list(svc: Tenure, actor: Principal, args: ListArgs) -> dict[str, Any]:
    kinds = frozenset(args.subject_kind) if args.subject_kind is not None else None
    page = svc.operator.list_visible_leases(
        actor, args.space_key, args.limit, args.state, args.cursor, kinds
    )
    leases = [svc.kernel.catalog.shown(x) for x in page.leases]
    conditions = svc.conditions.queued_conditions(leases)
    shown = [mcp_view(views.lease_view(x, conditions[x.id]), x, False) for x in leases]
    return {"leases": shown, "next_cursor": page.next_cursor}


def _get(svc: Tenure, actor: Principal, args: LeaseArgs) -> dict[str, Any]:
    return {"lease": lease_mcp(svc, svc.operator.get_visible_lease(actor, args.lease_id))}


def _cancel(svc: Tenure, actor: Principal, args: LeaseArgs) -> dict[str, Any]:
    return {"lease": lease_mcp(svc, svc.operator.cancel(actor, args.lease_id))}


class TaskCancelArgs(models.TaskCancel):
    task_id: LeaseId = Field(description="the task's id or key")


def _task_cancel(svc: Tenure, actor: Principal, args: TaskCancelArgs) -> dict[str, Any]:
    task_id = svc.task_keys.task_id(actor, args.task_id)
    done = svc.cancellation.cancel(actor, task_id, args.reason, args.subtree)
    return {"cancelled": done.cancelled, "remaining": done.remaining}


def _logs(svc: Tenure, actor: Principal, args: LogsArgs) -> dict[str, Any]:
    since = models.since_ms(args.since)
    page = svc.logs.read_logs(actor, args.lease_id, args.container, args.tail, since, None)
    return {
        "events": [views.log_line_view(line) for line in page.events],
        # No cursor over MCP: more lines than this page holds reads as truncated.
        "truncated": page.truncated or page.next_cursor is not None,
    }


def _attachments(svc: Tenure, actor: Principal, args: LeaseArgs) -> dict[str, Any]:
    found = svc.attachments.list_attachments(actor, args.lease_id)
    return {
        "attachments": [
            {
                **views.attachment_view(a),
                "download_path": f"{BASE}/leases/{args.lease_id}/attachments/{a.id}",
            }
            for a in found
        ]
    }


def _own(actor: Principal) -> str:
    return actor.lease_id or ""


def _payload(svc: Tenure, actor: Principal, _: NoArgs) -> dict[str, Any]:
    bundle = svc.payloads.payload(actor, _own(actor))
    return {**bundle, "lease": lease_mcp(svc, bundle["lease"])}


def _heartbeat(svc: Tenure, actor: Principal, args: models.Heartbeat) -> dict[str, Any]:
    beat = svc.reports.heartbeat(actor, _own(actor), args.lease_seconds)
    return {
        "state": beat.lease.state.value,
        "deadline": views.iso(beat.lease.deadline),
        "revoke": beat.revoke.value if beat.revoke else None,
    }


def _complete(svc: Tenure, actor: Principal, args: CompleteArgs) -> dict[str, Any]:
    lease = svc.reports.complete(actor, _own(actor), args.model_dump(exclude_unset=True))
    return {"lease": lease_mcp(svc, lease)}


def _fail(svc: Tenure, actor: Principal, args: FailArgs) -> dict[str, Any]:
    lease = svc.reports.fail(actor, _own(actor), args.model_dump(exclude_unset=True))
    return {"lease": lease_mcp(svc, lease)}


def _release(svc: Tenure, actor: Principal, args: models.Release) -> dict[str, Any]:
    lease = svc.reports.release(actor, _own(actor), args.model_dump(exclude_unset=True))
    return {"lease": lease_mcp(svc, lease)}


class TaskBlockArgs(models.BlockCreate):
    """A block on this lease's own task."""


class TaskUnblockArgs(models.BlockClear):
    block_id: Annotated[str, StringConstraints(min_length=1, max_length=128)]


def _own_task(svc: Tenure, actor: Principal) -> str:
    lease = svc.operator.get_visible_lease(actor, _own(actor))
    if lease.task_id is None:
        raise errors.InvalidTransition(
            f"lease {lease.id} answers for a {lease.subject_kind.value}, not a task: "
            "only a task can be blocked"
        )
    return lease.task_id


def _block(svc: Tenure, actor: Principal, args: TaskBlockArgs) -> dict[str, Any]:
    task_id = _own_task(svc, actor)
    block = svc.event_waits.block(
        actor, task_id, args.kind, args.reason, args.expires_in_seconds, args.event, args.key
    )
    return {"block": block}


def _unblock(svc: Tenure, actor: Principal, args: TaskUnblockArgs) -> dict[str, Any]:
    return {"block": svc.blocks.clear_block(actor, _own_task(svc, actor), args.block_id, args.note)}


class EventSendArgs(models.Strict):
    """An event blocks wait for; a lease token's goes to its own lease's space."""

    space: models.SpaceKey | None = None
    name: str = Field(min_length=1, max_length=128)
    key: str = Field(min_length=1, max_length=128)
    data: Any = None


def _send_event(svc: Tenure, actor: Principal, args: EventSendArgs) -> dict[str, Any]:
    space = args.space
    if space is None and actor.kind == "lease":
        space = svc.kernel.owned.acting_lease(actor).space
    if space is None:
        raise errors.ValidationFailed("space: required with an operator token")
    return {"cleared": svc.event_waits.send(actor, space, args.name, args.key, args.data)}


READ, MEMBER, LEASE = "operator:read", "operator:member", "lease"

TOOLS: tuple[Tool, ...] = (
    Tool(
        "leases_list",
        "List one space's leases, newest first: one page of at most `limit` (default 50, at "
        "most 200), no cursor. Each carries its subject reference. A lease token lists only "
        "its own lease's space.",
        ListArgs,
        (READ, LEASE),
        _list,
    ),
    Tool(
        "leases_get",
        "Read one lease: state, attempt, pool, timing, subject reference. A lease token reads "
        "only leases of its own lease's space.",
        LeaseArgs,
        (READ, LEASE),
        _get,
    ),
    Tool(
        "leases_cancel",
        "Cancel a lease: a queued one is cancelled at once, a running or paused one moves to "
        "cancelling while its worker is asked to stop; a terminal one is left as it is.",
        LeaseArgs,
        (MEMBER,),
        _cancel,
        read_only=False,
    ),
    Tool(
        "task_cancel",
        "Cancel a task (with subtree: true, every task under it too): it reads cancelled at "
        "once, its queued run is cancelled and a held one is asked to stop; each records the "
        "reason. Answers how many tasks this call ended and how many descendants the "
        "background still has to reach. A task already ended is refused.",
        TaskCancelArgs,
        (MEMBER,),
        _task_cancel,
        read_only=False,
    ),
    Tool(
        "leases_fetch_logs",
        "Read a lease's log lines, oldest first (one page; `truncated` says there were more): "
        "optionally one container, the last `tail` lines, lines since an ISO-8601 time. A lease "
        "token reads its own lease's.",
        LogsArgs,
        (READ, LEASE),
        _logs,
        use=authz.SHIP,  # a lease's own last logs stay readable for a while after its end
    ),
    Tool(
        "leases_list_attachments",
        "List a lease's stored attachments; each `download_path` is the HTTP path that "
        "fetches its bytes with the same bearer token. A lease token lists its own lease's.",
        LeaseArgs,
        (READ, LEASE),
        _attachments,
        use=authz.SHIP,
    ),
    Tool(
        "lease_fetch_payload",
        "Read this lease's work bundle: the lease, its subject (task, workflow or space), "
        "the trigger when a rule minted it, `inputs` (the results of the tasks its task "
        "depends on and of its children) and `events` (the events its task received).",
        NoArgs,
        (LEASE,),
        _payload,
        use=authz.SHIP,
    ),
    Tool(
        "lease_heartbeat",
        "Extend this lease's deadline (a first heartbeat also starts it); `revoke` says when "
        "the operator asks the work to stop (cancel, kill or pause).",
        models.Heartbeat,
        (LEASE,),
        _heartbeat,
        read_only=False,
        use=authz.REPORT,
    ),
    Tool(
        "lease_complete",
        "Report this lease done: outcome (success by default), details, result, usage, the "
        "ids of tasks it created.",
        CompleteArgs,
        (LEASE,),
        _complete,
        read_only=False,
        use=authz.REPORT,
    ),
    Tool(
        "lease_fail",
        "Report this lease failed with an error (and optional metadata); an attempt is used.",
        FailArgs,
        (LEASE,),
        _fail,
        read_only=False,
        use=authz.REPORT,
    ),
    Tool(
        "lease_release",
        "Hand this lease's work back to the queue without using an attempt.",
        models.Release,
        (LEASE,),
        _release,
        read_only=False,
        use=authz.REPORT,
    ),
    Tool(
        "task_block",
        "Say this lease's task cannot go on, and why: kind transient (with expires_in_seconds "
        "it stops counting then), dependency_external, needs_input or error; or kind event "
        "with an event name and key, to wait until events_send names them. The lease is "
        "released in the same step (no attempt used) and its run waits behind the block; a "
        "kind recurring past the instance's limit escalates the task to a person (never event).",
        TaskBlockArgs,
        (LEASE,),
        _block,
        read_only=False,
    ),
    Tool(
        "task_unblock",
        "Clear one of this lease's task's blocks (by block_id), with an optional note; the "
        "last blocking cause cleared makes the task ready again.",
        TaskUnblockArgs,
        (LEASE,),
        _unblock,
        read_only=False,
    ),
    Tool(
        "events_send",
        "Send an event (name and key, optional JSON data): every block of the space waiting "
        "for that name and key is cleared, and so is one placed within the instance's "
        "event_ttl_seconds after. Answers how many this call cleared. A lease token sends in "
        "its own lease's space.",
        EventSendArgs,
        (MEMBER, LEASE),
        _send_event,
        read_only=False,
    ),
    *RUN_TOOLS,
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def offered(actor: Principal) -> list[Tool]:
    """The tools this caller sees (tools/list): its token's kind and role decide."""
    return [tool for tool in TOOLS if tool.offered_to(actor)]


# --------------------------------------------------------------------------- inputs


class TokenInInput(errors.ValidationFailed):
    """A tool input carried a raw token, or a field named like one."""


# A field named like a credential: `token`, `lease_token`, `authorization`, `api_key`… but not
# a count such as `input_tokens` (usage) or a digest such as `claim_token_hash_truncated`.
TOKEN_NAME = re.compile(r"^(?:.*[_-])?(?:token|authorization|bearer|api[_-]?key|secret)$", re.I)


def refuse_tokens(arguments: Any, where: str = "") -> None:
    """Refuse an input with a token-named field or a token-shaped value, before anything runs:
    such a value would travel into stored reports others read."""
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            if TOKEN_SHAPE.search(str(key)):  # named without echoing it
                raise TokenInInput(f"{where or 'arguments'}: a field name carries a Tenure token")
            field = f"{where}.{key}" if where else str(key)
            if TOKEN_NAME.match(str(key)):
                raise TokenInInput(f"{field}: a tool input never carries a token")
            refuse_tokens(value, field)
    elif isinstance(arguments, list):
        for i, value in enumerate(arguments):
            refuse_tokens(value, f"{where}[{i}]")
    elif isinstance(arguments, str) and TOKEN_SHAPE.search(arguments):
        raise TokenInInput(f"{where or 'arguments'}: carries a Tenure token; tools never take one")


# The arguments that name a task or a lease by id: judged for a token limited to spaces
# before the tool runs, as a path's id is before its route does (api/routes.py check_scopes).
ID_ARGUMENTS = ("id", "task_id", "lease_id", "run_id")


def ids_named(arguments: dict[str, Any] | None) -> list[str]:
    return [v for k, v in (arguments or {}).items() if k in ID_ARGUMENTS and isinstance(v, str)]


def parse(tool: Tool, arguments: dict[str, Any] | None) -> BaseModel:
    """The tool's input, validated as the HTTP body models are (from JSON, strictly)."""
    try:
        return tool.args.model_validate_json(json.dumps(arguments or {}))
    except pydantic.ValidationError as bad:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: "
            + str(err["msg"]).removeprefix("Value error, ")
            for err in bad.errors()
        ]
        raise errors.ValidationFailed("; ".join(problems)) from None


def shown(text: str, limit: int = 500) -> str:
    """Text of the caller's that an answer quotes back: token-shaped strings masked, and cut
    at `limit` characters, so an error never carries a secret nor grows with the input."""
    masked = TOKEN_SHAPE.sub("[redacted token]", text)
    return masked if len(masked) <= limit else masked[:limit] + "…"


def redact(result: dict[str, Any]) -> str:
    """The result as JSON text; a token-shaped string, should one ever be stored, is masked."""
    return TOKEN_SHAPE.sub("[redacted token]", json.dumps(result, separators=(",", ":")))
