"""The worker SDK sends claims that wait to the claim endpoint the worker endpoint names on its
claim answers (Tenure-Claim-Api), with the worker token, so its idle long polls never hold the
function its heartbeats need; it takes that address only from the origin it asked, and only
one the token may travel to. A runner whose long poll came back at once (its token's waiting
claims are all taken) waits out the rest of the poll rather than spin."""

from __future__ import annotations

import time
from pathlib import Path

from tenure_worker.client import Answer, Client

from tests.unit.test_worker_client import NOTHING, WON, FakeTransport, client, worker

CLAIMS = "https://claims.tenure.test/api/v1"


def named(url: str, status: int = 204, answered_from: str | None = None) -> Answer:
    return Answer(status, {"Tenure-Claim-Api": url}, b"", answered_from)


def test_claims_that_wait_go_to_the_claim_endpoint_the_worker_endpoint_names() -> None:
    fake = FakeTransport(named(CLAIMS), NOTHING, NOTHING, WON)
    c = client(fake, [])
    assert c.claim("p", "w1") is None  # no wait: on the worker endpoint, which names it
    assert c.claim("p", "w1", wait_seconds=10) is None
    assert c.claim("p", "w1") is None  # no wait: stays on the worker endpoint
    c.claim("p", "w1", wait_seconds=10)
    urls = [r["url"] for r in fake.requests]
    assert urls == [
        "http://tenure.test/api/v1/pools/p/claim",
        f"{CLAIMS}/pools/p/claim",
        "http://tenure.test/api/v1/pools/p/claim",
        f"{CLAIMS}/pools/p/claim",
    ]
    assert {r["bearer"] for r in fake.requests} == {"tnr_w_x"}  # the worker token goes along


def test_an_address_from_another_origin_or_one_the_token_may_not_travel_to_is_ignored() -> None:
    for answer in (
        named(CLAIMS, answered_from="https://elsewhere.test/api/v1/pools/p/claim"),
        named("http://claims.tenure.test/api/v1"),  # plain http to another host
        named("file:///etc/passwd"),
    ):
        fake = FakeTransport(answer, NOTHING)
        c = client(fake, [])
        c.claim("p", "w1")
        c.claim("p", "w1", wait_seconds=10)
        assert fake.requests[1]["url"].startswith("http://tenure.test/"), answer
    local = FakeTransport(named("http://127.0.0.1:9/api/v1", answered_from=None), NOTHING)
    c = client(local, [])
    c.claim("p", "w1")
    c.claim("p", "w1", wait_seconds=10)
    assert local.requests[1]["url"] == "http://127.0.0.1:9/api/v1/pools/p/claim"


def test_an_unreachable_claim_endpoint_sends_claims_back_to_the_worker_endpoint() -> None:
    fake = FakeTransport(named(CLAIMS), ConnectionResetError(), NOTHING)
    c = Client("http://tenure.test", "tnr_w_x", retries=0, transport=fake, sleep=lambda _: None)
    c.claim("p", "w1")
    try:
        c.claim("p", "w1", wait_seconds=10)
    except Exception as err:  # a ClaimUnanswered: retried as the same claim
        claim_id = err.claim_id  # type: ignore[attr-defined]
    c.claim("p", "w1", wait_seconds=10, claim_id=claim_id)
    assert fake.requests[2]["url"] == "http://tenure.test/api/v1/pools/p/claim"
    assert fake.requests[2]["body"]["claim_id"] == fake.requests[1]["body"]["claim_id"]


def test_a_runner_whose_long_poll_answered_at_once_waits_out_the_poll(tmp_path: Path) -> None:
    fake = FakeTransport(NOTHING, NOTHING)
    w = worker(tmp_path, fake)
    w._claim()  # the first claim asks without waiting: its answer tells the worker it is up
    assert fake.requests[0]["body"]["wait_seconds"] == 0 and w.contacted
    assert w.claim_not_before == 0.0
    before = time.monotonic()
    w._claim()  # nothing, at once, though it asked to wait
    assert fake.requests[1]["body"]["wait_seconds"] == 10
    assert w.claim_not_before >= before + 9  # the rest of its 10 s poll
