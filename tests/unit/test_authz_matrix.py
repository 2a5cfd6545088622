"""The authorization matrix: every route of the API x every kind of caller, as one table. Each
row names a route, the request that exercises it, and which callers the route admits (the "who"
of docs/api.md); every other caller must be refused with the exact status and code the API
gives it (401 `unauthenticated`, 403 `lease_token_mismatch` or 403 `forbidden`). Allowed
callers must get the route's own success, so a row cannot pass by refusing everybody. The
requests go the whole way in process: the bearer token through the authorizer (real tokens,
minted by the service on the fake store), then the API handler, as API Gateway chains them. A
route the API serves but the table lacks fails the run."""

from __future__ import annotations

import base64
import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api.authorizer import authorize
from tenure.api.routes import MCP_PATH, NAMED_SCOPES, ROUTES, UNSCOPED, lease_use, scopes_of
from tenure.api.surface import BodyShape, body_shape
from tenure.domain.model import Pool
from tenure.domain.states import PoolKind
from tenure.domain.task_keys import task_id_of_key
from tenure.domain.timeline import first_lease_id
from tenure_cli.local.frontdoor import to_event

from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink
from tests.unit.rules_support import FakeSchedules
from tests.unit.support import ADMIN, POOL, SPACE, Rig

# The kinds of caller, each a bearer token the scene mints (or none at all).
CALLERS = (
    "none",  # no Authorization header
    "unknown",  # a well-formed token the service never issued
    "read",
    "member",
    "admin",
    "elsewhere",  # an admin operator limited to another space
    "worker_other",  # a worker token limited to another space's pool
    "worker",  # a worker token limited to this pool (it claimed both leases)
    "lease",  # the lease token of the lease in the path (`mine`)
    "lease_other",  # the lease token of another lease of the same pool and space
    "expired",  # an admin operator token past its expires_in_seconds
    "revoked",  # an admin operator token revoked by DELETE /tokens/{id}
    "lease_grace",  # the token of a lease of the same pool that ended a minute ago
    "lease_spent",  # the token of a lease of the same pool that ended 11 minutes ago
)
# Tokens that are no one any more: 401 everywhere but the public routes.
DEAD = ("none", "unknown", "expired", "revoked")
# Tokens of ended leases: their reports (and, within the grace, their uploads and reads)
# still get as far as the lease check; everything else is 401.
ENDED = ("lease_grace", "lease_spent")
READ = frozenset({"read", "member", "admin"})
MEMBER = frozenset({"member", "admin"})
ADMIN_ONLY = frozenset({"admin"})
EVERYONE = frozenset(CALLERS)
OTHER_SPACE = "ELSE"
OTHER_POOL = "others"
ACCEPT = "application/json, text/event-stream"

# What a cell expects: the route's own success, a refusal (status, code), or — for routes that
# answer per item (bulk force, worker heartbeat, MCP tools) — 200 with that item refused.
OK = "ok"
INNER = "inner"


@dataclass
class Answer:
    status: int
    body: Any

    @property
    def code(self) -> str | None:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            code: str = self.body["error"]["code"]
            return code
        return None


@dataclass
class Scene:
    """A fresh fake-store service: space OPS with pool `builders`, space ELSE with pool
    `others`, a token per caller kind, two leases of `builders` claimed by the worker token
    (`mine` and `theirs`), a pending lease, a workflow, an inbound rule and a typed block."""

    rig: Rig
    tokens: dict[str, str | None] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def send(
        self, method: str, path: str, caller: str, body: Any = None, headers: Any = None
    ) -> Answer:
        raw = json.dumps(body).encode() if body is not None else b""
        token = self.tokens[caller]
        head = {"host": "unit", **(headers or {})}
        if token is not None:
            head["authorization"] = f"Bearer {token}"
        event = to_event(method, f"/api/v1{path}", head, raw)
        # The authorizer's verdict, as API Gateway hands it to the API function.
        event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
        out = api.handle(event, None)
        text = out.get("body") or ""
        if out.get("isBase64Encoded"):
            text = base64.b64decode(text).decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return Answer(out["statusCode"], parsed)

    def must(self, method: str, path: str, caller: str, body: Any = None) -> Any:
        got = self.send(method, path, caller, body)
        assert 200 <= got.status < 300, (method, path, got)
        return got.body


def scene(rig: Rig) -> Scene:
    rig.svc.artifacts.blobs = FakeBlobs()
    rig.svc.artifacts.log_sink = FakeLogSink()
    rig.svc.rules.schedules = FakeSchedules()
    s = Scene(rig)
    svc = rig.svc
    svc.spaces.create_space(ADMIN, OTHER_SPACE, "Elsewhere", None)
    svc.pools.create_pool(
        ADMIN, Pool(name=OTHER_POOL, space=OTHER_SPACE, kind=PoolKind.COMMAND, created_at=0)
    )
    s.tokens = {"none": None, "unknown": "tnr_o_" + uuid.uuid4().hex}
    for caller, kind, role, spaces, pools in (
        ("read", "operator", "read", None, None),
        ("member", "operator", "member", None, None),
        ("admin", "operator", "admin", None, None),
        ("elsewhere", "operator", "admin", (OTHER_SPACE,), None),
        ("worker_other", "worker", None, None, (OTHER_POOL,)),
        ("worker", "worker", None, None, (POOL,)),
    ):
        made, raw = svc.tokens.create_token(ADMIN, caller, kind, role, spaces, pools)
        s.tokens[caller] = raw
        s.ids[f"{caller}_token"] = made.id
    _, s.tokens["expired"] = svc.tokens.create_token(
        ADMIN, "expired", "operator", "admin", None, None, expires_in_seconds=60
    )
    revoked, s.tokens["revoked"] = svc.tokens.create_token(
        ADMIN, "revoked", "operator", "admin", None, None
    )
    svc.tokens.revoke_token(ADMIN, revoked.id)
    for name in ("mine", "theirs"):
        task = s.must("POST", "/tasks", "admin", {"space": SPACE, "title": name, "pool": POOL})
        won = s.must("POST", f"/pools/{POOL}/claim", "worker", {"worker_id": f"w-{name}"})
        assert won["lease"]["id"] == task["lease"]["id"]
        s.ids[name] = won["lease"]["id"]
        s.ids[f"{name}_task"] = task["task"]["id"]
        s.tokens["lease" if name == "mine" else "lease_other"] = won["token"]
    for caller in reversed(ENDED):
        s.must("POST", "/tasks", "admin", {"space": SPACE, "title": caller, "pool": POOL})
        won = s.must("POST", f"/pools/{POOL}/claim", "worker", {"worker_id": f"w-{caller}"})
        s.tokens[caller] = won["token"]
        s.must("POST", f"/leases/{won['lease']['id']}/complete", caller, {})
        rig.clock.advance(600 if caller == "lease_spent" else 60)
    queued = s.must("POST", "/tasks", "admin", {"space": SPACE, "title": "queued", "pool": POOL})
    s.ids["queued"] = queued["lease"]["id"]
    s.ids["idle_task"] = s.must("POST", "/tasks", "admin", {"space": SPACE, "title": "idle"})[
        "task"
    ]["id"]
    waiting = {"space": SPACE, "title": "wait", "requires_approval": True}
    s.ids["waiting_task"] = s.must("POST", "/tasks", "admin", waiting)["task"]["id"]
    s.must("POST", "/workflows", "admin", {"space": SPACE, "slug": "wf", "name": "Flow"})
    rule = {
        "space": SPACE,
        "name": "inbox",
        "pool": POOL,
        "subject": {"kind": "space"},
        "trigger": {"topic": "ticket.opened"},
    }
    s.ids["rule"] = s.must("POST", "/rules", "admin", rule)["rule"]["id"]
    block = {"kind": "needs_input", "reason": "which branch?"}
    s.ids["block"] = s.must("POST", f"/tasks/{s.ids['idle_task']}/blocks", "admin", block)["block"][
        "id"
    ]
    return s


# -------------------------------------------------------------------- per-row set-ups


def _started(s: Scene) -> None:
    s.must("POST", f"/leases/{s.ids['mine']}/start", "lease")


def _paused(s: Scene) -> None:
    _started(s)
    s.must("POST", f"/leases/{s.ids['mine']}/pause", "admin")


def _attached(s: Scene) -> None:
    body = {
        "filename": "out.txt",
        "content_type": "text/plain",
        "byte_size": 2,
        "content_base64": base64.b64encode(b"ok").decode(),
    }
    got = s.must("POST", f"/leases/{s.ids['mine']}/attachments", "lease", body)
    s.ids["attachment"] = got["attachment"]["id"]


def _failed(s: Scene) -> None:
    s.must("POST", f"/leases/{s.ids['mine']}/fail", "lease", {"error": "boom"})


def _escalated(s: Scene) -> None:
    # The default breaker: the second block of a kind sends the task to needs_attention.
    task = s.ids["idle_task"]
    s.must("POST", f"/tasks/{task}/blocks/{s.ids['block']}/clear", "admin", {})
    s.must("POST", f"/tasks/{task}/blocks", "admin", {"kind": "needs_input", "reason": "again"})


def _task_paused(s: Scene) -> None:
    s.must("POST", f"/tasks/{s.ids['idle_task']}/pause", "admin")


def _pool_paused(s: Scene) -> None:
    s.must("POST", f"/pools/{POOL}/pause", "admin")


def _space_archived(s: Scene) -> None:
    s.must("POST", f"/spaces/{SPACE}/archive", "admin")


def _agents_may_force(s: Scene) -> None:
    s.must("PATCH", "/instance", "admin", {"allow_agent_force": True})


# ---------------------------------------------------------------- per-item refusals


def _force_row(a: Answer) -> str | None:
    row = a.body["results"][0]
    return None if row["ok"] else str(row["code"])


def _beat_row(a: Answer) -> str | None:
    row = a.body["leases"][0]
    return str(row["error"]["code"]) if row.get("error") else None


def _tool_error(a: Answer) -> str | None:
    result = a.body.get("result") or {}
    return "tool_error" if result.get("isError") or "error" in a.body else None


@dataclass(frozen=True)
class Row:
    """One route: the request (a path with {ids} of the scene, a query, a body), the callers
    allowed, its success status, and where a caller's refusal is per item, not per request."""

    method: str
    rule: str  # as api/routes.py spells it, under /api/v1 unless it starts with //
    allow: frozenset[str]
    ok: int
    path: str = ""  # defaults to the rule with the scene's ids put in
    body: Any = None
    prepare: Callable[[Scene], None] | None = None
    inner: Callable[[Answer], str | None] | None = None
    refused_inside: frozenset[str] = frozenset()  # allowed through, refused per item
    headers: dict[str, str] | None = None
    refused_as: dict[str, tuple[int, str]] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> tuple[str, str]:
        rule = self.rule[1:] if self.rule.startswith("//") else f"/api/v1{self.rule}"
        return (self.method, rule)


def R(method: str, rule: str, allow: frozenset[str], ok: int, **kw: Any) -> Row:
    return Row(method, rule, allow, ok, **kw)


LEASE = "/leases/<lease_id>"
TASK = "/tasks/<task_id>"
BOTH_LEASES = frozenset({"lease", "lease_other"})
LEASE_SELF = frozenset({"lease"})
WORKERS = frozenset({"worker", "worker_other"})
FORCE_BODY = {"lease_ids": ["{mine}"], "reason": "stuck"}
MCP_GET = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "leases_get", "arguments": {"lease_id": "{mine}"}},
}

TABLE: list[Row] = [
    # Public (health, the OpenAPI document, the board): no token needed, so none is refused.
    R("GET", "/health", EVERYONE, 200),
    R("GET", "/openapi.json", EVERYONE, 200),
    R("GET", "//board", EVERYONE, 200),
    R("GET", "/whoami", READ | {"elsewhere"}, 200, note="who the caller is, for the board"),
    # Setting up work: admin; a token limited to spaces cannot act across all of them.
    R("POST", "/spaces", ADMIN_ONLY, 201, body={"key": "NEW", "name": "New"}),
    R("GET", "/spaces", READ | {"elsewhere"}, 200, note="a limited token sees its own spaces"),
    R("POST", "/workflows", ADMIN_ONLY, 201, body={"space": SPACE, "slug": "w2", "name": "W"}),
    R(
        "POST",
        "/pools",
        ADMIN_ONLY,
        201,
        body={"name": "p2", "space": SPACE, "kind": "command"},
    ),
    R("POST", "/tokens", ADMIN_ONLY, 201, body={"name": "t2", "kind": "operator"}),
    R(
        "POST",
        "/tokens",
        ADMIN_ONLY,
        201,
        body={"name": "t3", "kind": "worker", "expires_in_seconds": 3600},
        note="a token that expires",
    ),
    R(
        "GET",
        "/tokens",
        ADMIN_ONLY | {"elsewhere"},
        200,
        note="an admin limited to spaces sees only tokens limited to spaces it holds",
    ),
    R(
        "DELETE",
        "/tokens/<token_id>",
        ADMIN_ONLY,
        204,
        path="/tokens/{member_token}",
        refused_as={"elsewhere": (404, "not_found")},
        note="a token outside a scoped admin's spaces is one it does not know",
    ),
    R("GET", "/instance/activity", ADMIN_ONLY, 200),
    R(
        "POST",
        "/tasks",
        MEMBER | BOTH_LEASES,
        201,
        body={"space": SPACE, "title": "filed"},
        note="a lease token files work in its own lease's space",
    ),
    R(
        "POST",
        f"{TASK}/enqueue",
        MEMBER,
        201,
        path="/tasks/{idle_task}/enqueue",
        body={"pool": POOL},
    ),
    R("GET", "/tasks", READ, 200, path=f"/tasks?space={SPACE}"),
    R("GET", TASK, READ, 200, path="/tasks/{mine_task}"),
    R("GET", f"{TASK}/activity", READ, 200, path="/tasks/{mine_task}/activity"),
    R("GET", "/workers", READ, 200, path=f"/workers?pool={POOL}"),
    # Reading and steering leases.
    R("GET", "/leases", READ, 200, path=f"/leases?space={SPACE}"),
    R("GET", LEASE, READ, 200),
    R("POST", f"{LEASE}/cancel", MEMBER, 200),
    R("POST", f"{LEASE}/kill", MEMBER, 200),
    R("POST", f"{LEASE}/pause", MEMBER, 200, prepare=_started),
    R("POST", f"{LEASE}/resume", MEMBER, 200, prepare=_paused),
    # The worker's side: worker tokens claim and renew, lease tokens report.
    R(
        "POST",
        "/pools/<pool>/claim",
        frozenset({"worker"}),
        200,
        path=f"/pools/{POOL}/claim",
        body={"worker_id": "w-new"},
    ),
    R(
        "POST",
        "/workers/<worker_id>/heartbeat",
        WORKERS,
        200,
        path="/workers/w-mine/heartbeat",
        body={"leases": [{"id": "{mine}", "fence": 1}]},
        inner=_beat_row,
        refused_inside=frozenset({"worker_other"}),
        note="a worker of another pool is let in, but cannot renew this pool's lease",
    ),
    R("POST", f"{LEASE}/start", LEASE_SELF, 200),
    R("POST", f"{LEASE}/heartbeat", LEASE_SELF, 200, body={}),
    R("POST", f"{LEASE}/complete", LEASE_SELF, 200, body={}),
    R("POST", f"{LEASE}/fail", LEASE_SELF, 200, body={"error": "boom"}),
    R("POST", f"{LEASE}/release", LEASE_SELF, 200, body={}),
    R("GET", f"{LEASE}/payload", LEASE_SELF, 200),
    # Rules and events.
    R(
        "POST",
        "/rules",
        ADMIN_ONLY,
        201,
        body={
            "space": SPACE,
            "name": "second",
            "pool": POOL,
            "subject": {"kind": "space"},
            "trigger": {"topic": "other"},
        },
    ),
    R("GET", "/rules", READ, 200, path=f"/rules?space={SPACE}"),
    R("GET", "/rules/<rule_id>", READ, 200, path="/rules/{rule}"),
    R("PATCH", "/rules/<rule_id>", ADMIN_ONLY, 200, path="/rules/{rule}", body={"enabled": False}),
    R("DELETE", "/rules/<rule_id>", ADMIN_ONLY, 204, path="/rules/{rule}"),
    R("POST", "/rules/<rule_id>/fire", MEMBER, 201, path="/rules/{rule}/fire"),
    R(
        "POST",
        "/events",
        MEMBER,
        202,
        body={"space": SPACE, "topic": "ticket.opened", "data": {}},
        refused_as={c: (403, "lease_token_mismatch") for c in ("lease", "lease_other")},
        note="a lease token gets in for events blocks wait for (below), never to fire rules",
    ),
    R(
        "POST",
        "/events",
        MEMBER | BOTH_LEASES,
        200,
        body={"space": SPACE, "name": "deploy.done", "key": "v1", "data": {"ok": True}},
        note="an event blocks wait for: a member, or a lease token of the space",
    ),
    R("GET", "/workflows/<slug>/activity", READ, 200, path=f"/workflows/wf/activity?space={SPACE}"),
    R("GET", "/spaces/<key>/activity", READ, 200, path=f"/spaces/{SPACE}/activity"),
    # Inbound addresses: an admin of every space gives and takes them (never "elsewhere").
    R(
        "POST",
        "/spaces/<key>/addresses",
        ADMIN_ONLY,
        201,
        path=f"/spaces/{SPACE}/addresses",
        body={"address": "help@in.example.com"},
    ),
    R("GET", "/spaces/<key>/addresses", READ, 200, path=f"/spaces/{SPACE}/addresses"),
    R(
        "DELETE",
        "/spaces/<key>/addresses/<address>",
        ADMIN_ONLY,
        204,
        path=f"/spaces/{SPACE}/addresses/help@in.example.com",
        prepare=lambda s: s.rig.svc.addresses.add_address(ADMIN, SPACE, "help@in.example.com"),
    ),
    # Logs, attachments, runtime coordinates.
    R("GET", f"{LEASE}/exec_target", READ, 200),
    R(
        "POST",
        f"{LEASE}/logs",
        LEASE_SELF,
        202,
        body={"events": [{"stream": "stdout", "message": "hi"}]},
    ),
    R("GET", f"{LEASE}/logs", READ | LEASE_SELF, 200),
    R(
        "POST",
        f"{LEASE}/attachments",
        LEASE_SELF,
        201,
        body={"filename": "a.txt", "content_type": "text/plain", "byte_size": 1},
    ),
    R("GET", f"{LEASE}/attachments", READ | LEASE_SELF, 200),
    R(
        "GET",
        f"{LEASE}/attachments/<attachment_id>",
        READ | LEASE_SELF,
        200,
        path="/leases/{mine}/attachments/{attachment}",
        prepare=_attached,
    ),
    # Pools, spaces, the instance: admin, reads for read.
    R("GET", "/pools", READ, 200, path=f"/pools?space={SPACE}"),
    R("GET", "/pools/<pool>", READ, 200, path=f"/pools/{POOL}"),
    R("GET", "/pools/<pool>/figures", READ, 200, path=f"/pools/{POOL}/figures"),
    R("PATCH", "/pools/<pool>", ADMIN_ONLY, 200, path=f"/pools/{POOL}", body={"display_name": "B"}),
    R("POST", "/pools/<pool>/pause", ADMIN_ONLY, 200, path=f"/pools/{POOL}/pause"),
    R(
        "POST",
        "/pools/<pool>/resume",
        ADMIN_ONLY,
        200,
        path=f"/pools/{POOL}/resume",
        prepare=_pool_paused,
    ),
    R("POST", "/spaces/<space>/archive", ADMIN_ONLY, 200, path=f"/spaces/{SPACE}/archive"),
    R(
        "POST",
        "/spaces/<space>/unarchive",
        ADMIN_ONLY,
        200,
        path=f"/spaces/{SPACE}/unarchive",
        prepare=_space_archived,
    ),
    R("GET", "/instance", ADMIN_ONLY, 200),
    R("PATCH", "/instance", ADMIN_ONLY, 200, body={"retry_chain_cap": 4}),
    # The task graph, the scheduler, operator recovery.
    R(
        "PATCH",
        TASK,
        MEMBER,
        200,
        path="/tasks/{idle_task}",
        body={"auto_enqueue_on_ready": True, "pool": POOL},
    ),
    R("POST", f"{TASK}/pause", MEMBER, 200, path="/tasks/{idle_task}/pause"),
    R(
        "POST",
        f"{TASK}/resume",
        MEMBER,
        200,
        path="/tasks/{idle_task}/resume",
        prepare=_task_paused,
    ),
    R("GET", "/scheduler", READ, 200),
    R("POST", "/scheduler/pause", ADMIN_ONLY, 200),
    R("POST", "/scheduler/resume", ADMIN_ONLY, 200),
    R("GET", "/scheduler/backlog", READ, 200, path=f"/scheduler/backlog?space={SPACE}"),
    R("POST", "/scheduler/drain", ADMIN_ONLY, 200, body={"timeout_seconds": 0}),
    R(
        "POST",
        f"{LEASE}/retry",
        MEMBER,
        201,
        prepare=_failed,
        refused_as={"lease": (401, "unauthenticated")},
        note="the failed lease's own token: its powers ended with it",
    ),
    R(
        "POST",
        "/leases/bulk/release",
        MEMBER,
        200,
        body=FORCE_BODY,
        inner=_force_row,
        refused_inside=frozenset({"elsewhere"}),
        note="each row is judged on its own lease: another space's operator is refused there",
    ),
    R(
        "POST",
        "/leases/bulk/fail",
        MEMBER,
        200,
        body=FORCE_BODY,
        inner=_force_row,
        refused_inside=frozenset({"elsewhere"}),
    ),
    R(
        "POST",
        "/leases/bulk/release",
        MEMBER | {"worker"} | BOTH_LEASES,
        200,
        body=FORCE_BODY,
        prepare=_agents_may_force,
        inner=_force_row,
        refused_inside=frozenset({"worker_other", "elsewhere"}),
        note="allow_agent_force on: a worker of the lease's pool, a lease token of its space",
    ),
    R(
        "POST",
        "/leases/bulk/fail",
        MEMBER | {"worker"} | BOTH_LEASES,
        200,
        body=FORCE_BODY,
        prepare=_agents_may_force,
        inner=_force_row,
        refused_inside=frozenset({"worker_other", "elsewhere"}),
    ),
    R("GET", "/inspect/<some_id>", READ, 200, path="/inspect/{mine}"),
    # Typed blocks and recover: a lease token only for a lease on that task.
    R(
        "POST",
        f"{TASK}/blocks",
        MEMBER | LEASE_SELF,
        201,
        path="/tasks/{mine_task}/blocks",
        body={"kind": "error", "reason": "stuck"},
    ),
    R("GET", f"{TASK}/blocks", READ | LEASE_SELF, 200, path="/tasks/{mine_task}/blocks"),
    R(
        "POST",
        f"{TASK}/blocks/<block_id>/clear",
        MEMBER,
        200,
        path="/tasks/{idle_task}/blocks/{block}/clear",
        body={},
        note="a lease token may clear only blocks of its own lease's task (not this one)",
    ),
    R(
        "POST",
        f"{TASK}/recover",
        MEMBER,
        200,
        path="/tasks/{idle_task}/recover",
        body={"note": "fixed the config"},
        prepare=_escalated,
    ),
    # Approval: a member's decision; agents (worker and lease tokens) are refused.
    R(
        "POST",
        f"{TASK}/approve",
        MEMBER,
        200,
        path="/tasks/{waiting_task}/approve",
        body={},
    ),
    R(
        "POST",
        f"{TASK}/reject",
        MEMBER,
        200,
        path="/tasks/{waiting_task}/reject",
        body={"note": "not this quarter"},
    ),
    # Cancelling a task (and its subtree): a person's decision, never an agent's.
    R(
        "POST",
        f"{TASK}/cancel",
        MEMBER,
        202,
        path="/tasks/{idle_task}/cancel",
        body={"reason": "no longer needed", "subtree": True},
    ),
    # MCP: every token kind gets in; what each tool may touch is its own check, so the
    # other space's operator and the worker tokens (leases_get is not theirs) are refused
    # inside (a tool error).
    R(
        "POST",
        "/mcp",
        READ | BOTH_LEASES | WORKERS | {"elsewhere"},
        200,
        body=MCP_GET,
        headers={"accept": ACCEPT, "content-type": "application/json"},
        inner=_tool_error,
        refused_inside=frozenset({"elsewhere"}) | WORKERS,
    ),
]


def refusal(caller: str, row: Row) -> tuple[int, str]:
    """How the API refuses a caller a route does not admit."""
    if caller in DEAD:
        return 401, "unauthenticated"
    if caller in row.refused_as:
        return row.refused_as[caller]
    if caller in ENDED:
        # Every route here is on another lease (`mine`) or acts beyond its own lease.
        use = lease_use(*row.key)
        if use == "report" or (use == "ship" and caller == "lease_grace"):
            return 403, "lease_token_mismatch"
        return 401, "unauthenticated"
    if caller in ("lease", "lease_other"):
        # A lease token on an operator or worker route, or on another lease's route.
        return 403, "lease_token_mismatch"
    # An operator or worker token on a lease's own route, the wrong kind of token, a role
    # below the route's, or a scope (space, pool) that does not cover the row.
    return 403, "forbidden"


def expectation(caller: str, row: Row) -> tuple[str, Any]:
    if caller in row.refused_inside or (caller in ENDED and row.key[1] == MCP_PATH):
        return INNER, None  # over MCP, the tool answers unauthenticated
    if caller in row.allow:
        return OK, row.ok
    return "refused", refusal(caller, row)


def _fill(template: str, s: Scene) -> str:
    for name, value in s.ids.items():
        template = template.replace("{" + name + "}", value)
    return template


def _request(row: Row, s: Scene) -> tuple[str, Any]:
    path = row.path or row.rule.replace("<lease_id>", "{mine}")
    if path.startswith("//"):
        path = path[1:]
    body = json.loads(_fill(json.dumps(row.body), s)) if row.body is not None else None
    return _fill(path, s), body


def _id(row: Row) -> str:
    extra = f"[{row.prepare.__name__.strip('_')}]" if row.prepare else ""
    return f"{row.method} {row.rule}{extra}"


CELLS = [(row, caller) for row in TABLE for caller in CALLERS]


def test_the_table_has_a_row_for_every_route_the_api_serves() -> None:
    served = {
        (method.upper(), path.replace("{", "<").replace("}", ">"))
        for path, ops in api.contract()["paths"].items()
        for method in ops
    }
    assert served == set(ROUTES), "the route table and the served document differ"
    rows = {row.key for row in TABLE}
    assert set(ROUTES) - rows == set(), "routes missing from the authorization matrix"
    assert rows - set(ROUTES) == set(), "rows for routes the API does not serve"


@pytest.fixture(scope="module")
def base_scene() -> Iterator[Scene]:
    """Built once (through the API, so the service is wired in while it is); each cell gets a
    deep copy, a world of its own, for a fraction of the cost of building it again."""
    rig = Rig()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wiring, "service", lambda: rig.svc)
        yield scene(rig)


@pytest.fixture
def fresh(base_scene: Scene, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Scene]:
    def make() -> Scene:
        s = copy.deepcopy(base_scene)
        monkeypatch.setattr(wiring, "service", lambda: s.rig.svc)
        return s

    return make


@pytest.mark.parametrize(("row", "caller"), CELLS, ids=[f"{_id(r)}-{c}" for r, c in CELLS])
def test_who_may_call_each_route(fresh: Callable[[], Scene], row: Row, caller: str) -> None:
    s = fresh()
    if row.prepare is not None:
        row.prepare(s)
    path, body = _request(row, s)
    got = _send(s, row.method, path, caller, body, row)
    kind, wanted = expectation(caller, row)
    if kind == "refused":
        status, code = wanted
        assert (got.status, got.code) == (status, code), got
        assert set(got.body) == {"error"} and set(got.body["error"]) == {"code", "message"}
        return
    if kind == INNER:
        assert got.status == row.ok, got
        # A worker token limited to pools hears of another pool's lease what it would hear
        # of a lease that does not exist (so it learns nothing of other pools' leases).
        refusals = ("forbidden", "tool_error", *(("lease_not_found",) * (caller in WORKERS)))
        assert row.inner is not None and row.inner(got) in refusals, got
        return
    assert got.status == wanted, got
    if row.inner is not None:
        assert row.inner(got) is None, got


def _send(s: Scene, method: str, path: str, caller: str, body: Any, row: Row) -> Answer:
    if path.startswith("/board"):
        return _board(s, caller)
    return s.send(method, path, caller, body, row.headers)


def _board(s: Scene, caller: str) -> Answer:
    token = s.tokens[caller]
    head = {"host": "unit"}
    if token is not None:
        head["authorization"] = f"Bearer {token}"
    event = to_event("GET", "/board", head, b"")
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    out = api.handle(event, None)
    return Answer(out["statusCode"], None)


# ---------------------------------------------------- authorization before validation

# A row's own refusals (`refused_as`) depend on its set-up or on the row the service reads,
# so they are not part of this check.
REFUSED = [
    (row, caller)
    for row, caller in CELLS
    if expectation(caller, row)[0] == "refused" and caller not in row.refused_as
]


def _malformed(path: str, body: Any) -> tuple[str, Any]:
    """The same request made invalid twice over: a query parameter no route knows, and a
    field no body has (the body keeps its own fields, so a `space` in it still names it)."""
    path += ("&" if "?" in path else "?") + "bogus=1"
    return path, {**body, "junk": 1} if isinstance(body, dict) else {"junk": 1}


@pytest.mark.parametrize(("row", "caller"), REFUSED, ids=[f"{_id(r)}-{c}" for r, c in REFUSED])
def test_a_refused_caller_is_refused_the_same_way_whatever_its_request_breaks(
    base_scene: Scene, row: Row, caller: str
) -> None:
    """Every refusal of the table again with a malformed request: the role, the kind and the
    scope (a space, a pool, a lease's task) are all decided before validation, so the answer
    is the same refusal, never a 400 or 422 telling the caller about the schema. A refusal
    writes nothing, so the one scene serves every cell."""
    path, body = _malformed(*_request(row, base_scene))
    if path.startswith("/board"):
        pytest.skip("public: nobody is refused")
    got = base_scene.send(row.method, path, caller, body, row.headers)
    assert (got.status, got.code) == refusal(caller, row), got


def test_every_private_route_names_its_scopes_or_says_why_it_has_none() -> None:
    private = {key for key, who in ROUTES.items() if who != "public"}
    scoped = {key for key in private if scopes_of(*key)}
    assert set(UNSCOPED) <= private
    assert scoped & set(UNSCOPED) == set(), "a route both scoped and declared unscoped"
    assert private - scoped - set(UNSCOPED) == set(), "routes with no scope decision"
    assert set(NAMED_SCOPES) <= set(ROUTES)


# The audit's cases (space-scoped admin `elsewhere` on this space's resources, a worker of
# another pool on this pool's claim): each malformed request is still a 403 `forbidden`.
OUT_OF_SCOPE = [
    ("elsewhere", "GET", f"/leases?space={SPACE}&limit=0", None),
    ("elsewhere", "GET", "/leases/{mine}?bogus=1", None),
    ("elsewhere", "POST", "/leases/{mine}/cancel", []),
    ("elsewhere", "POST", "/leases/{mine}/cancel", "{not json"),
    ("elsewhere", "GET", "/leases/{mine}/logs?tail=abc", None),
    ("elsewhere", "GET", "/tasks/{mine_task}?x=1", None),
    ("elsewhere", "POST", "/tasks/{idle_task}/enqueue", {}),
    ("elsewhere", "GET", f"/workers?pool={POOL}&x=1", None),
    ("elsewhere", "PATCH", f"/pools/{POOL}", {"junk": 1}),
    ("elsewhere", "PATCH", "/rules/{rule}", {"junk": 1}),
    ("elsewhere", "POST", "/rules", {"space": SPACE, "junk": 1}),
    ("elsewhere", "POST", "/events", {"space": SPACE, "topic": "a", "junk": 1}),
    ("elsewhere", "GET", "/inspect/{mine}?x=1", None),
    ("elsewhere", "POST", "/spaces", {}),
    ("elsewhere", "POST", "/scheduler/drain", {"timeout_seconds": 99}),
    ("worker_other", "POST", f"/pools/{POOL}/claim", {}),
    ("worker_other", "POST", f"/pools/{POOL}/claim", "{not json"),
    ("worker_other", "POST", "/workers/w-new/heartbeat", {"pool": POOL}),
    ("lease_other", "POST", "/tasks/{mine_task}/blocks", {"kind": "bogus"}),
]


@pytest.mark.parametrize(("caller", "method", "path", "body"), OUT_OF_SCOPE)
def test_a_malformed_request_outside_the_tokens_scope_is_forbidden(
    base_scene: Scene, caller: str, method: str, path: str, body: Any
) -> None:
    raw = body if isinstance(body, str) else json.dumps(body) if body is not None else ""
    got = _send_raw(base_scene, method, _fill(path, base_scene), caller, raw)
    code = "lease_token_mismatch" if caller.startswith("lease") else "forbidden"
    assert (got.status, got.code) == (403, code), got


def _send_raw(s: Scene, method: str, path: str, caller: str, raw: str) -> Answer:
    head = {"host": "unit", "authorization": f"Bearer {s.tokens[caller]}"}
    event = to_event(method, f"/api/v1{path}", head, raw.encode())
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    out = api.handle(event, None)
    return Answer(out["statusCode"], json.loads(out["body"]) if out.get("body") else None)


def test_an_unknown_id_answers_a_scoped_token_as_it_did_and_a_known_one_is_forbidden(
    base_scene: Scene,
) -> None:
    """Nothing by that name: the check lets it through, so the route answers as before (its
    validation, then the service's 404), the same for a token in scope or out of it."""
    for caller in ("elsewhere", "admin"):
        got = base_scene.send("GET", "/leases/lease_nope?bogus=1", caller)
        assert (got.status, got.code) == (422, "validation_failed"), got
        got = base_scene.send("GET", "/leases/lease_nope", caller)
        assert (got.status, got.code) == (404, "lease_not_found"), got
        got = base_scene.send("PATCH", "/rules/rule_nope", caller, {"enabled": False})
        assert (got.status, got.code) == (404, "not_found"), got
    got = base_scene.send("GET", _fill("/leases/{mine}", base_scene), "elsewhere")
    assert (got.status, got.code) == (403, "forbidden"), got


# A task's id, and its first lease's, is its space's digest and its number
# (domain/task_keys.py), so anyone can work out the id of another space's task from its key.
DERIVED = re.compile(r"((?:task|lease)_0[0-9a-f]{16})[0-9a-f]{10}")
NAMES_A_TASK_OR_LEASE = re.compile(r"<(task_id|lease_id|some_id)>")


def _never_filed(text: str) -> str:
    """`text` with each derived id in it turned into the id of a task of the same space, or
    of that task's first lease, that was never filed."""
    return DERIVED.sub(lambda found: found.group(1) + f"{999_999:010x}", text)


def _same_but_the_id(a: Any, b: Any) -> None:
    """Two answers alike but for the id each names (a refusal may repeat what it was sent)."""
    assert _never_filed(json.dumps(a)) == _never_filed(json.dumps(b)), (a, b)


ID_ROWS = [
    row
    for row in TABLE
    if NAMES_A_TASK_OR_LEASE.search(row.rule) or row.rule.startswith("/leases/bulk/")
]


@pytest.mark.parametrize("row", ID_ROWS, ids=_id)
def test_an_id_of_another_spaces_task_answers_the_same_whether_or_not_it_exists(
    fresh: Callable[[], Scene], row: Row
) -> None:
    """The ids in the row are of OPS's tasks and their first leases, derived from their keys;
    "elsewhere" is limited to ELSE. A derived id is refused from its form, before anything is
    read, so the answer for a task that exists is the one for a task never filed."""
    answers = []
    for exists in (True, False):
        s = fresh()
        if row.prepare is not None:
            row.prepare(s)
        path, body = _request(row, s)
        assert DERIVED.search(path + json.dumps(body)), "the row names no derived id"
        if not exists:
            path, body = _never_filed(path), json.loads(_never_filed(json.dumps(body)))
        answers.append(_send(s, row.method, path, "elsewhere", body, row))
    _same_but_the_id((answers[0].status, answers[0].body), (answers[1].status, answers[1].body))
    if row.inner is None:
        assert (answers[0].status, answers[0].code) == (403, "forbidden"), answers[0]


def test_an_id_of_the_tokens_own_space_that_nothing_has_is_still_not_found(
    base_scene: Scene,
) -> None:
    unknown = task_id_of_key(f"{OTHER_SPACE}-999999")
    got = base_scene.send("GET", f"/tasks/{unknown}", "elsewhere")
    assert (got.status, got.code) == (404, "task_not_found"), got
    got = base_scene.send("GET", f"/leases/{first_lease_id(unknown)}", "elsewhere")
    assert (got.status, got.code) == (404, "lease_not_found"), got
    got = base_scene.send("GET", f"/inspect/{unknown}", "elsewhere")
    assert (got.status, got.code) == (404, "not_found"), got


def _mcp(s: Scene, caller: str, name: str, arguments: dict[str, Any]) -> Any:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": name, "arguments": arguments}
    got = s.send(
        "POST", "/mcp", caller, call, {"accept": ACCEPT, "content-type": "application/json"}
    )
    assert got.status == 200, got
    return got.body["result"]


@pytest.mark.parametrize(
    ("tool", "arguments", "prepare"),
    [
        ("leases_get", {"lease_id": "{mine}"}, None),
        ("leases_cancel", {"lease_id": "{mine}"}, None),
        ("leases_fetch_logs", {"lease_id": "{mine}"}, None),
        ("leases_list_attachments", {"lease_id": "{mine}"}, None),
        ("task_cancel", {"task_id": "{idle_task}", "reason": "done"}, None),
        ("task_inspect", {"id": "{mine_task}"}, None),
        ("task_inspect", {"id": "{mine}"}, None),
        ("task_recover", {"task_id": "{idle_task}", "note": "checked"}, _escalated),
        ("task_approve", {"task_id": "{waiting_task}"}, None),
    ],
)
def test_an_mcp_tool_answers_the_same_for_another_spaces_id_whether_or_not_it_exists(
    fresh: Callable[[], Scene],
    tool: str,
    arguments: dict[str, Any],
    prepare: Callable[[Scene], None] | None,
) -> None:
    answers = []
    for exists in (True, False):
        s = fresh()
        if prepare is not None:
            prepare(s)
        named = _fill(json.dumps(arguments), s)
        answers.append(
            _mcp(s, "elsewhere", tool, json.loads(named if exists else _never_filed(named)))
        )
    _same_but_the_id(answers[0], answers[1])
    assert answers[0]["structuredContent"]["error"]["code"] == "forbidden", answers[0]


def _else_task(s: Scene) -> dict[str, Any]:
    """A task of ELSE with its first lease queued on ELSE's pool."""
    body = {"space": OTHER_SPACE, "title": "theirs", "pool": OTHER_POOL}
    filed: dict[str, Any] = s.must("POST", "/tasks", "admin", body)
    return filed


def test_a_lease_token_hears_the_same_of_another_spaces_ids_whether_or_not_they_exist(
    fresh: Callable[[], Scene],
) -> None:
    s = fresh()
    filed = _else_task(s)
    task = filed["task"]["id"]
    seen = s.send("GET", f"/tasks/{task}/blocks", "lease")
    unseen = s.send("GET", f"/tasks/{_never_filed(task)}/blocks", "lease")
    _same_but_the_id((seen.status, seen.body), (unseen.status, unseen.body))
    assert (seen.status, seen.code) == (403, "lease_token_mismatch"), seen
    lease = filed["lease"]["id"]
    for tool in ("leases_get", "leases_fetch_logs", "leases_list_attachments"):
        seen = _mcp(s, "lease", tool, {"lease_id": lease})
        unseen = _mcp(s, "lease", tool, {"lease_id": _never_filed(lease)})
        _same_but_the_id(seen, unseen)
        assert seen["structuredContent"]["error"]["code"] == "lease_token_mismatch", seen


def test_a_worker_claiming_another_spaces_lease_by_id_hears_the_same_whether_or_not_it_exists(
    fresh: Callable[[], Scene],
) -> None:
    s = fresh()
    lease = _else_task(s)["lease"]["id"]
    answers = []
    for named in (lease, _never_filed(lease)):
        body = {"worker_id": "w-probe", "lease_id": named}
        answers.append(s.send("POST", f"/pools/{POOL}/claim", "worker", body))
    _same_but_the_id((answers[0].status, answers[0].body), (answers[1].status, answers[1].body))
    assert answers[0].code == "lease_not_found", answers[0]
    seen, unseen = (
        _mcp(s, "worker", "task_run_claim", {"run_id": named, "worker_id": "w-probe"})
        for named in (lease, _never_filed(lease))
    )
    _same_but_the_id(seen, unseen)


def test_an_unscoped_token_reads_nothing_for_the_scope_check(
    base_scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unread(*_: Any) -> None:
        raise AssertionError("the scope check read a row for a token without a scope")

    monkeypatch.setattr(base_scene.rig.svc.scopes, "space_of", unread)
    monkeypatch.setattr(base_scene.rig.svc.scopes, "lease_reaches_task", unread)
    got = base_scene.send("GET", _fill("/leases/{mine}?bogus=1", base_scene), "admin")
    assert (got.status, got.code) == (422, "validation_failed"), got
    got = base_scene.send("GET", _fill("/leases/{mine}", base_scene), "read")
    assert got.status == 200, got
    got = base_scene.send("POST", f"/pools/{POOL}/claim", "worker", {"junk": 1})
    assert (got.status, got.code) == (422, "validation_failed"), got


# ------------------------------------------------------------ bodies (validation_failed)


def _shape(row: Row) -> BodyShape:
    shape = body_shape(*row.key)
    assert shape is not None, row
    return shape


PRIVATE_ROWS = [r for r in TABLE if ROUTES[r.key] != "public" and not r.key[1].endswith("/mcp")]
# One row per route, with the first caller it lets in.
BY_ROUTE = list({r.key: r for r in reversed(PRIVATE_ROWS)}.values())
NO_BODY = [r for r in BY_ROUTE if not _shape(r).takes]
OPTIONAL = [r for r in PRIVATE_ROWS if _shape(r).takes and _shape(r).empty_is_object]
REQUIRED = [r for r in BY_ROUTE if _shape(r).takes and not _shape(r).empty_is_object]


def _caller(row: Row) -> str:
    return next(c for c in CALLERS if c in row.allow and c not in row.refused_inside)


@pytest.mark.parametrize("row", NO_BODY, ids=_id)
def test_a_route_that_reads_no_body_refuses_a_field_in_one(base_scene: Scene, row: Row) -> None:
    path, _ = _request(row, base_scene)
    got = base_scene.send(row.method, path, _caller(row), {"bogus": 1, "also": 2})
    assert (got.status, got.code) == (422, "validation_failed"), got
    assert got.body["error"]["message"] == "also: is not a known field; bogus: is not a known field"


@pytest.mark.parametrize(
    "rule", ["/cancel", "/kill", "/pause", "/resume", "/start"], ids=lambda x: x.strip("/")
)
def test_lease_actions_take_an_absent_body_or_an_empty_object(
    fresh: Callable[[], Scene], rule: str
) -> None:
    row = next(r for r in TABLE if r.key[1].endswith(f"/leases/<lease_id>{rule}"))
    for body in (None, {}):
        s = fresh()
        if row.prepare is not None:
            row.prepare(s)
        path, _ = _request(row, s)
        got = s.send(row.method, path, _caller(row), body)
        assert got.status == row.ok, (body, got)


@pytest.mark.parametrize("row", OPTIONAL, ids=_id)
def test_an_absent_body_is_the_empty_object_where_every_field_is_optional(
    fresh: Callable[[], Scene], row: Row
) -> None:
    s = fresh()
    if row.prepare is not None:
        row.prepare(s)
    path, _ = _request(row, s)
    got = s.send(row.method, path, _caller(row), None)
    if row.key[1].endswith("/fail"):  # a report, whose `error` is required: it says so
        assert (got.status, got.code) == (422, "validation_failed"), got
        assert got.body["error"]["message"].startswith("error:"), got
    elif row.method == "PATCH" and row.key[1].endswith("/tasks/<task_id>"):
        # Every field optional, but one of them must be named: the model says which.
        assert (got.status, got.code) == (422, "validation_failed"), got
    else:
        assert got.status == row.ok, got


@pytest.mark.parametrize("row", REQUIRED, ids=_id)
def test_an_absent_body_where_a_field_is_required_is_an_invalid_request(
    base_scene: Scene, row: Row
) -> None:
    path, _ = _request(row, base_scene)
    got = base_scene.send(row.method, path, _caller(row), None)
    assert (got.status, got.code) == (400, "invalid_request"), got


def test_the_body_rules_cover_the_routes_the_audit_named() -> None:
    names = {r.key[1].removeprefix("/api/v1") for r in OPTIONAL}
    assert {"/tasks/<task_id>/blocks/<block_id>/clear", "/scheduler/drain"} <= names
    assert "/tasks/<task_id>/recover" in {r.key[1].removeprefix("/api/v1") for r in REQUIRED}
    assert {f"/leases/<lease_id>/{x}" for x in ("cancel", "kill", "pause", "resume", "start")} <= {
        r.key[1].removeprefix("/api/v1") for r in NO_BODY
    }


def _else_lease(s: Scene) -> str:
    """An ELSE lease claimed by ELSE's worker, its token kept as `else_lease`."""
    _else_task(s)
    won = s.must("POST", f"/pools/{OTHER_POOL}/claim", "worker_other", {"worker_id": "w-x"})
    s.tokens["else_lease"] = won["token"]
    return str(won["lease"]["id"])


def test_a_report_naming_another_spaces_task_hears_the_same_whether_or_not_it_exists(
    fresh: Callable[[], Scene],
) -> None:
    answers, tools, told = [], [], []
    for exists in (True, False):
        s = fresh()
        lease = _else_lease(s)
        task = s.ids["idle_task"] if exists else _never_filed(s.ids["idle_task"])
        body = {"created_task_ids": [task]}
        got = s.send("POST", f"/leases/{lease}/complete", "else_lease", body)
        answers.append((got.status, got.body))
        tools.append(_mcp(s, "else_lease", "lease_complete", body))
        # A result that names the task: what the ELSE space's activity records of it.
        s.must("POST", f"/leases/{lease}/complete", "else_lease", {"result": f"made {task}"})
        own = s.must("GET", f"/leases/{lease}", "elsewhere")["task"]["id"]
        events = s.must("GET", f"/tasks/{own}/activity", "elsewhere")["events"]
        told.append([(e["type"], e.get("data")) for e in events if "hallucination" in e["type"]])
    _same_but_the_id(*answers)
    _same_but_the_id(*tools)
    _same_but_the_id(*told)
    assert answers[0][0] == 422 and "is not a task of this lease's space" in str(answers[0][1])


def test_a_pool_limited_worker_hears_the_same_of_another_pools_lease_whether_or_not_it_exists(
    fresh: Callable[[], Scene],
) -> None:
    beats, bulk = [], []
    for exists in (True, False):
        s = fresh()
        s.must("PATCH", "/instance", "admin", {"allow_agent_force": True})
        lease = s.ids["queued"] if exists else _never_filed(s.ids["queued"])
        got = s.send(
            "POST",
            "/workers/w-x/heartbeat",
            "worker_other",
            {"leases": [{"id": lease, "fence": 1}]},
        )
        beats.append((got.status, got.body))
        got = s.send("POST", "/leases/bulk/release", "worker_other", {"lease_ids": [lease]})
        bulk.append((got.status, got.body))
    _same_but_the_id(*beats)
    _same_but_the_id(*bulk)
