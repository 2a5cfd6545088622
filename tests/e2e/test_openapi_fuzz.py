"""The served OpenAPI document against the running stack: schemathesis generates requests for
every operation, POST /api/v1/mcp included, and checks each answer's status and content type
are documented and each error is the envelope. 24 generated requests an operation (half valid,
half not), derandomized so a run is repeatable: about 75 s for both tokens alone on a two-core
machine, about 87 s beside the other tiers; TENURE_FUZZ_EXAMPLES=40 or more for a deeper run."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
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
from tests.e2e.support import World

# Generated cases per operation, half of them valid and half not (TENURE_FUZZ_EXAMPLES sets it).
EXAMPLES = int(os.environ.get("TENURE_FUZZ_EXAMPLES", "24"))
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


def _fuzz(
    world: World, token: str, known: dict[str, str], examples: int = EXAMPLES
) -> tuple[Counter[str], list[str]]:
    """Run every operation; return the statuses seen and one line per distinct failure."""
    doc = httpx.get(f"{world.api.base}/openapi.json", timeout=30).json()
    everything = [f"{m.upper()} {path}" for path, ops in doc["paths"].items() for m in ops]
    statuses, failures = _fuzz_each(world.api.base, doc, token, known, examples)
    called = {key.rsplit(" ", 1)[0] for key in statuses}
    missed = sorted(set(everything) - called)
    assert not missed, f"operations never called: {missed}"
    by_status = Counter(key.rsplit(" ", 1)[1] for key in statuses.elements())
    print(f"fuzz: {sum(statuses.values())} requests, by status {dict(sorted(by_status.items()))}")
    return statuses, sorted(failures.values())


def _fuzz_each(
    base: str, doc: dict[str, Any], token: str, known: dict[str, str], examples: int
) -> tuple[Counter[str], dict[str, str]]:
    """Every operation of `doc`, one after the other: Hypothesis's caches are not safe across
    threads (its lambda-source cache raced when operations ran on threads of their own)."""
    root = "{0.scheme}://{0.netloc}".format(urlsplit(base))
    schema = schemathesis.openapi.from_dict(doc, config=CONFIG)
    auth = {"Authorization": f"Bearer {token}"}
    statuses: Counter[str] = Counter()
    failures: dict[str, str] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        names = {p.name for p in operation.path_parameters}
        real = {name: value for name, value in known.items() if name in names}
        # Invalid cases first: where there is nothing to get wrong, valid ones take their share.
        for mode in (GenerationMode.NEGATIVE, GenerationMode.POSITIVE):
            cases = [operation.as_strategy(generation_mode=mode)]
            if real and mode is GenerationMode.POSITIVE:
                cases.append(operation.as_strategy(generation_mode=mode, path_parameters=real))
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
                key = f"{case.operation.method.upper()} {case.operation.path}"
                statuses[f"{key} {response.status_code}"] += 1
                try:
                    case.validate_response(response, checks=CHECKS, headers=auth)
                except FailureGroup as group:
                    for failure in group.exceptions:
                        title = f"{key}: {failure.title}"
                        failures.setdefault(
                            title, f"{title} ({response.status_code}) {case.as_curl_command()}"
                        )

            try:
                run()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, operation.path  # nothing to get wrong
    return statuses, failures


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


@pytest.fixture
def known(world: World) -> dict[str, str]:
    """Real ids for some generated path parameters, so requests also reach real rows."""
    pool = world.pool()["name"]
    created = world.task(pool=pool)
    return {"pool": pool, "task_id": created["task"]["id"], "lease_id": created["lease"]["id"]}


def test_generated_requests_with_an_admin_token_meet_the_document(
    world: World, known: dict[str, str]
) -> None:
    statuses, failures = _fuzz(world, world.api.admin_token, known)
    assert not failures, "\n".join(failures)
    assert sum(statuses.values()) >= 25 * EXAMPLES, statuses
    assert any(key.startswith("POST /api/v1/mcp 2") for key in statuses), statuses


def test_generated_requests_with_a_worker_token_meet_the_document(
    world: World, known: dict[str, str]
) -> None:
    token = world.worker_token([known["pool"]])
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


def _admits_workers(operation: str) -> bool:
    method, path = operation.split(" ", 1)
    audience = ROUTES[(method, path.replace("{", "<").replace("}", ">"))].split("|")
    return "worker" in audience or "public" in audience
