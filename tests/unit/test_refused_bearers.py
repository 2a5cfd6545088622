"""What an unauthenticated caller costs the worker function URL, which has no authorizer and no
stage throttle in front of it: a bearer that cannot be a token is refused without a read, an
unknown well-shaped one costs one read a minute however often it is sent, and a flood of
made-up tokens cannot push a worker's own verdict out (which would cost every real request a
read again)."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure.domain.model import Principal, Token
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, Rig


@pytest.fixture
def rig() -> Rig:
    return Rig()


class Reads:
    """The table's token reads (the one read a bearer check makes)."""

    def __init__(self, rig: Rig) -> None:
        self.count = 0
        inner = rig.store.get_token

        def get_token(token_hash: str) -> Token | None:
            self.count += 1
            return inner(token_hash)

        rig.store.get_token = get_token  # type: ignore[method-assign]


@pytest.fixture
def url(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[float]]:
    """A claim on the worker function URL with this bearer, on a clock the test moves."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    now = [1000.0]
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts(clock=lambda: now[0]))

    def call(bearer: str) -> int:
        headers = {"host": "unit", "authorization": f"Bearer {bearer}"}
        body = json.dumps({"worker_id": "w1"}).encode()
        event = to_event("POST", "/api/v1/pools/builders/claim", headers, body)
        return int(lambda_host.invoke_worker(event)["statusCode"])

    return call, now


def _made_up() -> str:
    return "tnr_w_" + secrets.token_urlsafe(24)


def test_two_hundred_requests_with_twenty_made_up_tokens_read_the_table_twenty_times(
    rig: Rig, url: tuple[Any, list[float]]
) -> None:
    call, now = url
    reads = Reads(rig)
    made_up = [_made_up() for _ in range(20)]
    assert {call(made_up[n % 20]) for n in range(200)} == {401}
    assert reads.count == 20
    now[0] += tokens.VERDICT_SECONDS + 1  # a refusal is remembered for a minute
    assert {call(made_up[n % 20]) for n in range(40)} == {401}
    assert reads.count == 40


def test_a_bearer_that_cannot_be_a_token_is_refused_without_a_read(
    rig: Rig, url: tuple[Any, list[float]]
) -> None:
    call, _ = url
    reads = Reads(rig)
    garbage = ["x", "tnr_", "tnr_q_" + "a" * 30, "tnr_w_" + "a" * 600, "tnr_w_abc def", "é" * 20]
    for bearer in garbage * 10:
        assert call(bearer) == 401
    assert reads.count == 0


def test_a_flood_of_made_up_tokens_cannot_push_out_a_worker_s_verdict(rig: Rig) -> None:
    _, raw = rig.svc.tokens.create_token(ADMIN, "fleet", "worker", None, None, None)
    checks = {"reads": 0}

    def check(token: str | None) -> Principal:
        checks["reads"] += 1
        return tokens.principal_of(token)

    kept = tokens.Verdicts(check=check, clock=lambda: 0.0, size=8)
    # tokens.principal_of builds the service of the process: this rig's.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wiring, "service", lambda: rig.svc)
        patch.setattr(wiring, "worker_service", lambda: rig.svc.core)
        assert kept.principal({"authorization": f"Bearer {raw}"}).kind == "worker"
        for _ in range(200):
            with pytest.raises(Exception, match="unknown token"):
                kept.principal({"authorization": f"Bearer {_made_up()}"})
        before = checks["reads"]
        assert kept.principal({"authorization": f"Bearer {raw}"}).kind == "worker"
    assert checks["reads"] == before  # the worker's verdict was still kept: no read
