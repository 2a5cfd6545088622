"""The lease service: every use case, composed from one module per concern (no AWS, no clock).

setup (spaces, pools, tokens) · tasks (filing, runs) · tasks_graph (parents, dependencies,
pause) · scheduler (pause, drain, status, backlog, starvation, the claim gate) ·
force (retry chains, bulk force release / fail) · inspect (triage snapshots) ·
leases/claims · leases/reports · leases/operator · leases/recovery (expiry) ·
workers (liveness) · conditions · payload.
Every state change goes through the §3 table in core/transitions.py.
"""

from __future__ import annotations

from tenure.core.conditions import ConditionOps, QueuedCondition
from tenure.core.force import ForceOps
from tenure.core.inspect import InspectOps
from tenure.core.leases.claims import Claimed, ClaimOps
from tenure.core.leases.operator import OperatorOps
from tenure.core.leases.recovery import RecoveryOps
from tenure.core.leases.reports import Beat, ReportOps
from tenure.core.payload import PayloadOps
from tenure.core.setup import SetupOps
from tenure.core.tasks import TaskView
from tenure.core.workers import WorkerView


class LeaseService(
    SetupOps,
    InspectOps,
    ForceOps,
    ClaimOps,
    ReportOps,
    OperatorOps,
    RecoveryOps,
    ConditionOps,
    PayloadOps,
):
    """The one object handlers, the sweeper and the reactor call."""


__all__ = ["Beat", "Claimed", "LeaseService", "QueuedCondition", "TaskView", "WorkerView"]
