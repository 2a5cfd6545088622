"""The served OpenAPI document against the running stack: schemathesis generates requests for
every operation, POST /api/v1/mcp included, and checks each answer's status and content type
are documented and each error is the envelope. 24 generated requests an operation (half valid,
half not), derandomized so a run is repeatable; TENURE_FUZZ_EXAMPLES=40 or more for a deeper run.

About half the valid requests are given real rows (the `reaches` fixture: ids in the path and
query, the few body fields the schema cannot make whole, a lease's own token on its routes),
so they get past the 404 of a made-up id to the route's work. The admin run reached a 2xx on
77 of the 77 operations (39 when every id was made up), in each of four runs, with the same
statuses each time, on 78 of 78 once GET /spaces was added (one run, 297 s for the file), and
on 80 of 80 with GET /pools/{pool}/figures and POST /tasks/{task_id}/cancel (one run, 84 s);
the file prints the count (`timeout 900 .venv/bin/pytest -q -s tests/e2e/test_openapi_fuzz.py`)
and REACHED holds it.
Measured on a two-core machine at a load of 1: 45 s for the admin run and 11 s for the worker
run, 71 s for the file with the stack's start (47 s, 14 s and 71 s before the real rows; 1,779
and 743 requests then, 1,782 and 743 now); under a load of 20-30 the same runs took two to
three times as long."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tenure.api.models import InstancePatch
from tenure.api.routes import ROUTES

from tests.e2e.codes import DOCUMENTED
from tests.e2e.support import World, suffix

# Generated cases per operation, half of them valid and half not (TENURE_FUZZ_EXAMPLES sets it).
DEFAULT_EXAMPLES = 24
EXAMPLES = int(os.environ.get("TENURE_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))
# Operations of the admin run that some generated request reached a 2xx on, at DEFAULT_EXAMPLES
# (measured: the module's docstring).
REACHED = 80
LEASES, TASKS, POOLS, SPACES = "/api/v1/leases", "/api/v1/tasks", "/api/v1/pools", "/api/v1/spaces"
# A rule generated rules are given (their own subject and trigger are made-up objects).
RULE = {"subject": {"kind": "space"}, "trigger": {"topic": "fuzz.happened"}}
# A worker token is refused on most routes before its request is read, so fewer cases find
# what there is to find (TENURE_FUZZ_WORKER_EXAMPLES sets it).
WORKER_EXAMPLES = int(os.environ.get("TENURE_FUZZ_WORKER_EXAMPLES", "10"))
# A claim may wait up to 20 s for work: keep generated claims from waiting on an empty pool.
MAX_WAIT = 0.2
# An invalid request is refused with one of these; schemathesis's own list lacks 413, the
# refusal of a body over the payload limits (a string far past its maxLength makes one).
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}}}
)


@schemathesis.check
def error_envelope(ctx: Any, response: schemathesis.Response, case: Case) -> bool | None:
    """Every error is exactly {"error": {"code", "message"}}, with a code the API documents."""
    if response.status_code < 400:
        return None
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, f"not the envelope: {body!r}"
    assert set(body["error"]) == {"code", "message"}, f"not the envelope: {body!r}"
    assert body["error"]["code"] and body["error"]["message"], f"an empty code: {body!r}"
    assert body["error"]["code"] in DOCUMENTED, f"an undocumented code: {body!r}"
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    error_envelope,
]


def _prepared(case: Case, auth: dict[str, str]) -> Case:
    # The generator makes up bearer tokens of its own; 401s are covered in test_errors.py.
    case.headers = {**(case.headers or {}), **auth}
    # A claim waits up to wait_seconds for work, a drain up to timeout_seconds for held leases
    # (the session's ballast never ends): shorten a valid wait. An invalid one (above 20, below
    # 0, a boolean) stays as generated, or a negative case would turn into a valid request.
    for name in ("wait_seconds", "timeout_seconds"):
        value = case.body.get(name) if isinstance(case.body, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 20:
            case.body[name] = min(value, MAX_WAIT)
    return case


@dataclass(frozen=True)
class Reach:
    """What one operation's valid requests are given so that they reach real rows: path and
    query parameters, body fields set over the generated body (`body`) or only where it has
    them (`fill`), and the token its route admits where an admin token is not one."""

    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    fill: dict[str, Any] = field(default_factory=dict)
    token: str | None = None

    def lay_over(self, case: Case) -> Case:
        if isinstance(case.body, dict):
            filled = {k: v for k, v in self.fill.items() if k in case.body}
            case.body = {**case.body, **filled, **self.body}
        return case


@dataclass(frozen=True)
class Reaches:
    """Real rows for generated requests. `shared` serves every operation that names those
    parameters (by name: `lease_id`, `pool`, `space`…); `own` holds, by "METHOD /path", the
    rows of an operation that changes or ends what it acts on, so that no operation finds a
    row another one has cancelled, revoked or archived. A route no operator may call is
    called with the lease token of the lease it names (`lease_tokens`) or `worker_token`."""

    shared: Reach
    own: dict[str, Reach] = field(default_factory=dict)
    lease_tokens: dict[str, str] = field(default_factory=dict)
    worker_token: str | None = None

    def of(self, operation: Any) -> Reach:
        name = f"{operation.method.upper()} {operation.path}"
        own = self.own.get(name, Reach())
        paths = {p.name for p in operation.path_parameters}
        queries = {p.name for p in operation.query}
        path = {k: v for k, v in self.shared.path.items() if k in paths} | own.path
        query = {k: v for k, v in self.shared.query.items() if k in queries} | own.query
        reach = replace(own, path=path, query=query, fill=self.shared.fill | own.fill)
        audience = _audience(name).split("|")
        if any(a.startswith("operator:") or a == "public" for a in audience):
            return reach
        if "lease" in audience and path.get("lease_id") in self.lease_tokens:
            return replace(reach, token=self.lease_tokens[path["lease_id"]])
        if "worker" in audience and self.worker_token:
            return replace(reach, token=self.worker_token)
        return reach


def _fuzz(
    world: World, token: str, reaches: Reaches, examples: int = EXAMPLES
) -> tuple[Counter[str], list[str]]:
    """Run every operation; return the statuses seen and one line per distinct failure."""
    doc = httpx.get(f"{world.api.base}/openapi.json", timeout=30).json()
    everything = [f"{m.upper()} {path}" for path, ops in doc["paths"].items() for m in ops]
    statuses, failures = _fuzz_each(world.api.base, doc, token, reaches, examples)
    called = {key.rsplit(" ", 1)[0] for key in statuses}
    missed = sorted(set(everything) - called)
    assert not missed, f"operations never called: {missed}"
    by_status = Counter(key.rsplit(" ", 1)[1] for key in statuses.elements())
    print(f"fuzz: {sum(statuses.values())} requests, by status {dict(sorted(by_status.items()))}")
    short = sorted(called - _reached(statuses))
    print(f"fuzz: {len(called) - len(short)} of {len(called)} operations reached a 2xx; not:")
    for name in short:
        seen = {k.rsplit(" ", 1)[1]: n for k, n in statuses.items() if k.rsplit(" ", 1)[0] == name}
        print(f"  {name} {dict(sorted(seen.items()))}")
    return statuses, sorted(failures.values())


def _reached(statuses: Counter[str]) -> set[str]:
    """The operations some request of which was answered with a 2xx."""
    return {key.rsplit(" ", 1)[0] for key in statuses if key.rsplit(" ", 1)[1].startswith("2")}


def _fuzz_each(
    base: str, doc: dict[str, Any], token: str, reaches: Reaches, examples: int
) -> tuple[Counter[str], dict[str, str]]:
    """Every operation of `doc`, one after the other: Hypothesis's caches are not safe across
    threads (its lambda-source cache raced when operations ran on threads of their own)."""
    root = "{0.scheme}://{0.netloc}".format(urlsplit(base))
    schema = schemathesis.openapi.from_dict(doc, config=CONFIG)
    statuses: Counter[str] = Counter()
    failures: dict[str, str] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        reach = reaches.of(operation)
        auth = {"Authorization": f"Bearer {reach.token or token}"}
        _fuzz_operation(root, operation, reach, auth, examples, statuses, failures)
    return statuses, failures


def _fuzz_operation(
    root: str,
    operation: Any,
    reach: Reach,
    auth: dict[str, str],
    examples: int,
    statuses: Counter[str],
    failures: dict[str, str],
) -> None:
    """`examples` generated requests of one operation, counted into `statuses`; a valid
    request is given `reach` (real rows) or generated whole, each about half the time."""
    name = f"{operation.method.upper()} {operation.path}"
    real = reach.path or reach.query or reach.body or reach.fill
    # Invalid cases first: where there is nothing to get wrong, valid ones take their share.
    for mode in (GenerationMode.NEGATIVE, GenerationMode.POSITIVE):
        cases = [operation.as_strategy(generation_mode=mode)]
        if real and mode is GenerationMode.POSITIVE:
            fixed = operation.as_strategy(
                generation_mode=mode, path_parameters=reach.path or None, query=reach.query or None
            )
            cases.append(fixed.map(reach.lay_over))
        done = sum(n for key, n in statuses.items() if key.rsplit(" ", 1)[0] == name)
        take = examples // 2 if mode is GenerationMode.NEGATIVE else examples - done

        @settings(
            max_examples=take,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=st.one_of(cases).map(lambda case: _prepared(case, auth)))
        def run(case: Case) -> None:
            response = case.call(base_url=root, headers=auth, timeout=30)
            statuses[f"{name} {response.status_code}"] += 1
            try:
                case.validate_response(response, checks=CHECKS, headers=auth)
            except FailureGroup as group:
                for failure in group.exceptions:
                    title = f"{name}: {failure.title}"
                    failures.setdefault(
                        title, f"{title} ({response.status_code}) {case.as_curl_command()}"
                    )

        try:
            run()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE, operation.path  # nothing to get wrong


@pytest.fixture(autouse=True)
def _scheduler_resumed(world: World) -> Iterator[None]:
    """Generated requests pause and drain the one scheduler and patch the one instance (its
    ceiling, its breaker, whether agents may force); the next test needs them as they were."""
    before = world.admin.get("/instance")
    assert before.status_code == 200, before.text
    yield
    assert world.admin.post("/scheduler/resume").status_code == 200
    settings = {k: v for k, v in before.json().items() if k in InstancePatch.model_fields}
    restored = world.admin.patch("/instance", json=settings)
    assert restored.status_code == 200, restored.text


def _ok(r: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, f"{r.request.method} {r.request.url.path}: {r.text}"
    answer: dict[str, Any] = r.json()
    return answer


@pytest.fixture
def reaches(world: World) -> Reaches:
    """Real rows for the operations of the admin run: shared ones to read, and for each
    operation that changes or ends its row, rows of its own in the state it acts on."""
    admin, space = world.admin, world.space
    # Every sweep of the session's stack reads each pool, every 2 s, to the session's end:
    # the run makes as few as it can (two here, and one generated: its name is fixed, so the
    # rest are refused as taken). Letting every valid POST /pools make one took the worker run
    # after it from 16 s to 38 s at the same load. Held leases are reported on minutes after
    # the claim: no sweep may end one first.
    pool = world.pool(toleration_seconds=3600)["name"]
    claims = world.pool()["name"]  # the generated claims' own pool, so they take no row here
    world.task(pool=claims)
    worker_token = world.worker_token([pool, claims])
    lease_tokens: dict[str, str] = {}
    worker_id = "fuzz-worker"

    def task(**fields: Any) -> str:
        task_id: str = world.task(**fields)["task"]["id"]
        return task_id

    def held(start: bool = False) -> str:
        """A lease claimed by the fuzz's worker (and started): its id; its token is kept."""
        lease_id: str = world.task(pool=pool)["lease"]["id"]
        claim = {"worker_id": worker_id, "lease_id": lease_id}
        with world.api.client(worker_token) as worker:
            won = _ok(worker.post(f"/pools/{pool}/claim", json=claim))
        lease_tokens[lease_id] = won["token"]
        if start:
            with world.api.client(won["token"]) as holder:
                _ok(holder.post(f"/leases/{lease_id}/start"))
        return lease_id

    def blocked(*reasons: str) -> tuple[str, str]:
        """A task with a block of kind error for each reason, each but the last cleared."""
        task_id, block_id = task(), ""
        for n, reason in enumerate(reasons):
            if n:
                _ok(admin.post(f"/tasks/{task_id}/blocks/{block_id}/clear", json={}))
            block = {"kind": "error", "reason": reason}
            block_id = _ok(admin.post(f"/tasks/{task_id}/blocks", json=block), 201)["block"]["id"]
        return task_id, block_id

    def rule(name: str) -> str:
        body = {"space": space, "name": name, "pool": pool, **RULE}
        rule_id: str = _ok(admin.post("/rules", json=body), 201)["rule"]["id"]
        return rule_id

    def paused(route: str, the_id: str) -> str:
        _ok(admin.post(f"{route}/{the_id}/pause"))
        return the_id

    def own_space(archived: bool = False) -> str:
        key = f"F{suffix()}"
        _ok(admin.post("/spaces", json={"key": key, "name": "fuzz"}), 201)
        if archived:
            _ok(admin.post(f"/spaces/{key}/archive"))
        return key

    reading = held(start=True)
    attachment = {"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk="}
    with world.api.client(lease_tokens[reading]) as holder:
        made = _ok(holder.post(f"/leases/{reading}/attachments", json=attachment), 201)
    _ok(admin.post("/workflows", json={"space": space, "slug": "fuzz", "name": "fuzz"}), 201)
    _ok(admin.post(f"/spaces/{space}/addresses", json={"address": "gone@fuzz.example.com"}), 201)
    token_id = _ok(admin.post("/tokens", json={"name": "gone", "kind": "worker"}), 201)["id"]
    retried = world.task(pool=pool)["lease"]["id"]
    _ok(admin.post(f"/leases/{retried}/cancel"))
    recovered, _ = blocked("flaky", "again")  # the second error block asks for attention
    cleared, block = blocked("flaky")
    shared_task = task()
    own = {
        f"POST {LEASES}/{{lease_id}}/start": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/complete": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/fail": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/release": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/cancel": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/kill": Reach(path={"lease_id": held()}),
        f"POST {LEASES}/{{lease_id}}/pause": Reach(path={"lease_id": held(start=True)}),
        f"POST {LEASES}/{{lease_id}}/resume": Reach(
            path={"lease_id": paused("/leases", held(start=True))}
        ),
        f"POST {LEASES}/{{lease_id}}/retry": Reach(path={"lease_id": retried}),
        f"GET {LEASES}/{{lease_id}}/attachments/{{attachment_id}}": Reach(
            path={"lease_id": reading, "attachment_id": made["attachment"]["id"]}
        ),
        f"PATCH {TASKS}/{{task_id}}": Reach(path={"task_id": task()}, body={"depends_on": []}),
        f"POST {TASKS}/{{task_id}}/enqueue": Reach(path={"task_id": task()}, body={"pool": pool}),
        f"POST {TASKS}/{{task_id}}/approve": Reach(
            path={"task_id": task(pool=pool, requires_approval=True)}
        ),
        f"POST {TASKS}/{{task_id}}/reject": Reach(
            path={"task_id": task(pool=pool, requires_approval=True)}
        ),
        f"POST {TASKS}/{{task_id}}/cancel": Reach(path={"task_id": task()}),
        f"POST {TASKS}/{{task_id}}/blocks": Reach(path={"task_id": task()}),
        f"POST {TASKS}/{{task_id}}/blocks/{{block_id}}/clear": Reach(
            path={"task_id": cleared, "block_id": block}
        ),
        f"POST {TASKS}/{{task_id}}/recover": Reach(path={"task_id": recovered}),
        # Generated settings (a short toleration) would end the held leases: the claims' pool
        # takes them. The shared pool is paused, then resumed by the very next operation.
        f"PATCH {POOLS}/{{pool}}": Reach(path={"pool": claims}),
        f"POST {POOLS}/{{pool}}/claim": Reach(path={"pool": claims}),
        f"POST {SPACES}/{{space}}/archive": Reach(path={"space": own_space()}),
        f"POST {SPACES}/{{space}}/unarchive": Reach(path={"space": own_space(archived=True)}),
        f"POST {SPACES}/{{key}}/addresses": Reach(body={"address": "fuzz@fuzz.example.com"}),
        f"DELETE {SPACES}/{{key}}/addresses/{{address}}": Reach(
            path={"address": "gone@fuzz.example.com"}
        ),
        # Where the schema's valid bodies are mostly refused on what it does not say (an
        # operator names the space, a command pool takes no agent settings, an attachment
        # has a size or its bytes, a rule's name is a slug and its subject and trigger are
        # objects of their own), the fields that make one whole.
        "POST /api/v1/rules": Reach(body={"space": space, "pool": pool, "name": "made", **RULE}),
        "POST /api/v1/tasks": Reach(body={"space": space}),
        "POST /api/v1/pools": Reach(body={"space": space, "kind": "command", "name": "made"}),
        f"POST {LEASES}/{{lease_id}}/attachments": Reach(
            body={"content_base64": "aGk=", "byte_size": 2}
        ),
        "PATCH /api/v1/rules/{rule_id}": Reach(path={"rule_id": rule("patched")}, body=RULE),
        "DELETE /api/v1/rules/{rule_id}": Reach(path={"rule_id": rule("deleted")}),
        "DELETE /api/v1/tokens/{token_id}": Reach(path={"token_id": token_id}),
    }
    ids = {"pool": pool, "task_id": shared_task, "lease_id": reading, "rule_id": rule("read")}
    shared = Reach(
        path={**ids, "space": space, "key": space, "some_id": shared_task, "slug": "fuzz"}
        | {"worker_id": worker_id},
        query={"space": space, "pool": pool},
        fill={"space": space, "pool": pool},
    )
    return Reaches(shared, own, lease_tokens, worker_token)


@pytest.fixture
def known(world: World) -> Reaches:
    """Real ids for the worker run's generated path parameters, so requests also reach real
    rows (a worker token is refused on most routes, whatever the row)."""
    pool = world.pool()["name"]
    created = world.task(pool=pool)
    path = {"pool": pool, "task_id": created["task"]["id"], "lease_id": created["lease"]["id"]}
    return Reaches(Reach(path=path))


# Every operation, each with its generated cases and examples: about 1,800 requests, 85-350 s
# on two cores depending on what else runs (the default 300 s cut it short under load).
@pytest.mark.timeout(1200)
def test_generated_requests_with_the_tokens_each_route_admits_meet_the_document(
    world: World, reaches: Reaches
) -> None:
    """An admin token, and on a route no operator may call the token it admits."""
    statuses, failures = _fuzz(world, world.api.admin_token, reaches)
    assert not failures, "\n".join(failures)
    assert sum(statuses.values()) >= 25 * EXAMPLES, statuses
    assert any(key.startswith("POST /api/v1/mcp 2") for key in statuses), statuses
    if EXAMPLES >= DEFAULT_EXAMPLES:
        # Fewer: generated requests no longer get past a refusal to some route's real rows
        # (a new route with a path parameter needs one in `reaches`).
        short = sorted({key.rsplit(" ", 1)[0] for key in statuses} - _reached(statuses))
        assert len(_reached(statuses)) >= REACHED, f"never a 2xx: {short}"


def test_generated_requests_with_a_worker_token_meet_the_document(
    world: World, known: Reaches
) -> None:
    token = world.worker_token([known.shared.path["pool"]])
    off = world.admin.patch("/instance", json={"allow_agent_force": False})
    assert off.status_code == 200, off.text
    statuses, failures = _fuzz(world, token, known, WORKER_EXAMPLES)
    assert not failures, "\n".join(failures)
    assert any(key.endswith(" 403") for key in statuses), statuses
    # No route lets a worker token do more than the route table gives it: a success only where the
    # route table names workers (or no token at all).
    overreach = sorted(
        key
        for key in statuses
        if key.rsplit(" ", 1)[1].startswith("2") and not _admits_workers(key.rsplit(" ", 1)[0])
    )
    assert not overreach, overreach
    # And each route it may call answered it a 2xx at least once: a claim, its heartbeat, the
    # public routes and /mcp.
    admitted = {key.rsplit(" ", 1)[0] for key in statuses if _admits_workers(key.rsplit(" ", 1)[0])}
    assert "POST /api/v1/pools/{pool}/claim" in admitted, sorted(admitted)
    assert admitted - CLAIMING_REPORTS <= _reached(statuses), sorted(admitted - _reached(statuses))


# A final report takes a worker token only with `next`, on a lease that very token claimed:
# generated bodies rarely carry `next`, so the worker run meets their 403 (the admin run
# reaches them with the lease's own token, and tests/unit/test_next_claims.py the worker's).
CLAIMING_REPORTS = {
    "POST /api/v1/leases/{lease_id}/complete",
    "POST /api/v1/leases/{lease_id}/fail",
}


def _audience(operation: str) -> str:
    method, path = operation.split(" ", 1)
    return ROUTES[(method, path.replace("{", "<").replace("}", ">"))]


def _admits_workers(operation: str) -> bool:
    audience = _audience(operation).split("|")
    return "worker" in audience or "public" in audience
