"""The lease service: every use case, composed from one module per concern (no AWS, no clock).

setup (spaces, pools, tokens) · tasks (filing, runs) · task_list (a space's tasks) ·
tasks_graph (parents, dependencies, pause) ·
scheduler (pause, drain, status, backlog, starvation, the claim gate) ·
force (retry chains, bulk force release / fail) · inspect (triage snapshots) ·
leases/claims · leases/reports · leases/operator · leases/recovery (expiry) ·
workers (liveness) · conditions · payload · firings and subjects (rules, DESIGN §10) ·
logs, attachments, retention (DESIGN §11) · pools (pools, spaces, instance; DESIGN §12) ·
classifier (agent/classifier versions) · autonomy (DESIGN §14): blocks (typed blocks, the
breaker; breaker: recover, expiry), delegation (lease-token filing, the completion claim gate), wake
(wake-creator from the stream), usage (usage and cost on completion).
scopes: the space a resource named in a request is in (the API's scope check, DESIGN §5).
Every state change goes through the §3 table in core/transitions.py.
"""

from __future__ import annotations

from tenure.app.artifacts.attachments import AttachmentOps, Download, Upload
from tenure.app.artifacts.logs import LogOps
from tenure.app.artifacts.retention import Reclaimed, RetentionOps
from tenure.app.autonomy.breaker import BreakerOps
from tenure.app.autonomy.delegation import DelegationOps
from tenure.app.autonomy.wake import WakeOps
from tenure.app.conditions import ConditionOps, QueuedCondition
from tenure.app.inspect import InspectOps
from tenure.app.leases.claims import Claimed, ClaimOps
from tenure.app.leases.force import ForceOps
from tenure.app.leases.handover import HandoverOps
from tenure.app.leases.operator import OperatorOps
from tenure.app.leases.payload import PayloadOps
from tenure.app.leases.recovery import RecoveryOps
from tenure.app.leases.reports import Beat, ReportOps
from tenure.app.ports import BlobStore, Clock, Ids, LogSink, Store
from tenure.app.rules.firings import FiringOps
from tenure.app.rules.subjects import SubjectOps
from tenure.app.scopes import ScopeOps
from tenure.app.setup.pools import PoolOps
from tenure.app.setup.spaces import SetupOps
from tenure.app.tasks.filing import TaskView
from tenure.app.tasks.listing import TaskListOps
from tenure.app.usage import UsageOps
from tenure.app.workers import WorkerView


class LeaseService(
    # Most derived first, so Python can linearise the mixins (C3): the graph's task filing
    # (InspectOps → SchedulerOps → GraphOps) overrides TaskOps' hooks, reports carry the
    # classifier's rendering, claims carry the scheduler's gate. The §14 mixins come first:
    # Delegation overrides filing and complete; Wake and Breaker extend the stream's reactions
    # (each calls super); Breaker (recover, expiry, reset) builds on Blocks, which adds typed
    # blocks to the reasons, the gate and auto-enqueue; UsageOps wraps ReportOps' final change.
    DelegationOps,
    WakeOps,
    BreakerOps,
    InspectOps,
    TaskListOps,
    UsageOps,
    ReportOps,
    ForceOps,
    # HandoverOps (a final report that claims the next lease) calls the public complete/fail,
    # so Delegation's gate and Usage apply to it as to the plain routes.
    HandoverOps,
    ClaimOps,
    PayloadOps,
    FiringOps,
    LogOps,
    AttachmentOps,
    RetentionOps,
    PoolOps,
    SetupOps,
    OperatorOps,
    RecoveryOps,
    ConditionOps,
    SubjectOps,
    ScopeOps,
):
    """The one object handlers, the sweeper and the reactor call."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: Ids,
        blobs: BlobStore | None = None,
        log_sink: LogSink | None = None,
    ) -> None:
        super().__init__(store, clock, ids)
        # Where a lease's attachments and logs live (DESIGN §11); None: this deployment has
        # none, and their routes say so.
        self.blobs = blobs
        self.log_sink = log_sink


__all__ = [
    "Beat",
    "Claimed",
    "Download",
    "LeaseService",
    "QueuedCondition",
    "Reclaimed",
    "TaskView",
    "Upload",
    "WorkerView",
]
