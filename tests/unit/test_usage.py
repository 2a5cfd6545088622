"""Usage and cost: resolution from pool rates and the sum's agreement rules."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.usage import BUCKETS, MICROS, Totals, cost_key, counts_of, stored_usage, summed
from tenure.domain.errors import ValidationFailed
from tenure.domain.states import LeaseState

from tests.unit.support import ADMIN, MEMBER, POOL, READER, Rig, as_lease

RATES = {"currency": "USD", "input_tokens": 3.0, "output_tokens": 15.0}


def _sum(*usages: dict[str, Any]) -> dict[str, Any] | None:
    """Sum resolved usages the way the accumulator does (counts and the set of cost keys)."""
    leases, micros, tokens, keys = 0, 0, [0] * len(BUCKETS), set()
    for resolved in usages:
        counts = dict(counts_of(resolved))
        leases += counts["usage_leases"]
        micros += counts["usage_cost_micros"]
        tokens = [t + counts[f"usage_{b}"] for t, b in zip(tokens, BUCKETS, strict=True)]
        keys.add(cost_key(resolved["cost"]))
    return summed(Totals(leases, tuple(tokens), micros, tuple(sorted(keys))))


def _cost(amount: float | None, currency: str | None, status: str, source: str) -> dict[str, Any]:
    return {"amount": amount, "currency": currency, "status": status, "source": source}


ACTUAL_USD = {"input_tokens": 10, "cost": _cost(0.5, "USD", "actual", "invoice")}
ACTUAL_USD_2 = {"output_tokens": 5, "cost": _cost(0.25, "USD", "actual", "invoice")}
ACTUAL_EUR = {"input_tokens": 1, "cost": _cost(0.5, "EUR", "actual", "invoice")}
ACTUAL_OTHER_SOURCE = {"input_tokens": 1, "cost": _cost(0.5, "USD", "actual", "meter")}
INCLUDED = {"input_tokens": 7, "cost": _cost(None, "USD", "included", "subscription")}
INCLUDED_2 = {"input_tokens": 3, "cost": _cost(None, "USD", "included", "subscription")}
UNKNOWN = {"input_tokens": 2, "cost": _cost(None, None, "unknown", "worker")}
ESTIMATED = {"input_tokens": 1_000_000}  # estimated from RATES: 3.0 USD


@pytest.mark.parametrize(
    ("reports", "want"),
    [
        # one lease, each status
        ([ACTUAL_USD], (0.5, "USD", "actual", "invoice")),
        ([ESTIMATED], (3.0, "USD", "estimated", "pool_rates")),
        ([INCLUDED], (None, "USD", "included", "subscription")),
        ([UNKNOWN], (None, None, "unknown", "worker")),
        # agreeing leases add up
        ([ACTUAL_USD, ACTUAL_USD_2], (0.75, "USD", "actual", "invoice")),
        ([ESTIMATED, ESTIMATED], (6.0, "USD", "estimated", "pool_rates")),
        ([INCLUDED, INCLUDED_2], (None, "USD", "included", "subscription")),
        # any disagreement: unknown, no amount
        ([ACTUAL_USD, ACTUAL_EUR], (None, None, "unknown", None)),
        ([ACTUAL_USD, ACTUAL_OTHER_SOURCE], (None, None, "unknown", None)),
        ([ACTUAL_USD, ESTIMATED], (None, None, "unknown", None)),
        ([ACTUAL_USD, INCLUDED], (None, None, "unknown", None)),
        ([ACTUAL_USD, UNKNOWN], (None, None, "unknown", None)),
        ([ESTIMATED, INCLUDED], (None, None, "unknown", None)),
        ([INCLUDED, UNKNOWN], (None, None, "unknown", None)),
        ([ESTIMATED, UNKNOWN, ACTUAL_EUR], (None, None, "unknown", None)),
    ],
)
def test_the_sum_carries_a_cost_only_when_every_lease_agrees(
    reports: list[dict[str, Any]], want: tuple[Any, ...]
) -> None:
    total = _sum(*(stored_usage(r, RATES) for r in reports))
    assert total is not None
    got = (total["total_cost"], total["cost_currency"], total["cost_status"], total["cost_source"])
    assert got == want
    assert total["lease_count"] == len(reports)
    # Token totals always add up, whatever the costs.
    for bucket in BUCKETS:
        assert total[bucket] == sum(int(r.get(bucket, 0)) for r in reports)


def test_no_usage_reported_sums_to_nothing() -> None:
    assert summed(Totals()) is None


@pytest.mark.parametrize(
    ("usage", "rates", "status", "amount"),
    [
        ({"input_tokens": 2_000_000, "output_tokens": 1_000_000}, RATES, "estimated", 21.0),
        ({"input_tokens": 0}, RATES, "estimated", 0.0),
        ({"input_tokens": 1, "reasoning_tokens": 1}, RATES, "unknown", None),  # no rate: no guess
        ({"input_tokens": 1}, None, "unknown", None),
        ({"cache_read_tokens": 1_000_000}, {**RATES, "cache_read_tokens": 0.3}, "estimated", 0.3),
    ],
)
def test_an_estimate_needs_a_rate_for_every_non_zero_bucket(
    usage: dict[str, Any], rates: dict[str, Any] | None, status: str, amount: float | None
) -> None:
    cost = stored_usage(usage, rates)["cost"]
    assert (cost["status"], cost["amount"]) == (status, amount)


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -1},
        {"input_tokens": 1.5},
        {"tokens": 3},
        {"cost": {"amount": 1, "currency": "USD", "status": "included", "source": "s"}},
        {"cost": {"amount": None, "currency": "USD", "status": "actual", "source": "s"}},
        {"cost": {"amount": 1, "currency": "USD", "status": "guessed", "source": "s"}},
        {"cost": {"amount": 1, "status": "actual", "source": "s"}},
    ],
)
def test_malformed_usage_is_refused(usage: dict[str, Any]) -> None:
    with pytest.raises(ValidationFailed):
        stored_usage(usage, RATES)


def test_micros_make_the_sum_exact() -> None:
    tenth = {"input_tokens": 1, "cost": _cost(0.1, "USD", "actual", "x")}
    total = _sum(*(stored_usage(tenth, None) for _ in range(10)))
    assert total is not None and total["total_cost"] == 1.0 and MICROS == 1_000_000


def test_completions_accumulate_on_the_task_and_show_on_the_lease(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"rates": RATES})
    task, _ = rig.task()
    won = rig.claim()
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {})
    second = rig.claim()
    rig.svc.reports.complete(
        as_lease(second.lease.id), second.lease.id, {"usage": {"input_tokens": 1_000_000}}
    )
    lease = rig.lease(second.lease.id)
    assert lease.state is LeaseState.COMPLETED
    assert lease.report is not None and lease.report["usage"]["cost"]["status"] == "estimated"
    usage = rig.svc.graph.get_task(READER, task.id).usage
    assert usage is not None
    assert (usage["input_tokens"], usage["total_cost"], usage["cost_status"]) == (
        1_000_000,
        3.0,
        "estimated",
    )
    # A replayed completion adds nothing.
    rig.svc.reports.complete(
        as_lease(second.lease.id), second.lease.id, {"usage": {"input_tokens": 1_000_000}}
    )
    assert rig.svc.graph.get_task(MEMBER, task.id).usage == usage


def test_a_completion_with_malformed_usage_leaves_the_lease_as_it_was(rig: Rig) -> None:
    rig.task()
    won = rig.claim()
    with pytest.raises(ValidationFailed):
        rig.svc.reports.complete(
            as_lease(won.lease.id), won.lease.id, {"usage": {"input_tokens": -5}}
        )
    assert rig.lease(won.lease.id).state is won.lease.state
