"""Tenure's use cases, composed: each takes the kernel and the use cases it needs as
constructor arguments, and every extension point is a named, ordered tuple built here.

The order of each tuple is the behaviour: a task's blocked reasons list the graph's own, then
a pending approval, then its typed blocks; a claim skips a lease held by pause, parking or a
subtree cancel still walking down, then by a pending approval, then by an open block; filing
asks for approval before it links the task into the graph (so a waiting task is never enqueued
at once); a
final report runs the completion claim gate before its write, resolves usage before the
lease row is built, adds the classifier's output, the usage totals and (on a pool that
retries failures) the next run to the one commit, then scans the result; a changed lease row
counts the task's success (graph), resets the breaker, wakes the creator, then stops a stopped
creator's children; a changed graph row rolls up first, then wakes a parent's creator, then
goes on with a stop's or a subtree cancel's next page; auto-enqueue skips a cancelled task
first. The claim's and the final report's tuples are built with the worker's use cases
(app/worker_tenure.py), which this composition starts from."""

from __future__ import annotations

from collections import Counter

from tenure.app.artifacts.artifacts import Artifacts
from tenure.app.artifacts.attachments import Attachments
from tenure.app.artifacts.logs import Logs
from tenure.app.artifacts.retention import Retention
from tenure.app.autonomy.blocks import Blocks
from tenure.app.autonomy.breaker import Breaker
from tenure.app.autonomy.delegation import Delegation
from tenure.app.autonomy.wake import Wake
from tenure.app.conditions import Conditions
from tenure.app.dispatch_controls import ClaimGate, Scheduler
from tenure.app.figures import Figures
from tenure.app.flow.events import EventWaits
from tenure.app.inspect import Inspection
from tenure.app.kernel import Kernel
from tenure.app.leases.bound import Bound
from tenure.app.leases.claims import Claims
from tenure.app.leases.force import Force
from tenure.app.leases.handover import Handover
from tenure.app.leases.operator import Operator
from tenure.app.leases.payload import Payloads
from tenure.app.leases.queue_timeouts import QueueTimeouts
from tenure.app.leases.recovery import Recovery
from tenure.app.leases.reports import Reports
from tenure.app.leases.run_timeouts import RunTimeouts
from tenure.app.ports import BlobStore, Clock, EventPublisher, Ids, LogSink
from tenure.app.reactions import Reactions, on
from tenure.app.rows import Rows
from tenure.app.rules.addresses import Addresses
from tenure.app.rules.firings import Firings
from tenure.app.rules.job_first import JobFirst
from tenure.app.rules.ports import Schedules
from tenure.app.rules.rules import Rules
from tenure.app.rules.subjects import Subjects
from tenure.app.runs import Runs
from tenure.app.scopes import Scopes
from tenure.app.setup.instance import InstanceSettings
from tenure.app.setup.pools import Pools
from tenure.app.setup.spaces import Spaces
from tenure.app.setup.tokens import Tokens
from tenure.app.setup.versions import Versions
from tenure.app.sweep import Sweep
from tenure.app.tasks.approval import Approval
from tenure.app.tasks.cancel import Cancellation
from tenure.app.tasks.classifier import Classifier
from tenure.app.tasks.filing import Filing
from tenure.app.tasks.graph import Graph
from tenure.app.tasks.idempotency import Idempotency
from tenure.app.tasks.keys import TaskKeys
from tenure.app.tasks.listing import TaskListing
from tenure.app.usage import Usage
from tenure.app.worker_tenure import WorkerTenure, compose_worker
from tenure.app.workers import Workers
from tenure.domain.events import (
    GraphMoved,
    LeaseEnded,
    SuccessReported,
    TaskMoved,
    TaskSucceeded,
)
from tenure.records import record


@record
class Tenure:
    """The one object handlers, the sweeper and the reactor call: its use cases by name."""

    kernel: Kernel
    # The worker's use cases, as the worker function has them alone (app/worker_tenure.py):
    # the same objects as the fields of the same names below.
    core: WorkerTenure
    rows: Rows  # the store's ports it was composed on (the reactor writes its timeline rows)
    # What the API reports as metrics after each request (claims, lost races, ...): the
    # kernel's own counter, held here as data so that reading it enters no code.
    counters: Counter[str]
    spaces: Spaces
    tokens: Tokens
    instance: InstanceSettings
    versions: Versions
    pools: Pools
    workers: Workers
    conditions: Conditions
    gate: ClaimGate
    claims: Claims
    bound: Bound
    reports: Reports
    handover: Handover
    operator: Operator
    recovery: Recovery
    payloads: Payloads
    runs: Runs
    graph: Graph
    approval: Approval
    cancellation: Cancellation
    filing: Filing
    idempotency: Idempotency
    listing: TaskListing
    scheduler: Scheduler
    inspection: Inspection
    blocks: Blocks
    event_waits: EventWaits
    breaker: Breaker
    delegation: Delegation
    wake: Wake
    usage: Usage
    classifier: Classifier
    force: Force
    rules: Rules
    firings: Firings
    addresses: Addresses
    subjects: Subjects
    artifacts: Artifacts
    logs: Logs
    attachments: Attachments
    retention: Retention
    scopes: Scopes
    task_keys: TaskKeys
    reactions: Reactions
    queue_timeouts: QueueTimeouts
    run_timeouts: RunTimeouts
    sweep: Sweep
    figures: Figures

    @property
    def clock(self) -> Clock:
        return self.kernel.clock

    @property
    def ids(self) -> Ids:
        return self.kernel.ids


def compose(
    rows: Rows,
    clock: Clock,
    ids: Ids,
    blobs: BlobStore | None = None,
    log_sink: LogSink | None = None,
    schedules: Schedules | None = None,
    publisher: EventPublisher | None = None,
) -> Tenure:
    """Build every use case on the table's ports, one clock and one id source; the adapters a
    deployment lacks (attachments, logs, schedules, the event bus) are None, and their routes
    say so."""
    # The worker's use cases first, built as the worker function builds them.
    core = compose_worker(rows, clock, ids, blobs, log_sink)
    kernel, runs, graph, reports = core.kernel, core.runs, core.graph, core.reports
    delegation, cancellation, gate = core.delegation, core.cancellation, core.gate
    blocks = Blocks(
        kernel,
        runs,
        graph,
        reports,
        committer=rows.committer,
        graph_rows=rows.graph,
        leases=rows.leases,
        sweeper=rows.sweeper,
        tasks=rows.tasks,
    )
    event_waits = EventWaits(kernel, blocks, event_waits=rows.event_waits, tasks=rows.tasks)
    breaker = Breaker(
        kernel, graph, blocks, committer=rows.committer, sweeper=rows.sweeper, tasks=rows.tasks
    )
    wake = Wake(
        kernel,
        publisher,
        graph=rows.graph,
        leases=rows.leases,
        tasks=rows.tasks,
        timeline=rows.timeline,
    )
    rules = Rules(kernel, rows.rules, schedules, spaces=rows.spaces)
    scheduler = Scheduler(
        kernel,
        gate,
        leases=rows.leases,
        pools=rows.pools,
        queues=rows.queues,
        sweeper=rows.sweeper,
        tasks=rows.tasks,
        timeline=rows.timeline,
        workers=rows.workers,
    )
    operator = Operator(kernel, leases=rows.leases)
    approval = Approval(kernel, graph, operator)
    pools = Pools(
        kernel,
        core.versions,
        leases=rows.leases,
        pools=rows.pools,
        queues=rows.queues,
        timeline=rows.timeline,
    )
    recovery = Recovery(kernel)
    retention = Retention(
        kernel,
        core.artifacts,
        attachments=rows.attachments,
        leases=rows.leases,
        pools=rows.pools,
        retention=rows.retention,
    )
    queue_timeouts = QueueTimeouts(
        kernel,
        core.orphans,
        leases=rows.leases,
        pools=rows.pools,
        queues=rows.queues,
        tasks=rows.tasks,
    )
    run_timeouts = RunTimeouts(kernel)
    sweep = Sweep(
        sweeper=rows.sweeper,
        pools=rows.pools,
        leases=rows.leases,
        queues=rows.queues,
        workers=rows.workers,
        timeline=rows.timeline,
        clock=clock,
        ids=ids,
        queue_timeouts=queue_timeouts,
        run_timeouts=run_timeouts,
        recovery=recovery,
        scheduler=scheduler,
        breaker=breaker,
        delegation=delegation,
        retention=retention,
    )
    return Tenure(
        kernel=kernel,
        core=core,
        rows=rows,
        counters=kernel.counters,
        spaces=Spaces(
            catalog=kernel.catalog,
            clock=clock,
            ids=ids,
            pools=rows.pools,
            schema=rows.schema,
            spaces=rows.spaces,
            timeline=rows.timeline,
        ),
        tokens=core.tokens,
        instance=InstanceSettings(
            pools,
            catalog=kernel.catalog,
            clock=clock,
            pools=rows.pools,
            queues=rows.queues,
            timeline=rows.timeline,
        ),
        versions=core.versions,
        pools=pools,
        workers=core.workers,
        conditions=core.conditions,
        gate=gate,
        claims=core.claims,
        bound=core.bound,
        reports=reports,
        handover=core.handover,
        operator=operator,
        recovery=recovery,
        payloads=core.payloads,
        runs=runs,
        graph=graph,
        approval=approval,
        cancellation=cancellation,
        filing=Filing(
            kernel,
            runs,
            filers=(delegation.lease_files,),
            links=(approval.ask, graph.link, delegation.mark_creator),
            bounds=(delegation.bounds,),
            graph=rows.graph,
            spaces=rows.spaces,
            tasks=rows.tasks,
            timeline=rows.timeline,
        ),
        idempotency=Idempotency(kernel, requests=rows.requests),
        listing=TaskListing(
            kernel, graph, graph_rows=rows.graph, sweeper=rows.sweeper, tasks=rows.tasks
        ),
        scheduler=scheduler,
        inspection=Inspection(
            kernel,
            core.conditions,
            graph,
            leases=rows.leases,
            sweeper=rows.sweeper,
            tasks=rows.tasks,
            timeline=rows.timeline,
            workers=rows.workers,
        ),
        blocks=blocks,
        event_waits=event_waits,
        breaker=breaker,
        delegation=delegation,
        wake=wake,
        usage=core.usage,
        classifier=core.classifier,
        force=Force(kernel, runs, leases=rows.leases, pools=rows.pools),
        rules=rules,
        firings=Firings(
            kernel,
            rules,
            operator,
            JobFirst(kernel),
            leases=rows.leases,
            tasks=rows.tasks,
            timeline=rows.timeline,
        ),
        addresses=Addresses(kernel, rules=rows.rules),
        subjects=Subjects(kernel, spaces=rows.spaces, timeline=rows.timeline),
        artifacts=core.artifacts,
        logs=core.logs,
        attachments=core.attachments,
        retention=retention,
        scopes=core.scopes,
        task_keys=core.task_keys,
        queue_timeouts=queue_timeouts,
        run_timeouts=run_timeouts,
        sweep=sweep,
        figures=Figures(
            pools,
            queues=rows.queues,
            leases=rows.leases,
            sweeper=rows.sweeper,
            retention=rows.retention,
            clock=clock,
        ),
        reactions=Reactions.of(
            rows.tasks,
            rows.graph,
            on(TaskSucceeded, graph.after_lease),
            on(SuccessReported, breaker.reset_breaker),
            on(LeaseEnded, wake.on_lease, delegation.stop_children),
            on(
                GraphMoved,
                graph.after_graph,
                wake.on_graph,
                delegation.continue_stop,
                cancellation.continue_walk,
            ),
            on(TaskMoved, wake.on_task, event_waits.on_task),
        ),
    )
