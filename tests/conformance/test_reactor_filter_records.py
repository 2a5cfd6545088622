"""The reactor's stream filter, checked against the records the service's own writes make on
DynamoDB Local: every record the reactor has work for (a timeline row the lease row does not
hold as a stamp, a reaction, a bus entry under the setting) passes the template's filter, at
every OutboundEvents setting, through the graph, autonomy, flow and store contracts' scenarios
(rollups, wake-creator, the breaker, blocks and escalations, event waits, retries,
successors, cancels, sweeps…); and a task's filing and a stamped claim or start never reach
the reactor unless every transition is published."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from tenure.app.tenure import Tenure
from tenure.domain import outbound as out
from tenure.domain.events import derive
from tenure.domain.states import SubjectKind
from tenure.domain.timeline import is_stamped, task_side_events
from tenure.triggers.stream import events_of, outbound_events, rows_of
from tenure_cli.local.engines import DynamoDBLocal
from tenure_cli.local.filters import passes, reactor_patterns
from tenure_cli.local.streams import StreamPump

from tests.conformance.autonomy_contract import AutonomyContract
from tests.conformance.contract import (
    ALPHA,
    SPACE,
    ContractRig,
    MakeRig,
    make_world,
    read_stream,
)
from tests.conformance.flow_contract import FlowContract
from tests.conformance.graph_contract import GraphContract
from tests.conformance.pool_contract import RequestStoreContract
from tests.conformance.task_list_contract import TaskListContract
from tests.conformance.test_autonomy_races import (
    test_a_block_racing_the_holders_completion_ends_the_lease_once as block_racing_completion,
)
from tests.conformance.test_autonomy_races import (
    test_a_wake_is_published_once_under_stream_redelivery as wake_published_once,
)
from tests.conformance.test_derived_reclaims import get  # noqa: F401 (its fixture)
from tests.conformance.test_derived_reclaims import (
    test_a_lease_with_one_log_line_or_attachment_is_reclaimed_as_before as swept_reclaim,
)
from tests.conformance.test_event_wait_races import (
    test_waiters_past_one_request_are_cleared_by_the_reactor_each_once as waiters_cleared,
)
from tests.conformance.test_retry_races import (
    test_a_pool_that_does_not_retry_writes_a_failure_as_one_item_and_a_retrying_one_adds_a_run as retries,  # noqa: E501
)
from tests.conformance.test_rules_races import (
    test_the_same_email_from_8_threads_mints_one_lease_per_matching_rule as mail_mints,
)
from tests.conformance.test_rules_races import (
    test_the_same_scheduled_time_from_8_threads_mints_exactly_one_lease as schedule_mints,
)
from tests.conformance.test_success_link_races import (
    test_a_dependent_of_a_failed_task_waits_for_its_next_run as dependent_waits,
)
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


def work_for(svc: Tenure, record: dict[str, Any], setting: str) -> list[str]:
    """What the reactor does for `record` under `setting`, by the functions it runs: the
    timeline rows it writes, the reactions it sets off, the bus entries it sends (its
    transition metrics count those entries). Empty: nothing."""
    changed = rows_of(record)
    if changed is None:
        return []
    entity, old, new = changed
    events = events_of(entity, old, new)
    side = task_side_events(old, new) if entity == "task" else []
    done = [
        f"row {e.type}" for e in [*events, *side] if not (entity == "lease" and is_stamped(new, e))
    ]
    reacted = derive(entity, old, new)
    done += [f"reaction {type(e).__name__}" for e in reacted]
    # A success with no graph row to tell it is told from the lease: only with a reaction.
    sent = outbound_events(svc, entity, old, new, events, setting, told_by_lease=bool(reacted))
    done += [f"bus {o.detail_type}" for o in sent]
    return done


def check_filter(svc: Tenure, records: list[dict[str, Any]]) -> int:
    """Every record with work for the reactor passes the filter at each setting; returns how
    many had work, so a check that saw nothing is told apart."""
    needed = 0
    for setting in out.SETTINGS:
        patterns = reactor_patterns(outbound_events=setting)
        for record in records:
            work = work_for(svc, record, setting)
            if work:
                needed += 1
                image = record["dynamodb"].get("NewImage")
                assert passes(patterns, record), f"{setting}: filtered out {work} for {image}"
    return needed


@pytest.fixture
def make_rig(rig: Rig, ddb_local: DynamoDBLocal) -> Iterator[MakeRig]:
    """The contracts' rig, its stream checked against the filter before each delivery and
    once more at the end (records after the last delivery included)."""
    ddb = boto3.client("dynamodb", endpoint_url=ddb_local.endpoint, region_name="us-east-1")
    streams = boto3.client(
        "dynamodbstreams", endpoint_url=ddb_local.endpoint, region_name="us-east-1"
    )
    checked: set[str] = set()

    def records() -> list[dict[str, Any]]:
        return read_stream(ddb, streams, rig.store.table)

    def check() -> None:
        fresh = [r for r in records() if r["dynamodb"]["SequenceNumber"] not in checked]
        check_filter(rig.svc, fresh)
        checked.update(r["dynamodb"]["SequenceNumber"] for r in fresh)

    def drain() -> int:
        check()
        return rig.pump.drain()

    def make() -> ContractRig:
        return ContractRig(rig.store, rig.clock, rig.svc, drain, records)

    yield make
    check()


class TestGraphRecordsPassTheFilter(GraphContract):
    # Its records are the graph's edges and counters, which the smaller graph tests here
    # already pass through the filter; its point is the table's transaction limit, proven
    # on DynamoDB Local beside them.
    test_as_many_open_blockers_as_a_task_may_have_fit_its_filing_and_a_patch = None


class TestAutonomyRecordsPassTheFilter(AutonomyContract):
    pass


class TestFlowRecordsPassTheFilter(FlowContract):
    pass


class TestRequestRecordsPassTheFilter(RequestStoreContract):
    pass


class TestTaskListRecordsPassTheFilter(TaskListContract):
    pass


def _delivered(rig: Rig, setting: str) -> tuple[StreamPump, list[dict[str, Any]]]:
    """A pump with the template's filter for `setting` that keeps what it hands the reactor."""
    pump = StreamPump(None, rig.store.table, rig.store, patterns=reactor_patterns(None, setting))
    pump.ddb, pump.streams = rig.pump.ddb, rig.pump.streams
    handed: list[dict[str, Any]] = []
    deliver: Callable[[list[dict[str, Any]]], None] = pump._deliver

    def keep(batch: list[dict[str, Any]]) -> None:
        handed.extend(batch)
        deliver(batch)

    pump._deliver = keep  # type: ignore[method-assign]
    return pump, handed


def _kinds(records: list[dict[str, Any]]) -> list[str]:
    found = []
    for record in records:
        image = record["dynamodb"].get("NewImage", {})
        entity = image.get("entity", {}).get("S") or image.get("SK", {}).get("S")
        found.append(f"{entity} {image.get('event_type', {}).get('S')}")
    return found


@pytest.mark.parametrize("setting", out.SETTINGS)
def test_a_plain_task_s_filing_claim_and_start_reach_the_reactor_only_under_all(
    rig: Rig, setting: str
) -> None:
    make_world(rig.svc)
    pump, handed = _delivered(rig, setting)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, claim_id="c-1")
    assert won is not None
    rig.clock.advance(1)
    rig.svc.reports.start(lease_principal(lease.id), lease.id)
    pump.drain()
    lease_records = [
        r for r in handed if r["dynamodb"]["NewImage"].get("entity", {}).get("S") == "lease"
    ]
    task_records = [
        r for r in handed if r["dynamodb"]["NewImage"].get("entity", {}).get("S") == "task"
    ]
    if setting == out.ALL:
        assert _kinds(lease_records) == [
            "lease lease.created",
            "lease lease.claimed",
            "lease lease.started",
        ]
        assert _kinds(task_records) == ["task None"], "every lease and task row, as before"
    else:
        assert handed == [], f"{setting}: {_kinds(handed)} reached the reactor"
    rig.clock.advance(1)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, {"result": {"n": 1}})
    pump.drain()
    lease_records = [
        r for r in handed if r["dynamodb"]["NewImage"].get("entity", {}).get("S") == "lease"
    ]
    ended = [r for r in lease_records if r["dynamodb"]["NewImage"]["state"]["S"] == "completed"]
    assert _kinds(ended) == ["lease lease.completed"], "the end reaches it at every setting"
    # Nothing was lost on the way: the timeline reads back every event, the task succeeded.
    types = [e.type for e in rig.store.timeline("task", task.id, None)]
    assert types == ["lease.created", "lease.claimed", "lease.started", "lease.completed"]
    assert check_filter(rig.svc, read_stream(pump.ddb, pump.streams, rig.store.table)) > 0


def _claimed(rig: Rig, worker: str = "w-1") -> str:
    won = rig.svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None)
    assert won is not None
    rig.clock.advance(1)
    return won.lease.id


def test_the_records_of_every_lease_ending_and_hand_on_pass_the_filter(rig: Rig) -> None:
    """Pauses and resumes, releases and their successors, failures, cancels, kills, expiries
    swept as lost and force-failed leases, each lifecycle's records checked as written."""
    make_world(rig.svc)
    for _ in range(6):
        rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
        rig.clock.advance(1)
    paused = _claimed(rig)
    rig.svc.reports.start(lease_principal(paused), paused)
    rig.svc.operator.pause(ADMIN, paused)
    rig.svc.operator.resume(ADMIN, paused)
    rig.svc.reports.complete(lease_principal(paused), paused, {"result": {}})
    released = _claimed(rig)
    rig.svc.reports.release(lease_principal(released), released, {})
    failed = _claimed(rig)  # the successor of the released one comes first in line
    rig.svc.reports.fail(lease_principal(failed), failed, {"error": "boom"})
    killed = _claimed(rig)
    rig.svc.operator.kill(ADMIN, killed)
    rig.svc.reports.complete(lease_principal(killed), killed, {"result": {}})
    cancelled = _claimed(rig)
    rig.svc.operator.cancel(ADMIN, cancelled)
    rig.svc.reports.fail(lease_principal(cancelled), cancelled, {"error": "stopped"})
    forced = _claimed(rig)
    rig.svc.force.bulk_fail(ADMIN, [forced], "stuck")
    silent = _claimed(rig)
    rig.clock.advance(3_600_000)
    rig.svc.sweep.once()
    rig.clock.advance(3_600_000)
    rig.svc.sweep.once()
    rig.pump.drain()
    records = read_stream(rig.pump.ddb, rig.pump.streams, rig.store.table)
    assert check_filter(rig.svc, records) >= 3 * 10
    states = {x: rig.store.get_lease(x) for x in (released, killed, cancelled, forced, silent)}
    assert all(lease is not None and lease.state.terminal for lease in states.values()), states


class CheckingPump(StreamPump):
    """The rig's pump, checking every record on the stream against the filter (those it
    drops included) before each delivery."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(None, rig.store.table, rig.store)
        self.ddb, self.streams, self.svc = rig.pump.ddb, rig.pump.streams, rig.svc
        self.checked: set[str] = set()
        self.needed = 0

    def pump_once(self) -> int:
        records = read_stream(self.ddb, self.streams, self.table)
        fresh = [r for r in records if r["dynamodb"]["SequenceNumber"] not in self.checked]
        self.needed += check_filter(self.svc, fresh)
        self.checked.update(r["dynamodb"]["SequenceNumber"] for r in fresh)
        return super().pump_once()


@pytest.fixture
def checked(rig: Rig) -> Iterator[Rig]:
    """The rig, its stream checked against the filter whenever it is pumped, and at the end."""
    pump = CheckingPump(rig)
    yield dataclasses.replace(rig, pump=pump)
    pump.pump_once()
    assert pump.needed > 0, "no record had work for the reactor: the check saw nothing"


# Scenarios of the race suites whose records the contracts above do not write: rule-minted
# leases (mail and schedules), wake-creator under redelivery, a block racing a completion,
# event waits cleared by the reactor, retries, a dependent of a failed task, and the
# sweeper's reclaim of a lease with a log or an attachment.
def test_the_records_of_mail_mints_pass_the_filter(checked: Rig) -> None:
    mail_mints(checked)


def test_the_records_of_scheduled_mints_pass_the_filter(checked: Rig) -> None:
    schedule_mints(checked)


def test_the_records_of_wakes_and_blocks_pass_the_filter(checked: Rig) -> None:
    wake_published_once(checked)


def test_the_records_of_a_block_racing_a_completion_pass_the_filter(checked: Rig) -> None:
    block_racing_completion(checked)


def test_the_records_of_event_waits_pass_the_filter(checked: Rig, monkeypatch: Any) -> None:
    waiters_cleared(checked, monkeypatch)


def test_the_records_of_retries_pass_the_filter(checked: Rig) -> None:
    retries(checked)


def test_the_records_of_a_dependent_of_a_failed_task_pass_the_filter(checked: Rig) -> None:
    dependent_waits(checked)


@pytest.mark.parametrize("detail", ["log", "attachment"])
def test_the_records_of_a_sweeper_s_reclaim_pass_the_filter(
    checked: Rig, request: pytest.FixtureRequest, detail: str
) -> None:
    swept_reclaim(checked, request.getfixturevalue("get"), detail)


class _NoSchedules:
    """EventBridge Scheduler is not under test here: every schedule change is accepted."""

    def put(self, name: str, expression: str, timezone: str, rule_id: str, enabled: bool) -> None:
        return None

    def delete(self, name: str) -> None:
        return None


def test_a_space_s_lease_claimed_and_started_reaches_the_reactor_at_every_setting(
    checked: Rig,
) -> None:
    """A lease whose subject is its space (a rule's mint) keeps every event a row of its own
    (its leases may overlap, so nothing is stamped): its claim and start must reach the
    reactor, whose timeline rows they are."""
    rig = checked
    make_world(rig.svc)
    rig.svc.rules.schedules = _NoSchedules()
    rule = rig.svc.rules.create_rule(
        ADMIN, SPACE, "sweep", ALPHA, {"kind": "space"}, {"schedule": "rate(1 day)"}
    )
    minted = rig.svc.firings.fire_scheduled(rule.id, datetime.now(UTC).replace(microsecond=0))
    assert minted is not None and minted.tl is None, "a space's lease holds no stamps"
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.id == minted.id
    rig.clock.advance(1)
    rig.svc.reports.start(lease_principal(minted.id), minted.id)
    rig.clock.advance(1)
    rig.svc.reports.complete(lease_principal(minted.id), minted.id, {"result": {}})
    records = read_stream(rig.pump.ddb, rig.pump.streams, rig.store.table)
    mine = [
        r for r in records if r["dynamodb"].get("NewImage", {}).get("id", {}).get("S") == minted.id
    ]
    for setting in out.SETTINGS:
        patterns = reactor_patterns(outbound_events=setting)
        through = [_kinds([r])[0] for r in mine if passes(patterns, r)]
        assert "lease lease.claimed" in through and "lease lease.started" in through, through
    rig.pump.drain()
    types = [e.type for e in rig.store.timeline(SubjectKind.SPACE, SPACE, None)]
    assert {"lease.claimed", "lease.started", "lease.completed"} <= set(types), types
