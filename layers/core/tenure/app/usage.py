"""Usage and cost: what a completion reports, the cost estimated from the pool's
per-million-token rates, and the task's sum over its leases.

The sum is an accumulator on the task's graph row, moved by one unconditional ADD inside the
completion's own transaction (an `AddUsage` graph op): the completion lands once (its write is
conditional on the lease's state), so the sum counts each lease once, and a read of the task
is one item, however many leases it had — a task's leases are not bounded (every release and
expiry mints one), so summing them at read time would be an unbounded read. Whether the costs
agree is kept as the set of distinct `currency|status|source` keys seen: one key → the sum
stands; more → `cost_status: unknown`, `total_cost: null`. Amounts are summed in integer
millionths of the currency unit, so the sum is exact whatever the order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.ports import AddUsage, Change
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease, TaskGraph
from tenure.domain.states import ReportKind
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.reports import Ending

# The final reports that may say what the work used: a failed run spent tokens too.
USAGE_REPORTS = frozenset({ReportKind.COMPLETE, ReportKind.FAIL})
BUCKETS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
STATUSES = ("actual", "estimated", "included", "unknown")
# Statuses whose cost carries an amount; `included` and `unknown` never do.
PRICED = ("actual", "estimated")
MICROS = 1_000_000
MAX_TOKENS = 10**15
MAX_AMOUNT = 10**9
ESTIMATE_SOURCE = "pool_rates"


def check_rates(rates: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pool's `rates`: `{currency, <bucket>: price per million tokens, …}`."""
    if rates is None:
        return None
    unknown = set(rates) - {"currency", *BUCKETS}
    if unknown:
        raise ValidationFailed(f"rates: unknown field {sorted(unknown)[0]!r}")
    currency = rates.get("currency")
    if not isinstance(currency, str) or not 1 <= len(currency) <= 16:
        raise ValidationFailed("rates.currency: a currency code (e.g. USD) is required")
    for bucket in BUCKETS:
        value = rates.get(bucket)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= MAX_AMOUNT
        ):
            raise ValidationFailed(f"rates.{bucket}: a price per million tokens, 0 or more")
    return dict(rates)


def stored_usage(usage: dict[str, Any], rates: dict[str, Any] | None) -> dict[str, Any]:
    """The usage as stored on the lease: every bucket (0 when absent) and its cost — the one
    reported, else estimated from `rates` when each non-zero bucket has a rate, else unknown
    (never a partial estimate, never a fallback rate)."""
    unknown = set(usage) - {*BUCKETS, "cost"}
    if unknown:
        raise ValidationFailed(f"usage: unknown field {sorted(unknown)[0]!r}")
    out: dict[str, Any] = {}
    for bucket in BUCKETS:
        value = usage.get(bucket, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
            raise ValidationFailed(f"usage.{bucket}: a whole number of tokens, 0 or more")
        out[bucket] = value
    reported = usage.get("cost")
    out["cost"] = _reported(reported) if reported is not None else _estimate(out, rates)
    return out


def _reported(cost: Any) -> dict[str, Any]:
    if not isinstance(cost, dict):
        raise ValidationFailed("usage.cost: an object {amount, currency, status, source}")
    unknown = set(cost) - {"amount", "currency", "status", "source"}
    if unknown:
        raise ValidationFailed(f"usage.cost: unknown field {sorted(unknown)[0]!r}")
    status = cost.get("status")
    if status not in STATUSES:
        raise ValidationFailed(f"usage.cost.status: one of {', '.join(STATUSES)}")
    source = cost.get("source")
    if not isinstance(source, str) or not 1 <= len(source) <= 100:
        raise ValidationFailed("usage.cost.source: who priced it (e.g. provider_invoice)")
    currency = cost.get("currency")
    if currency is not None and (not isinstance(currency, str) or not 1 <= len(currency) <= 16):
        raise ValidationFailed("usage.cost.currency: a currency code")
    amount = cost.get("amount")
    if status in PRICED:
        if (
            isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not 0 <= amount <= MAX_AMOUNT
        ):
            raise ValidationFailed(f"usage.cost.amount: a {status} cost needs an amount, 0 or more")
        if currency is None:
            raise ValidationFailed(f"usage.cost.currency: a {status} cost needs a currency")
        return {"amount": amount, "currency": currency, "status": status, "source": source}
    if amount is not None:
        raise ValidationFailed(f"usage.cost.amount: an {status} cost carries no amount")
    return {"amount": None, "currency": currency, "status": status, "source": source}


def _estimate(tokens: dict[str, Any], rates: dict[str, Any] | None) -> dict[str, Any]:
    used = [b for b in BUCKETS if tokens[b]]
    currency = rates.get("currency") if rates else None
    if not rates or any(rates.get(b) is None for b in used):
        return {
            "amount": None,
            "currency": currency,
            "status": "unknown",
            "source": ESTIMATE_SOURCE,
        }
    micros = sum(round(tokens[b] * float(rates[b])) for b in used)  # per million tokens
    return {
        "amount": micros / MICROS,
        "currency": currency,
        "status": "estimated",
        "source": ESTIMATE_SOURCE,
    }


def cost_key(cost: dict[str, Any]) -> str:
    """What two leases must share for their costs to add up."""
    return "|".join(str(cost.get(x) or "") for x in ("currency", "status", "source"))


def counts_of(resolved: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """The accumulator's deltas for one lease (the graph row's `usage_*` counters)."""
    cost = resolved["cost"]
    amount = cost.get("amount")
    micros = round(float(amount) * MICROS) if amount is not None else 0
    return (
        ("usage_leases", 1),
        *((f"usage_{b}", int(resolved[b])) for b in BUCKETS),
        ("usage_cost_micros", micros),
    )


@record
class Totals:
    """A task's accumulator as read from its graph row."""

    leases: int = 0
    tokens: tuple[int, ...] = (0, 0, 0, 0, 0)
    cost_micros: int = 0
    cost_keys: tuple[str, ...] = ()


def totals_of(graph: TaskGraph) -> Totals:
    return Totals(
        leases=graph.usage_leases,
        tokens=tuple(int(getattr(graph, f"usage_{b}")) for b in BUCKETS),
        cost_micros=int(graph.usage_cost_micros),
        cost_keys=graph.usage_cost_keys,
    )


def summed(totals: Totals) -> dict[str, Any] | None:
    """`GET /tasks/{id}`'s `usage`: token totals always; the cost only when every
    contributing lease agrees on currency, status and source; `included` and `unknown`
    never carry an amount."""
    if totals.leases == 0:
        return None
    out: dict[str, Any] = dict(zip(BUCKETS, totals.tokens, strict=True))
    out["lease_count"] = totals.leases
    keys = set(totals.cost_keys)
    if len(keys) != 1:
        out.update(total_cost=None, cost_currency=None, cost_status="unknown", cost_source=None)
        return out
    currency, status, source = next(iter(keys)).split("|", 2)
    out.update(
        total_cost=totals.cost_micros / MICROS if status in PRICED else None,
        cost_currency=currency or None,
        cost_status=status,
        cost_source=source or None,
    )
    return out


class Usage:
    """A completion's usage as two report stages: `resolve` fills in the cost (estimated from
    the pool's rates when none was reported) before the report is stored, and `contribute`
    adds it to the task's accumulator in the same commit."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def resolve(self, lease: Lease, kind: ReportKind, report: dict[str, Any]) -> dict[str, Any]:
        reported = report.get("usage") if kind in USAGE_REPORTS else None
        if reported is None:
            return report
        if not isinstance(reported, dict):
            raise ValidationFailed("usage: an object")
        return {**report, "usage": stored_usage(reported, self.kernel.pool(lease.pool).rates)}

    def contribute(self, ending: Ending) -> Ending:
        """A Completion `contribute` stage: the report's usage added to its task's totals."""
        task_id = ending.before.task_id
        resolved = ending.report.get("usage") if ending.kind in USAGE_REPORTS else None
        if resolved is None or task_id is None:
            return ending
        op = AddUsage(task_id, cost_key=cost_key(resolved["cost"]), counts=counts_of(resolved))
        return ending.with_rows(Change(graph=[op]))


def lease_usage(lease: Lease) -> dict[str, Any] | None:
    """`GET /leases/{id}`'s `usage`: what its completion (or failure) reported, with the
    resolved cost."""
    report = lease.report or {}
    found = report.get("usage") if lease.report_kind in USAGE_REPORTS else None
    return found if isinstance(found, dict) else None
