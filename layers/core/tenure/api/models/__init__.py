"""Request and response bodies, one module per resource: what every route validates against
and the OpenAPI document shows (the response models describe what api/views.py renders).
Imported as one namespace (`from tenure.api import models as m`), whose modules load when a
name of theirs is first read: the worker function reads the leases' and the artifacts' models
alone, and building the classes of all eight modules cost its cold start ~25 ms of CPU
(`tenure bench coldstart`)."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenure.api.models.artifacts import MAX_BATCH_CONTAINERS as MAX_BATCH_CONTAINERS
    from tenure.api.models.artifacts import MAX_LOG_BYTES as MAX_LOG_BYTES
    from tenure.api.models.artifacts import MAX_LOG_EVENTS as MAX_LOG_EVENTS
    from tenure.api.models.artifacts import AttachmentAnswer as AttachmentAnswer
    from tenure.api.models.artifacts import AttachmentCreate as AttachmentCreate
    from tenure.api.models.artifacts import AttachmentOut as AttachmentOut
    from tenure.api.models.artifacts import Attachments as Attachments
    from tenure.api.models.artifacts import Container as Container
    from tenure.api.models.artifacts import LogBatch as LogBatch
    from tenure.api.models.artifacts import LogEventIn as LogEventIn
    from tenure.api.models.artifacts import LogEventOut as LogEventOut
    from tenure.api.models.artifacts import Logs as Logs
    from tenure.api.models.artifacts import LogsAccepted as LogsAccepted
    from tenure.api.models.artifacts import Stream as Stream
    from tenure.api.models.artifacts import UploadOut as UploadOut
    from tenure.api.models.blocks import BlockAnswer as BlockAnswer
    from tenure.api.models.blocks import BlockBody as BlockBody
    from tenure.api.models.blocks import BlockClear as BlockClear
    from tenure.api.models.blocks import BlockCreate as BlockCreate
    from tenure.api.models.blocks import BlockOut as BlockOut
    from tenure.api.models.blocks import BlocksAnswer as BlocksAnswer
    from tenure.api.models.blocks import EventBlockCreate as EventBlockCreate
    from tenure.api.models.blocks import EventSignal as EventSignal
    from tenure.api.models.blocks import PlacedBy as PlacedBy
    from tenure.api.models.blocks import SignalAnswer as SignalAnswer
    from tenure.api.models.blocks import TaskRecover as TaskRecover
    from tenure.api.models.blocks import TypedBlockCreate as TypedBlockCreate
    from tenure.api.models.blocks import _block_kind as _block_kind
    from tenure.api.models.fields import MAX_DOCUMENT_BYTES as MAX_DOCUMENT_BYTES
    from tenure.api.models.fields import MAX_QUEUE_TIMEOUT_SECONDS as MAX_QUEUE_TIMEOUT_SECONDS
    from tenure.api.models.fields import MAX_TTL_SECONDS as MAX_TTL_SECONDS
    from tenure.api.models.fields import AttachmentQuota as AttachmentQuota
    from tenure.api.models.fields import Attempts as Attempts
    from tenure.api.models.fields import ClaimId as ClaimId
    from tenure.api.models.fields import ConcurrencyKey as ConcurrencyKey
    from tenure.api.models.fields import Document as Document
    from tenure.api.models.fields import ErrorDetail as ErrorDetail
    from tenure.api.models.fields import ErrorEnvelope as ErrorEnvelope
    from tenure.api.models.fields import ExpiresIn as ExpiresIn
    from tenure.api.models.fields import Fence as Fence
    from tenure.api.models.fields import Health as Health
    from tenure.api.models.fields import Host as Host
    from tenure.api.models.fields import Integral as Integral
    from tenure.api.models.fields import LeaseSeconds as LeaseSeconds
    from tenure.api.models.fields import Name as Name
    from tenure.api.models.fields import OpenAPIDocument as OpenAPIDocument
    from tenure.api.models.fields import PerKey as PerKey
    from tenure.api.models.fields import PerLease as PerLease
    from tenure.api.models.fields import PerMinute as PerMinute
    from tenure.api.models.fields import PerTree as PerTree
    from tenure.api.models.fields import Positive as Positive
    from tenure.api.models.fields import Priority as Priority
    from tenure.api.models.fields import ReportId as ReportId
    from tenure.api.models.fields import RunSeconds as RunSeconds
    from tenure.api.models.fields import Seconds as Seconds
    from tenure.api.models.fields import Slug as Slug
    from tenure.api.models.fields import SpaceKey as SpaceKey
    from tenure.api.models.fields import Stamp as Stamp
    from tenure.api.models.fields import Strict as Strict
    from tenure.api.models.fields import TaskId as TaskId
    from tenure.api.models.fields import Text as Text
    from tenure.api.models.fields import Title as Title
    from tenure.api.models.fields import WorkerId as WorkerId
    from tenure.api.models.fields import _bounded as _bounded
    from tenure.api.models.fields import _instant as _instant
    from tenure.api.models.fields import _integral as _integral
    from tenure.api.models.fields import _trimmed as _trimmed
    from tenure.api.models.fields import answer as answer
    from tenure.api.models.fields import aware_ms as aware_ms
    from tenure.api.models.fields import caller_time as caller_time
    from tenure.api.models.fields import open_answer as open_answer
    from tenure.api.models.fields import parse_time as parse_time
    from tenure.api.models.fields import since_ms as since_ms
    from tenure.api.models.leases import Beat as Beat
    from tenure.api.models.leases import BeatRow as BeatRow
    from tenure.api.models.leases import Claim as Claim
    from tenure.api.models.leases import Claimed as Claimed
    from tenure.api.models.leases import Complete as Complete
    from tenure.api.models.leases import CredentialsState as CredentialsState
    from tenure.api.models.leases import ExecTarget as ExecTarget
    from tenure.api.models.leases import Fail as Fail
    from tenure.api.models.leases import FailureKind as FailureKind
    from tenure.api.models.leases import Heartbeat as Heartbeat
    from tenure.api.models.leases import HeldLease as HeldLease
    from tenure.api.models.leases import LeaseAnswer as LeaseAnswer
    from tenure.api.models.leases import LeaseFence as LeaseFence
    from tenure.api.models.leases import LeaseOut as LeaseOut
    from tenure.api.models.leases import LeasePage as LeasePage
    from tenure.api.models.leases import LeaseTiming as LeaseTiming
    from tenure.api.models.leases import NextClaim as NextClaim
    from tenure.api.models.leases import Payload as Payload
    from tenure.api.models.leases import QueuedCode as QueuedCode
    from tenure.api.models.leases import QueuedConditionOut as QueuedConditionOut
    from tenure.api.models.leases import Release as Release
    from tenure.api.models.leases import ReportAnswer as ReportAnswer
    from tenure.api.models.leases import RuntimeState as RuntimeState
    from tenure.api.models.leases import TaskRef as TaskRef
    from tenure.api.models.leases import WorkerBeat as WorkerBeat
    from tenure.api.models.leases import WorkerHeartbeat as WorkerHeartbeat
    from tenure.api.models.leases import WorkerOut as WorkerOut
    from tenure.api.models.leases import Workers as Workers
    from tenure.api.models.leases import WorkflowRef as WorkflowRef
    from tenure.api.models.pools import AgentSettings as AgentSettings
    from tenure.api.models.pools import ClassifierOutput as ClassifierOutput
    from tenure.api.models.pools import ClassifierSettings as ClassifierSettings
    from tenure.api.models.pools import Expressions as Expressions
    from tenure.api.models.pools import PoolAnswer as PoolAnswer
    from tenure.api.models.pools import PoolCreate as PoolCreate
    from tenure.api.models.pools import PoolOut as PoolOut
    from tenure.api.models.pools import PoolPatch as PoolPatch
    from tenure.api.models.pools import Pools as Pools
    from tenure.api.models.pools import RetryBackoff as RetryBackoff
    from tenure.api.models.pools import RetrySettings as RetrySettings
    from tenure.api.models.scheduler import Backlog as Backlog
    from tenure.api.models.scheduler import BacklogLease as BacklogLease
    from tenure.api.models.scheduler import BulkFail as BulkFail
    from tenure.api.models.scheduler import BulkRelease as BulkRelease
    from tenure.api.models.scheduler import DiagnosticCode as DiagnosticCode
    from tenure.api.models.scheduler import DiagnosticOut as DiagnosticOut
    from tenure.api.models.scheduler import Drain as Drain
    from tenure.api.models.scheduler import Drained as Drained
    from tenure.api.models.scheduler import ForceResults as ForceResults
    from tenure.api.models.scheduler import ForceRowOut as ForceRowOut
    from tenure.api.models.scheduler import InspectOut as InspectOut
    from tenure.api.models.scheduler import SchedulerOut as SchedulerOut
    from tenure.api.models.setup import InstanceOut as InstanceOut
    from tenure.api.models.setup import InstancePatch as InstancePatch
    from tenure.api.models.setup import Role as Role
    from tenure.api.models.setup import SpaceAnswer as SpaceAnswer
    from tenure.api.models.setup import SpaceCreate as SpaceCreate
    from tenure.api.models.setup import SpaceList as SpaceList
    from tenure.api.models.setup import SpaceOut as SpaceOut
    from tenure.api.models.setup import TokenCreate as TokenCreate
    from tenure.api.models.setup import TokenInfo as TokenInfo
    from tenure.api.models.setup import TokenKind as TokenKind
    from tenure.api.models.setup import TokenList as TokenList
    from tenure.api.models.setup import TokenOut as TokenOut
    from tenure.api.models.setup import WorkflowCreate as WorkflowCreate
    from tenure.api.models.setup import WorkflowOut as WorkflowOut
    from tenure.api.models.tasks import Activity as Activity
    from tenure.api.models.tasks import ApprovalOut as ApprovalOut
    from tenure.api.models.tasks import BlockedReason as BlockedReason
    from tenure.api.models.tasks import Children as Children
    from tenure.api.models.tasks import Enqueue as Enqueue
    from tenure.api.models.tasks import EventOut as EventOut
    from tenure.api.models.tasks import TaskAnswer as TaskAnswer
    from tenure.api.models.tasks import TaskApprove as TaskApprove
    from tenure.api.models.tasks import TaskCancel as TaskCancel
    from tenure.api.models.tasks import TaskCancelled as TaskCancelled
    from tenure.api.models.tasks import TaskCreate as TaskCreate
    from tenure.api.models.tasks import TaskList as TaskList
    from tenure.api.models.tasks import TaskOut as TaskOut
    from tenure.api.models.tasks import TaskPatch as TaskPatch
    from tenure.api.models.tasks import TaskReject as TaskReject

# Where a name is looked for, in this order: the modules every route reads first.
_MODULES = ("fields", "leases", "artifacts", "blocks", "pools", "tasks", "scheduler", "setup")


_MISSING = object()


def _module(name: str) -> Any:
    return import_module(f"{__name__}.{name}")


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of one of the modules, which is loaded now if it was not yet."""
        if not name.startswith("__"):
            for module in _MODULES:
                found = _module(module).__dict__.get(name, _MISSING)
                if found is not _MISSING:
                    globals()[name] = found
                    return found
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({n for module in _MODULES for n in vars(_module(module))} | set(globals()))
