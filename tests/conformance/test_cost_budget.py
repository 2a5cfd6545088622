"""The price of a lease cannot rise quietly: the reference workload of `tenure bench cost`
(bench/cost.py), small, on DynamoDB Local, against the cost budget (bench/workload.py BUDGET).

Eight leases for one worker (two rounds of four jobs: every renewal after the first round is a
steady-state one); one of them minted from inbound mail.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from tenure.domain.outbound import ALL, ENDINGS
from tenure_cli.bench import cost, prices
from tenure_cli.bench.rig import Rig
from tenure_cli.bench.workload import BUDGET
from tenure_cli.local.engines import DynamoDBLocal

from tests.conftest import Engines

# Met on the reference run (240 leases, 20 workers: 10.87 write units, $13.70-13.74 a million,
# $8.89-8.93 provisioned, on this machine idle) but not on this small one ($14.94 and $9.88),
# whose shape costs more a lease: one lease in eight is minted from mail (one in ten there:
# the mail's S3 and queue, its job and its timeline row), and half its claims are each slot's
# first, standalone with a claim_id record of its own (a third there).
# It stays strict: the day the small run meets it too, it fails and the mark comes off.
SMALL_RUN_ABOVE = "met on the 240-lease run; this 8-lease run's shape costs more (docs/cost.md)"
# What the small run measures now, priced by AWS's rules (above the targets, for its shape): a
# ratchet, so a change that raises the write units or the read units per lease fails here
# even before the target is reached. Each figure counts what a lease costs later too, once the
# bench's clock has run past the pools' retention: since a lease with no logs and no
# attachments stays out of the `ended` index and is reclaimed by derivation, that is nothing
# for the leases of this run (it was 4 write units and 1 read unit a lease: the `ended` entry
# in and out, the reclaim's mark and its `lease.reclaimed` row), and the ending writes no
# `ended` entry either. (17.12 write units measured: the leases and the tokens' last-use
# notes — one write per token per minute — which weigh about 0.6 a lease only in a run this
# short; 22.75 read units, the heartbeats' leases read eventually consistent and a
# task.completed event reading its task's filed fields off an eventually consistent copy; the
# reactor woken 3.5 times a lease, as the trigger's filter lets records through, and no more
# for a reclaim.)
# Then, each step on its own (before the derived reclaims above, which took 5 write units
# and 1 read unit off each figure):
# With OutboundEvents at its default (endings) the run read 24.0: a task.completed event
# reads its task's filed fields (key, space, pool) off an eventually consistent copy, half a
# unit the 23.5 measured before did not have. A task's first lease filed with its task has no
# by_space entry (the lease list finds it through its task's entry): 21.25 write units, where
# 22.12 were measured with it; the one lease minted from mail keeps its entry. It reads 23.5
# since a report that claims the worker's next lease is judged on the lease row it read to
# resolve whose lease it is, instead of reading that row a second time; 23.0 since a work
# bundle takes its own lease's stamps from the row the claim just wrote instead of reading it
# back.
# Filing writes a task's first lease and then the task, each on its own, instead of both in a
# transaction that billed each twice (a rule's mint keeps its transaction); the claim reads the
# task the claim answer's payload read after it before, so the read units do not move:
# 19.5 write units with both.
# A task linked to nothing (no parent, children or dependents: every task of the workload)
# keeps its success on its lease: the completion no longer writes the task's graph row, whose
# stream record woke the reactor once more and whose reactions read the task and its edges;
# the reactor reads one consistent Query instead. Measured 21.12 write units, 23.12 read
# units, the reactor woken 2.5 times a lease (from 22.12, 24.0 and 3.5) on its own; with the
# steps above, 18.5 write units, 22.12 read units, the reactor woken 2.5 times.
# A warm instance reserves task numbers sixteen at a time on the space row and hands them out
# from memory: a filing no longer writes that row, except once a block. Measured 17.5 write
# units on its own (reads unchanged).
# All of these together: 12.5 write units, 20.75 read units, the reactor woken 2.5 times.
# A completion's stream record reads its task once for all its reactions (the breaker read it
# consistently, then wake-creator again for its filing's fields): 20.25 read units (from
# 20.75), writes and reactor invocations unchanged.
# A claim and a filing read their pool's row alone, fresh, which says whether its space is
# archived and whether the space and the instance have ceilings (the writes that change those
# copy them onto the pool rows before they answer), instead of the pool, space and instance
# rows: 16.5 read units (from 20.25), writes and reactor invocations unchanged.
# The worker heartbeat due when a report claims the next lease rides on that report: the
# renewal's own heartbeat request goes, with its reads: 16.25 read units (from 16.5), 2.875
# heartbeat requests a lease (from 3.0), writes unchanged.
# A worker heartbeat that echoes its last answer's signal reads its worker's signal row and
# only the leases that row cannot vouch for (a lease just claimed, one whose epoch moved, a
# deadline due), not every lease it names: 13.06 read units (from 16.25); 12.12 write units
# (from 12.0: the instance's signal secret, written once, is an eighth of a unit over this
# run's 8 leases).
# A final report that claims the next lease keeps its claim's intent on the lease it ends,
# written with the end, instead of reading and writing a claim_id record of its own: 11.62
# write units (from 12.12), 12.81 read units (from 13.06).
# A rule's firing writes its job (the occasion's lock), its lease and its task one after the
# other instead of in a transaction that billed each twice: the run's one lease minted from
# mail writes 6 units instead of 9, 11.25 write units (from 11.62), reads unchanged.
# Unless every transition is published, the reactor's trigger lets through only the records it
# has work for: a task's filing and a claim or start stamped on its lease no longer wake it,
# so the reactor is woken 1.125 times a lease at endings (and none), from 2.5; 2.5 still with
# all. Writes, reads and log bytes unchanged.
# That report's pick and its claim's first try are one look at the queue and read the
# scheduler row once between them, as every look does: 12.56 read units (from 12.81).
# A final report starts from an eventually consistent copy of its lease when the copy shows it
# held (its write is conditional on that very row; any other copy is read again
# consistently): 12.06 read units (from 12.56).
# That report's pick reads the one queue head it takes while the pool's heads go in order:
# nothing in this run (its queue's page never passes 4 KB), 0.16 a lease in the 96-lease one.
# A claim with a claim_id looks for its record eventually consistent first and takes a copy
# showing none as none (the record's first write lands only if none exists, and a lost one is
# followed on a consistent read): 11.81 read units (from 12.06).
# A Query that finds nothing is billed the least read of its kind (half a unit, a whole one
# when consistent), which DynamoDB Local reports as none: the bench now books it. Nothing the
# service reads changed; the figure did: 14.25 read units (from 11.81), writes unchanged.
# A completion's stream record reads its task's row and whether anything links to it (a
# graph row or a dependent edge) in one consistent Query of the task's partition, instead of
# a read of the row and a Query that most often finds nothing: 13.25 read units (from 14.25).
# A task timeline's newest page (a claim's payload reads one) looks at its first ten rows of
# both kinds with one Query before it reads either kind alone: a new task's timeline, which
# has no row, is one Query that finds nothing instead of two: 12.75 read units (from 13.25).
WRITE_UNITS_NOW = 11.5
READ_UNITS_NOW = 12.75
REACTOR_INVOCATIONS_NOW = 1.25
# CloudWatch Logs bytes ingested a lease (the functions' own lines and EMF documents, and the
# HTTP API's access log): 1,998 while every claim logged a line at INFO, 1,578 since that
# line is at DEBUG (the claim is on the timeline and in the Claims metric); 660 priced as the
# template deploys it: the worker routes on their function URL, which writes no access log
# (1,367 with every route on the HTTP API, each request an access log line); 717 once the
# access log line is the one the template's format writes (the caller's address and
# User-Agent, the authorizer's error), not a shorter one of the bench's own.
LOG_BYTES_NOW = 740


@pytest.fixture(scope="module")
def measured(engines: Engines) -> Iterator[dict[str, Any]]:
    """The template's default OutboundEvents (endings), with the prices of `all` beside it."""
    ddb_local = engines.for_a_test()

    def rig(setting: str) -> Rig:
        table = f"cost-{setting}-{uuid.uuid4().hex[:8]}"
        return Rig(ddb_endpoint=ddb_local.endpoint, table=table, outbound_events=setting)

    yield cost.measure(leases=8, workers=1, settings=(ENDINGS, ALL), rig=rig)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=SMALL_RUN_ABOVE)
def test_lifecycle_write_units_stay_within_the_budget(measured: dict[str, Any]) -> None:
    assert measured["lifecycle_write_units"] <= BUDGET["lifecycle_write_units"]


def test_read_units_per_lease_stay_within_the_budget(measured: dict[str, Any]) -> None:
    assert measured["read_units_per_lease"] <= BUDGET["read_units_per_lease"]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=SMALL_RUN_ABOVE)
def test_usd_per_million_leases_stay_within_the_budget(measured: dict[str, Any]) -> None:
    assert measured["usd_per_million_leases"] <= BUDGET["usd_per_million_leases"]


# Met on the reference run (240 leases: $17.55 a million), but this small run's figure moves
# with the machine's load by more than its margin to the budget: $18.64 idle, $21.27 while the
# stack tiers run beside it (more requests a lease as the workers' timing stretches, Lambda
# durations tripled, the sweeper's reclaim passes slower). So it is not judged strictly here;
# the units, invocations and log bytes it rests on are held by the ratchets below.
EVERY_EVENT_NOISY = (
    "met on the 240-lease run; this 8-lease run's figure moves with the machine's load "
    "across the budget (docs/cost.md)"
)


@pytest.mark.xfail(strict=False, raises=AssertionError, reason=EVERY_EVENT_NOISY)
def test_usd_per_million_leases_with_every_event_stay_within_the_budget(
    measured: dict[str, Any],
) -> None:
    budget = BUDGET["usd_per_million_leases_all_events"]
    assert measured["usd_per_million_leases_all_events"] <= budget


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=SMALL_RUN_ABOVE)
def test_usd_per_million_leases_provisioned_stay_within_the_budget(
    measured: dict[str, Any],
) -> None:
    budget = BUDGET["usd_per_million_leases_provisioned"]
    assert measured["usd_per_million_leases_provisioned"] <= budget


def test_what_a_lease_costs_later_is_counted_in_its_figures(measured: dict[str, Any]) -> None:
    """Every lease of the run reads reclaimed once its pool's retention has passed. None of
    them shipped logs or attachments, so none entered the `ended` index and each is reclaimed
    by derivation: no mark, no `ended` entry in or out, no `lease.reclaimed` row, no reactor
    invocation, no bus entry. What the reclaim passes cost beyond an idle pass is still
    booked to the leases (nothing, now)."""
    later = measured["retention_reclaim"]
    assert later["leases_reclaimed_by_derivation"] == measured["workload"]["leases"]
    assert later["leases_reclaimed"] == 0
    assert later["write_units_per_lease"] == 0.0
    assert later["reactor_invocations_per_lease"] == 0.0
    assert later["eventbridge_events_per_lease"] == 0.0
    assert measured["lifecycle_write_units"] == pytest.approx(
        measured["lifecycle_write_units_bench_window"], abs=0.01
    )
    assert "ended" not in measured["write_units_by_target"]  # the ending writes no entry


def test_by_default_the_bus_gets_a_lease_s_end_and_its_task_s_and_every_transition_with_all(
    measured: dict[str, Any],
) -> None:
    """OutboundEvents endings (the default): lease.completed and task.completed a lease; all:
    lease.created, lease.claimed, lease.started, lease.completed, task.completed (a lease
    with no logs or attachments is reclaimed by derivation: no lease.reclaimed goes on the
    bus for it). Only with all do a filing, a claim and a start wake the reactor (the
    records the other settings need nothing from never reach it); the writes are the same."""
    by = measured["by_outbound_events"]
    assert measured["outbound_events"] == "endings"
    assert by["endings"]["eventbridge_events_per_lease"] == 2.0
    assert by["all"]["eventbridge_events_per_lease"] == 5.0
    assert measured["aws_requests_per_lease"]["eventbridge_put_events"] == 2.0
    woken = {s: by[s]["reactor_invocations_per_lease"] for s in ("endings", "all")}
    assert woken["endings"] < woken["all"], woken
    assert by["all"]["lifecycle_write_units"] == by["endings"]["lifecycle_write_units"]
    assert measured["usd_per_million_leases_all_events"] == by["all"]["usd_per_million_leases"]
    # Four more entries a lease at $1 per million (the totals carry this machine's Lambda
    # durations too, which move more than that in a run this short under load).
    # The workload's own entries (a reclaim by derivation puts none on the bus).
    bus = {s: by[s]["breakdown"]["eventbridge"] for s in ("endings", "all")}
    assert bus == {"endings": pytest.approx(2.0), "all": pytest.approx(5.0)}


def test_the_billing_model_agrees_with_dynamodb_local_on_every_single_item_write(
    measured: dict[str, Any],
) -> None:
    check = measured["billing_model_check"]
    assert check["single_item_writes_agreeing_with_dynamodb_local"] > 20
    assert check["single_item_writes_disagreeing"] == 0
    # Local over-reports transactions (sums and doubled index writes): the AWS price is never
    # higher, and equal in a run with no transaction at all (this one, since filing and the
    # rule's mint write their rows one by one).
    assert measured["lifecycle_write_units"] <= measured["lifecycle_write_units_reported"]


def test_the_function_url_endpoint_costs_less_than_every_route_on_the_http_api(
    measured: dict[str, Any],
) -> None:
    assert measured["usd_per_million_leases"] < measured["usd_per_million_leases_http_api"]
    assert sum(measured["breakdown_http_api"].values()) == pytest.approx(
        measured["usd_per_million_leases_http_api"], abs=1e-3
    )


def test_log_bytes_per_lease_stay_within_the_ratchet(measured: dict[str, Any]) -> None:
    assert measured["aws_requests_per_lease"]["logs_bytes_ingested"] <= LOG_BYTES_NOW


def test_write_units_per_lease_do_not_rise_above_what_they_are_now(
    measured: dict[str, Any],
) -> None:
    assert measured["lifecycle_write_units"] <= WRITE_UNITS_NOW


def test_read_units_per_lease_do_not_rise_above_what_they_are_now(
    measured: dict[str, Any],
) -> None:
    assert measured["read_units_per_lease"] <= READ_UNITS_NOW


def test_a_worker_heartbeat_reads_its_leases_at_half_a_unit_each(measured: dict[str, Any]) -> None:
    """Four held leases, each read eventually consistent (0.5), and no consistent re-read
    while nothing is due; the rest is the pool's row, read again once its 30 s cache has run
    out (the small run measures 2.5 read units a call; with consistent reads it was 4.5)."""
    beat = measured["units_per_request_by_route"]["POST /api/v1/workers/<worker_id>/heartbeat"]
    assert beat["read_units"] <= 4 * 0.5 + 0.75


def test_the_reactor_is_not_woken_more_often_than_it_is_now(measured: dict[str, Any]) -> None:
    """The stream's records reach the reactor through its trigger's filter, as on AWS: worker,
    claim, job and timeline rows never wake it (a filtered record is no invocation), nor, at
    the default setting, a task's filing or a stamped claim or start."""
    assert measured["lambda"]["reactor"]["invocations_per_lease"] <= REACTOR_INVOCATIONS_NOW


def test_http_requests_per_lease_stay_within_the_budget(measured: dict[str, Any]) -> None:
    assert measured["requests_per_lease"] <= BUDGET["requests_per_lease"]


def test_the_workload_is_the_reference_one(measured: dict[str, Any]) -> None:
    routes = measured["requests_by_route"]
    # One worker heartbeat per renewal for all four leases (120 s / 10 s / 4 per lease), less
    # the one that rides on the reports claiming the second round: 23 for 8 leases.
    assert routes["POST /api/v1/workers/<worker_id>/heartbeat"] == 23 / 8
    # Four claims fill the worker; each of the first four reports claims the next lease.
    assert routes["POST /api/v1/pools/<pool>/claim"] == 4 / 8
    assert routes["POST /api/v1/leases/<lease_id>/complete"] == 1.0
    assert "POST /api/v1/leases/<lease_id>/start" not in routes  # a first heartbeat starts
    assert "GET /api/v1/leases/<lease_id>/payload" not in routes  # the claim carried it
    assert routes["POST /api/v1/tasks"] == 7 / 8  # the eighth came by mail
    assert measured["workload"]["emails"] == 1
    assert measured["lambda"]["inbound"]["invocations_per_lease"] == 1 / 8
    assert measured["heartbeat_refusals"] == 0
    assert measured["lifecycle_write_units"] > 0 and measured["read_units_per_lease"] > 0
    assert measured["lost_writes_per_lease"] == 0  # one worker races nobody


def test_the_cost_json_carries_its_keys_and_the_dated_prices(measured: dict[str, Any]) -> None:
    for key in ("usd_per_million_leases", "lifecycle_write_units", "requests_per_lease"):
        assert isinstance(measured[key], float), key
    assert sum(measured["breakdown"].values()) == pytest.approx(
        measured["usd_per_million_leases"], abs=1e-3
    )
    assert {"api_gateway", "lambda_duration", "dynamodb_writes", "sqs", "s3"} <= set(
        measured["breakdown"]
    )
    for name in ("sqs_alone", "step_functions_activities"):
        assert measured["alternatives"][name]["usd_per_million_leases"] > 0
    table = measured["prices"]
    assert table["checked"] == prices.PRICES_CHECKED
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["checked"])
    assert date.fromisoformat(table["checked"]) <= date.today()
    assert table["usd_per_unit"] == prices.PRICES
    assert measured["budget"] == BUDGET
    # Both settings ran, so every figure is measured; the small run is over where it says.
    assert measured["budget_unmeasured"] == []
    over = [name for name, limit in BUDGET.items() if measured[name] > limit]
    assert measured["budget_over"] == over
    assert measured["within_budget"] is (not over)


def test_the_lifecycle_bench_names_every_write_and_what_it_cost(ddb_local: DynamoDBLocal) -> None:
    # `tenure bench lifecycle` lists each step's writes (rows touched, table and index units):
    # the lines must add up to what the step consumed, so the breakdown the README quotes
    # cannot drift from the figure it explains.
    from tenure_cli.bench.command import measure_lifecycle

    steps = measure_lifecycle(ddb_local.endpoint, f"life-{uuid.uuid4().hex[:8]}")["steps"]
    names = ("task_number_block", "create_and_enqueue", "claim", "start", "complete")
    for name in (*names, "claim_with_claim_id"):
        lines = steps[name]["writes"]
        charged = [float(re.search(r": ([\d.]+) \(", line).group(1)) for line in lines]  # type: ignore[union-attr]
        assert sum(charged) == steps[name]["write_units_reported"], (name, lines)
        # Priced by AWS's rules: equal to Local's figure for single-item writes, which Local
        # reports faithfully; a transaction's items twice and its index entries once.
        if not any(line.startswith("transact") for line in lines):
            assert steps[name]["write_units"] == steps[name]["write_units_reported"], name
    # Filing writes the task's first lease, then the task, each on its own (no transaction,
    # which would bill each item twice): AWS bills what DynamoDB Local reports. The task's first
    # lease has no by_space entry: the lease list finds it through its task's entry.
    # A warm instance's filing takes its task number from the block it reserved on the space
    # row: the row is written once a block (its own step), not once a filing.
    filing = steps["create_and_enqueue"]
    assert filing["write_units"] == filing["write_units_reported"] == 4.0, filing["writes"]
    assert not any(line.startswith("update SPACE") for line in filing["writes"])
    assert steps["task_number_block"]["writes"] == ["update SPACE: 1 (table 1)"]
    assert [
        line.split(":")[0] for line in filing["writes"] if "LEASE" in line or "TASK" in line
    ] == ["put LEASE", "put TASK"]
    assert not any(re.search(r"(?<!tasks_)by_space", line) for line in filing["writes"])
    # The SDK's claim (with claim_id) writes its record, then the lease: two single writes,
    # no transaction on the common path.
    with_id = steps["claim_with_claim_id"]["writes"]
    assert [line.split(":")[0] for line in with_id if "CLAIM" in line or "LEASE" in line] == [
        "put CLAIM",
        "put LEASE",
    ]
    for name in ("create_and_enqueue", "claim", "claim_with_claim_id"):
        assert not any(line.startswith("transact") for line in steps[name]["writes"])
    # What the lease costs later, once its pool's retention has passed: nothing. It had no
    # logs and no attachments, so its ending put no entry in `ended` and the sweeper's pass
    # finds nothing to reclaim (the lease reads reclaimed by derivation).
    assert not any("ended" in line for line in steps["complete"]["writes"]), steps["complete"]
    assert steps["reclaim"]["writes"] == [] and steps["reclaim"]["write_units"] == 0.0
