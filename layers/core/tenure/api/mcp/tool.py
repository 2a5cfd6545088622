"""One MCP tool: its name, input model, who it is offered to and the call it makes; and how a
lease reads over MCP (the HTTP view with a subject reference)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from tenure.api import views
from tenure.app.tenure import Tenure
from tenure.domain import authz
from tenure.domain.model import Lease, Principal
from tenure.records import record

Run = Callable[[Tenure, Principal, Any], dict[str, Any]]


@record
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    # Who is offered the tool, in the route table's words: "operator:<role>", "lease" and/or
    # "worker" (a worker token, whose runs are bound to it: app/leases/bound.py).
    audience: tuple[str, ...]
    run: Run
    read_only: bool = True
    # What a lease token's call is once its lease has ended (domain/authz.py): by default a
    # use that ends with the lease.
    use: str = authz.ACT

    def offered_to(self, actor: Principal) -> bool:
        if actor.kind in ("lease", "worker"):
            return actor.kind in self.audience
        roles = [a.removeprefix("operator:") for a in self.audience if a.startswith("operator:")]
        rank = authz.ROLE_RANK.get(actor.role or "", -1)
        return actor.kind == "operator" and any(rank >= authz.ROLE_RANK[r] for r in roles)

    def refuse(self, actor: Principal) -> None:
        """Raise what the HTTP route table would answer this caller (core/authz)."""
        operator = [a for a in self.audience if a.startswith("operator:")]
        if operator:
            authz.require_role(actor, operator[0].removeprefix("operator:"))
        if "worker" in self.audience:
            authz.require_worker(actor, None)
        authz.require_lease(actor, "")

    def input_schema(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema


# ----------------------------------------------------------------------------- views


def subject_ref(lease: Lease) -> dict[str, Any]:
    """What the lease answers for: its task, workflow or space, by id, slug or key."""
    kind = lease.subject_kind.value
    if kind == "task":
        return {"kind": "task", "id": lease.task_id, "key": lease.task_key}
    if kind == "workflow":
        return {"kind": "workflow", "slug": lease.workflow}
    return {"kind": "space", "key": lease.space}


def lease_mcp(svc: Tenure, lease: Lease, timing: bool = True) -> dict[str, Any]:
    """A lease as MCP shows it: the HTTP view with a subject reference, without the worker
    version or the workflow field (and without timing in a list)."""
    lease = svc.kernel.catalog.shown(lease)
    return mcp_view(
        views.lease_view(lease, svc.conditions.queued_condition_of(lease)), lease, timing
    )


def mcp_view(view: Mapping[str, Any], lease: Lease, timing: bool) -> dict[str, Any]:
    view = {k: x for k, x in view.items() if k not in ("worker_version", "workflow")}
    if not timing:
        view.pop("timing")
    return {**view, "subject": subject_ref(lease)}
