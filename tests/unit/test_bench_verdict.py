"""The cost bench's verdict on its budget: within only when every figure was measured and none
is over; an over figure is named; a figure not measured (the every-event price, when `all`
was not among the settings run) is never counted as within."""

from __future__ import annotations

from typing import Any

import pytest
from tenure_cli.bench.cost_report import judged, verdict
from tenure_cli.bench.workload import BUDGET


def _at_limit() -> dict[str, Any]:
    return dict(BUDGET)  # every figure exactly at its limit: within


def test_every_figure_at_its_limit_is_within() -> None:
    result = judged(_at_limit())
    assert result["within_budget"] is True
    assert (result["budget_over"], result["budget_unmeasured"]) == ([], [])
    assert verdict(result) == "within"


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_any_one_figure_over_is_named(name: str) -> None:
    result = judged({**_at_limit(), name: BUDGET[name] + 0.01})
    assert result["within_budget"] is False
    assert result["budget_over"] == [name]
    assert verdict(result) == f"OVER: {name}"


def test_the_every_event_price_not_run_is_unmeasured_not_within() -> None:
    result = judged({**_at_limit(), "usd_per_million_leases_all_events": None})
    assert result["within_budget"] is False
    assert result["budget_unmeasured"] == ["usd_per_million_leases_all_events"]
    assert verdict(result).startswith("within for what was measured; not measured: usd_")


def test_over_outranks_unmeasured() -> None:
    result = judged(
        {**_at_limit(), "usd_per_million_leases": 14.5, "usd_per_million_leases_all_events": None}
    )
    assert result["within_budget"] is False
    assert verdict(result) == "OVER: usd_per_million_leases"


def test_a_second_judgement_replaces_the_first() -> None:
    """`measure` judges the report's run again once the `all` run's price is in."""
    first = judged({**_at_limit(), "usd_per_million_leases_all_events": None})
    first["usd_per_million_leases_all_events"] = 17.0
    again = judged(first)
    assert again["within_budget"] is True and again["budget_unmeasured"] == []
