"""Capacity no caller can take from the others, on the local stack: 200 idle long polls from 25
worker tokens wait on the claim endpoint while an operator lists leases on the API and workers
heartbeat on the worker endpoint, and neither waits behind them.

The polls go where the worker SDK sends them (the claim URL the worker endpoint names on its
claim answers); each token sends 8, the most that may wait at once, and 5 of the tokens one
more, which answers at once. For a few seconds while every poll waits, the operator's lists
and the heartbeats are timed: each answers 200 well within the poll's wait (a request queued
behind the polls would take as long as they do). Every token's slots row is read from the
table meanwhile: none holds more than 8.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from tenure_cli.local.stack import TABLE

from tests.conftest import LocalStack
from tests.e2e.support import World

TOKENS = 25
WAITING = 8  # per token: the most that may wait at once
POLLS = TOKENS * WAITING  # 200
EXTRA = 5  # tokens that send a ninth poll, which answers at once
WAIT_SECONDS = 20.0  # the longest a claim may wait
# How long the operator and the heartbeats are timed while every poll waits.
MEASURE_SECONDS = 5.0
# What an operator's list or a heartbeat may take while 200 polls wait, with room for two
# shared cores that run the polls' looks, DynamoDB Local, the stack and another test tier at
# once (one heartbeat took 4.5 s so, against a median of 0.13 s). A request queued behind the
# polls would take until they answer: the timing ends more than this before they do.
BOUND_SECONDS = 6.0
# How long the polls are given to take their slots before the timing starts.
FILL_SECONDS = WAIT_SECONDS - MEASURE_SECONDS - BOUND_SECONDS - 1.0
HEARTBEAT_WORKERS = 4
# The whole run is bounded: a poll's answer comes within its wait and this margin.
POLL_MARGIN = 60.0


def _stack_info(stack: LocalStack) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((stack.data_dir / "stack.json").read_text())
    return info


def _slots(table: Any, token_ids: list[str]) -> dict[str, int]:
    """Each token's slots held now, read from its slots row (what a claim about to wait reads).
    One consistent BatchGetItem for all of them: 25 reads one after another took seconds on a
    loaded machine, while 200 polls kept the engine busy, and ate the time left to measure."""
    now = int(time.time() * 1000)
    keys = [{"PK": {"S": f"POLLS#{t}"}, "SK": {"S": "POLLS"}} for t in token_ids]
    rows: list[dict[str, Any]] = []
    for _ in range(5):  # what the engine left unprocessed, asked again a few times
        out = table.batch_get_item(RequestItems={TABLE: {"Keys": keys, "ConsistentRead": True}})
        rows += out["Responses"].get(TABLE, [])
        keys = out.get("UnprocessedKeys", {}).get(TABLE, {}).get("Keys", [])
        if not keys:
            break
    assert not keys, f"{len(keys)} slots rows left unread"
    held = dict.fromkeys(token_ids, 0)
    for row in rows:
        token_id = row["PK"]["S"].removeprefix("POLLS#")
        held[token_id] = sum(
            1 for name, value in row.items() if name[:1] == "w" and int(value["N"]) >= now
        )
    return held


def test_200_idle_long_polls_keep_no_operator_and_no_heartbeat_waiting(
    local_stack: LocalStack, world: World
) -> None:
    info = _stack_info(local_stack)
    claim_api, worker_api = info["worker_claim_api"], info["worker_api"]
    ddb = local_stack.aws("dynamodb")
    idle = world.pool()["name"]  # no task ever: every poll waits its whole wait
    busy = world.pool(toleration_seconds=3600)["name"]
    made = [
        world.admin.post("/tokens", json={"name": f"fleet-{idle}-{n}", "kind": "worker"}).json()
        for n in range(TOKENS)
    ]
    tokens = [m["token"] for m in made]
    token_ids = [m["id"] for m in made]

    # The heartbeating workers: each holds a lease of the busy pool, claimed on the worker
    # endpoint, whose claim answer names the claim URL the polls below use.
    beat_token = world.worker_token([busy])
    beaters: list[tuple[httpx.Client, str, dict[str, Any]]] = []
    for n in range(HEARTBEAT_WORKERS):
        client = httpx.Client(
            base_url=worker_api, headers={"authorization": f"Bearer {beat_token}"}, timeout=60
        )
        world.task(pool=busy)
        won = client.post(f"/pools/{busy}/claim", json={"worker_id": f"beat-{n}"})
        assert won.status_code == 200, won.text
        assert won.headers["tenure-claim-api"] == claim_api
        beaters.append((client, f"beat-{n}", won.json()))
    for client, worker_id, won in beaters:  # each beat's first: started before any poll
        body = {"leases": [{"id": won["lease"]["id"], "fence": won["fence"]}]}
        assert client.post(f"/workers/{worker_id}/heartbeat", json=body).status_code == 200

    answers: dict[int, tuple[int, float]] = {}
    lock = threading.Lock()

    def poll(n: int) -> None:
        token = tokens[n % TOKENS]
        with httpx.Client(
            base_url=claim_api,
            headers={"authorization": f"Bearer {token}"},
            timeout=WAIT_SECONDS + POLL_MARGIN,
        ) as client:
            began = time.monotonic()
            r = client.post(
                f"/pools/{idle}/claim",
                json={"worker_id": f"idle-{n}", "wait_seconds": WAIT_SECONDS},
            )
            with lock:
                answers[n] = (r.status_code, time.monotonic() - began)

    started = time.monotonic()
    polls = ThreadPoolExecutor(POLLS + EXTRA)
    futures = [polls.submit(poll, n) for n in range(POLLS)]
    # Every token's 8 polls waiting (their slots held), or as many as take a slot in time.
    give_up = started + FILL_SECONDS
    while time.monotonic() < give_up and sum(_slots(ddb, token_ids).values()) < POLLS:
        time.sleep(0.2)
    # A ninth poll of 5 tokens: each token's 8 slots are held, so it answers at once.
    futures += [polls.submit(poll, POLLS + n) for n in range(EXTRA)]

    timings: dict[str, list[float]] = defaultdict(list)
    refused: list[str] = []
    most_held: dict[str, int] = defaultdict(int)
    operator = httpx.Client(
        base_url=local_stack.base,
        headers={"authorization": f"Bearer {local_stack.admin_token}"},
        timeout=60,
    )

    def timed(what: str, send: Any) -> None:
        began = time.monotonic()
        r = send()
        timings[what].append(time.monotonic() - began)
        if r.status_code != 200:
            refused.append(f"{what}: {r.status_code} {r.text[:200]}")

    def beat(client: httpx.Client, worker_id: str, won: dict[str, Any]) -> None:
        body = {"leases": [{"id": won["lease"]["id"], "fence": won["fence"]}]}
        while time.monotonic() < measure_until:
            timed("heartbeat", lambda: client.post(f"/workers/{worker_id}/heartbeat", json=body))
            time.sleep(0.5)

    def watch_slots() -> None:
        while time.monotonic() < measure_until:
            for token_id, held in _slots(ddb, token_ids).items():
                most_held[token_id] = max(most_held[token_id], held)

    measure_from = time.monotonic()
    # Nothing is sent later than BOUND_SECONDS (and a second) before the polls' wait ends, so
    # a request queued behind them would take longer than the bound. On a machine slow to set
    # the polls up, the timing is shorter for it.
    measure_until = min(
        measure_from + MEASURE_SECONDS, started + WAIT_SECONDS - BOUND_SECONDS - 1.0
    )
    assert measure_until - measure_from >= 1.0, "the polls took too long to set up to time"
    threads = [threading.Thread(target=beat, args=b) for b in beaters]
    threads.append(threading.Thread(target=watch_slots))
    for thread in threads:
        thread.start()
    while time.monotonic() < measure_until:
        timed("operator list", lambda: operator.get("/leases", params={"space": world.space}))
        time.sleep(0.25)
    for thread in threads:
        thread.join(timeout=MEASURE_SECONDS + POLL_MARGIN)
    # The measurement ran while the polls waited: hardly any had answered by its end.
    with lock:
        answered_by_then = sum(1 for n in answers if n < POLLS)

    for future in futures:
        future.result(timeout=WAIT_SECONDS + 2 * POLL_MARGIN)
    polls.shutdown()
    operator.close()
    for client, _, _ in beaters:
        client.close()

    summary = {
        what: {
            "n": len(xs),
            "max_s": round(max(xs), 3),
            "p50_s": round(sorted(xs)[len(xs) // 2], 3),
        }
        for what, xs in timings.items()
    }
    polled = sorted(round(took, 1) for _, took in answers.values())
    print(
        f"\nwhile {POLLS} polls waited: {summary}; most slots held by a token: "
        f"{max(most_held.values())}; poll answers (s): first {polled[:8]} last {polled[-3:]}"
    )
    assert answered_by_then <= POLLS // 10, f"{answered_by_then} polls answered before the end"
    assert not refused, refused
    assert timings["operator list"] and timings["heartbeat"], timings
    for what, took in timings.items():
        assert max(took) < BOUND_SECONDS, (what, summary)
    # Each token held at most 8 slots; with every slot of 5 tokens held, their ninth answered
    # at once, and no poll was refused.
    assert max(most_held.values()) <= WAITING, most_held
    assert {status for status, _ in answers.values()} == {204}, answers
    assert len(answers) == POLLS + EXTRA
    # Answered after the whole wait: each token's waited, 8 at most (its ninth did not).
    waited: dict[int, int] = defaultdict(int)
    for n, (_, took) in answers.items():
        waited[n % TOKENS] += took >= WAIT_SECONDS - 0.5
    assert max(waited.values()) <= WAITING, waited
    assert sum(waited.values()) >= POLLS * 0.9, (waited, polled)
    # And every slot is free again once the polls have answered.
    assert sum(_slots(ddb, token_ids).values()) == 0
