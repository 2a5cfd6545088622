"""The use cases a worker calls, composed on their own: claims, starts, heartbeats and
reports, a final report's next claim, the payload, a lease's logs and attachments, and the
token check in front of them. The worker function (api/worker.py) is built on this alone, so
that it never imports what only operators, rules, the scheduler, the sweeper or the reactor
use; the whole service (app/tenure.py) starts from this same composition and adds the rest,
so a claim or a report is built the same way whichever function serves it.

The order of each tuple is the behaviour: a claim skips a lease held by a pending approval,
then by an open block, and withdraws a claim under a subtree cancel that committed before its
write; a final report runs the completion claim gate before its write, resolves usage before
the lease row is built, adds the classifier's output, the usage totals and (on a pool that
retries failures) the next run to the one commit, then scans the result."""

from __future__ import annotations

from collections import Counter

from tenure.app.artifacts.artifacts import Artifacts
from tenure.app.artifacts.attachments import Attachments
from tenure.app.artifacts.logs import Logs
from tenure.app.autonomy.blocks import block_reasons, has_open_block, held_by_block
from tenure.app.autonomy.delegation import Delegation
from tenure.app.conditions import Conditions
from tenure.app.dispatch_controls import ClaimGate
from tenure.app.flow.inputs import Inputs
from tenure.app.kernel import Kernel
from tenure.app.leases.bound import Bound
from tenure.app.leases.claims import Claims, Waits
from tenure.app.leases.claims.waits import SHARED_WAITING_CLAIMS
from tenure.app.leases.handover import Handover
from tenure.app.leases.orphans import Orphans
from tenure.app.leases.payload import Payloads
from tenure.app.leases.reports import Applies, Completion, Reports, Stage
from tenure.app.leases.retry import Retries
from tenure.app.leases.signals import WorkerSignals
from tenure.app.ports import BlobStore, Clock, Ids, LogSink
from tenure.app.rows import Rows
from tenure.app.runs import Runs
from tenure.app.scopes import Scopes
from tenure.app.setup.tokens import Tokens
from tenure.app.setup.versions import Versions
from tenure.app.tasks.approval import approval_reasons, awaits_approval, held_for_approval
from tenure.app.tasks.cancel import Cancellation, is_cancelled
from tenure.app.tasks.classifier import Classifier
from tenure.app.tasks.graph import Graph
from tenure.app.tasks.keys import TaskKeys
from tenure.app.usage import Usage
from tenure.app.workers import Workers
from tenure.records import record


@record
class WorkerTenure:
    """What the worker routes call, and the parts the whole service builds on."""

    kernel: Kernel
    rows: Rows
    counters: Counter[str]  # the kernel's own counter (the API's metrics per request)
    tokens: Tokens
    versions: Versions
    workers: Workers
    conditions: Conditions
    gate: ClaimGate
    claims: Claims
    bound: Bound
    reports: Reports
    handover: Handover
    payloads: Payloads
    runs: Runs
    graph: Graph
    cancellation: Cancellation
    orphans: Orphans
    delegation: Delegation
    usage: Usage
    classifier: Classifier
    artifacts: Artifacts
    logs: Logs
    attachments: Attachments
    scopes: Scopes
    task_keys: TaskKeys

    @property
    def clock(self) -> Clock:
        return self.kernel.clock

    @property
    def ids(self) -> Ids:
        return self.kernel.ids


def compose_worker(
    rows: Rows,
    clock: Clock,
    ids: Ids,
    blobs: BlobStore | None = None,
    log_sink: LogSink | None = None,
) -> WorkerTenure:
    """Build the worker's use cases on the table's ports, one clock and one id source; the
    adapters a deployment lacks (attachments, logs) are None, and their routes say so."""
    kernel = Kernel(rows, clock, ids)
    versions = Versions(kernel, pools=rows.pools)
    workers = Workers(kernel, leases=rows.leases, queues=rows.queues, workers=rows.workers)
    runs = Runs(kernel)
    task_keys = TaskKeys(kernel, leases=rows.leases, tasks=rows.tasks)
    delegation = Delegation(
        kernel,
        task_keys,
        graph=rows.graph,
        leases=rows.leases,
        tasks=rows.tasks,
        timeline=rows.timeline,
    )
    usage = Usage(kernel)
    classifier = Classifier(kernel, versions, tasks=rows.tasks)
    graph = _graph(kernel, runs, task_keys, rows)
    gate = _gate(kernel, rows, clock)
    # A claim under a subtree cancel that committed before the claim's write is withdrawn.
    cancellation = Cancellation(
        kernel,
        graph,
        graph_rows=rows.graph,
        leases=rows.leases,
        sweeper=rows.sweeper,
        tasks=rows.tasks,
    )
    orphans = Orphans(kernel, tasks=rows.tasks)
    claims = _claims(kernel, rows, gate, workers, orphans, cancellation)
    bound = Bound(kernel, claims)
    completion = _completion(delegation, usage, classifier, Retries(kernel, runs))
    reports = Reports(
        kernel,
        workers,
        completion,
        leases=rows.leases,
        signals=WorkerSignals(kernel.gates, ids, workers=rows.workers),
    )
    artifacts = Artifacts(kernel, blobs, log_sink, retention=rows.retention)
    return WorkerTenure(
        kernel=kernel,
        rows=rows,
        counters=kernel.counters,
        tokens=_tokens(kernel, rows),
        versions=versions,
        workers=workers,
        conditions=Conditions(kernel, queues=rows.queues, workers=rows.workers),
        gate=gate,
        claims=claims,
        bound=bound,
        reports=reports,
        handover=Handover(kernel, reports, claims, bound),
        payloads=_payloads(kernel, versions, graph, rows),
        runs=runs,
        graph=graph,
        cancellation=cancellation,
        orphans=orphans,
        delegation=delegation,
        usage=usage,
        classifier=classifier,
        artifacts=artifacts,
        logs=Logs(kernel, artifacts, attachments=rows.attachments),
        attachments=Attachments(
            kernel, artifacts, attachments=rows.attachments, leases=rows.leases
        ),
        scopes=Scopes(kernel, leases=rows.leases, rules=rows.rules, tasks=rows.tasks),
        task_keys=task_keys,
    )


def _gate(kernel: Kernel, rows: Rows, clock: Clock) -> ClaimGate:
    return ClaimGate(
        kernel,
        holds=(
            held_for_approval(rows.tasks),
            held_by_block(rows.tasks, clock),
        ),
        leases=rows.leases,
        queues=rows.queues,
        sweeper=rows.sweeper,
    )


def _completion(
    delegation: Delegation, usage: Usage, classifier: Classifier, retries: Retries
) -> Completion:
    return Completion(
        prepare=(Stage(delegation.gate_created, Applies.CREATED_TASKS),),
        resolve=(Stage(usage.resolve),),
        # Each stage takes and returns the Ending; the retry marks its `ended` lease.
        contribute=(
            Stage(classifier.with_classifier_output, Applies.CLASSIFIER_SUCCESS),
            Stage(usage.contribute),
            Stage(retries.on_failure, Applies.FAILURE),
        ),
        after=(Stage(delegation.scan_after, Applies.TASK_IDS_IN_RESULT),),
    )


def _tokens(kernel: Kernel, rows: Rows) -> Tokens:
    return Tokens(
        catalog=kernel.catalog,
        clock=kernel.clock,
        counters=kernel.counters,
        ids=kernel.ids,
        owned=kernel.owned,
        leases=rows.leases,
        schema=rows.schema,
        tokens=rows.tokens,
    )


def _graph(kernel: Kernel, runs: Runs, task_keys: TaskKeys, rows: Rows) -> Graph:
    return Graph(
        kernel,
        runs,
        task_keys,
        reasons=(approval_reasons, block_reasons),
        skips=(is_cancelled, awaits_approval, has_open_block),
        graph=rows.graph,
        sweeper=rows.sweeper,
        tasks=rows.tasks,
    )


def _claims(
    kernel: Kernel,
    rows: Rows,
    gate: ClaimGate,
    workers: Workers,
    orphans: Orphans,
    cancellation: Cancellation,
) -> Claims:
    return Claims(
        kernel,
        gate,
        workers,
        Waits(kernel, rows.claims),
        orphans,
        leases=rows.leases,
        claims=rows.claims,
        queues=rows.queues,
        withdraw=(cancellation.withdraw_claim,),
        shared_waits=Waits(kernel, rows.claims, slots=SHARED_WAITING_CLAIMS),
    )


def _payloads(kernel: Kernel, versions: Versions, graph: Graph, rows: Rows) -> Payloads:
    return Payloads(
        kernel,
        versions,
        Inputs(kernel, graph, leases=rows.leases, tasks=rows.tasks),
        leases=rows.leases,
        spaces=rows.spaces,
        timeline=rows.timeline,
    )
