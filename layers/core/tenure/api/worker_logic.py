"""The worker routes' logic, one plain function per route, apart from how the route is served:
each takes the request (its caller and use cases), its path parameters and its body already
validated against the route's model, and returns its answer: status, body and headers. The
HTTP API function registers each with its resolver (endpoints/worker_routes.py,
endpoints/artifacts.py), which makes the answer its response; the worker function calls the
same function from its own dispatch (api/worker_dispatch.py) and renders the answer as the
resolver would, byte for byte (render)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NamedTuple, cast

from tenure.api import models, views
from tenure.api.errors import JSON
from tenure.api.gate import logger
from tenure.api.routes import BASE
from tenure.app.conditions import QUEUED_STATES
from tenure.app.leases.handover import NextClaim
from tenure.app.leases.reports import Answer as Beat
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain import authz, errors
from tenure.domain.model import Lease, Principal
from tenure.domain.states import LeaseState, ReportKind, Revoke
from tenure.records import record


@record
class Request:
    """Who calls (as the dispatch read it, once) and the worker's use cases it runs with."""

    caller: Principal
    core: WorkerTenure


class Answer(NamedTuple):
    status: int
    body: Any  # a JSON value, or None for no body at all (a 204)
    headers: Mapping[str, str] = {}


def ok(body: Any, status: int = 200) -> Answer:
    return Answer(status, body)


def render(answer: Answer) -> dict[str, Any]:
    """The Lambda result (payload 2.0) the HTTP API's resolver makes of the same answer: the
    answer's headers, then its content type; the body as `json.dumps` writes it."""
    if answer.body is None:
        return _result(answer.status, None, dict(answer.headers))
    return _result(answer.status, json.dumps(answer.body), {**answer.headers, "Content-Type": JSON})


def _result(status: int, body: str | None, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "body": body,
        "isBase64Encoded": False,
        "headers": headers,
        "cookies": [],
    }


def lease_out(core: WorkerTenure, lease: Lease) -> models.LeaseOut:
    """A lease as every route shows it, with the queued condition the service judges (and
    reclaimed once its retention has passed, when it had nothing to delete)."""
    # Only a queued lease has a condition to judge: an ended or held one is shown as it is.
    queued = lease.state in QUEUED_STATES
    condition = core.conditions.queued_condition_of(lease) if queued else None
    return views.lease_view(core.kernel.catalog.shown(lease), condition)


def leases_out(core: WorkerTenure, leases: Iterable[Lease]) -> list[models.LeaseOut]:
    """Many leases, each pool's facts read once for all of them."""
    leases = [core.kernel.catalog.shown(x) for x in leases]
    conditions = core.conditions.queued_conditions(leases)
    return [views.lease_view(x, conditions[x.id]) for x in leases]


def claim(req: Request, pool: str, body: models.Claim) -> Answer:
    won = req.core.claims.claim(
        req.caller,
        pool,
        body.worker_id,
        body.worker_version,
        body.wait_seconds,
        body.lease_seconds,
        claim_id=body.claim_id,
        host=body.host,
        lease_id=body.lease_id,
        start=body.start,
    )
    if won is None:
        return Answer(204, None)
    # DEBUG: the claim is on the lease's timeline and in the Claims metric already; a
    # line per claim at INFO was most of what a lease costs in log ingestion.
    logger.debug("lease claimed", extra={"lease_id": won.lease.id, "pool": pool})
    return ok(_claimed_view(req, won))


def _claimed_view(req: Request, won: Any) -> models.Claimed:
    """A won claim: the lease, its token (shown this once) and the work bundle (payload),
    so the worker needs no GET payload; the bundle's lease is the one just won."""
    lease = lease_out(req.core, won.lease)
    bundle = req.core.payloads.claimed_payload(won.lease, won.task)
    return models.Claimed(
        lease=lease,
        token=won.token,
        fence=won.lease.fence,
        claim_token_hash=won.lease.token_hash,
        renew_seconds=won.pool.renew_seconds,
        keeps_logs=won.pool.keeps_logs,
        payload=_bundle(bundle, lease) if bundle else None,
    )


def _bundle(bundle: dict[str, Any], lease: models.LeaseOut) -> models.Payload:
    """The work bundle with the lease as the route shows it (open: each subject kind adds
    fields of its own, after lease, subject and kind)."""
    return cast(models.Payload, {**bundle, "lease": lease})


def start(req: Request, lease_id: str) -> Answer:
    started = req.core.reports.start(req.caller, lease_id)
    return ok(models.LeaseAnswer(lease=lease_out(req.core, started)))


def heartbeat(req: Request, lease_id: str, body: models.Heartbeat | None) -> Answer:
    beat = req.core.reports.heartbeat(req.caller, lease_id, body.lease_seconds if body else None)
    return ok(_beat_view(beat.state, beat.deadline, beat.revoke))


def worker_heartbeat(req: Request, worker_id: str, body: models.WorkerHeartbeat) -> Answer:
    beats = req.core.reports.worker_beats(
        req.caller,
        worker_id,
        [(item.id, item.fence) for item in body.leases],
        runtime=body.runtime.model_dump(exclude_none=True) if body.runtime else None,
        credentials=body.credentials.model_dump(exclude_none=True) if body.credentials else None,
        pool=body.pool,
        signal=body.signal,
    )
    answer = models.WorkerBeat(leases=_beat_rows(beats.answers))
    if beats.signal is not None:
        answer["signal"] = beats.signal
    return ok(answer)


def _beat_rows(answers: list[tuple[str, int, Beat]]) -> list[models.BeatRow]:
    rows: list[models.BeatRow] = []
    for lease_id, fence, answer in answers:
        if isinstance(answer, errors.TenureError):
            error = models.ErrorDetail(code=answer.code, message=answer.message)
            rows.append(models.BeatRow(id=lease_id, fence=fence, error=error))
        else:
            beat = _beat_view(answer.state, answer.deadline, answer.revoke)
            rows.append(models.BeatRow(id=lease_id, fence=fence, **beat))
    return rows


def _beat_view(state: LeaseState, deadline: int | None, revoke: Revoke | None) -> models.Beat:
    return models.Beat(state=state, deadline=views.iso(deadline), revoke=revoke if revoke else None)


def complete(req: Request, lease_id: str, body: models.Complete | None) -> Answer:
    raw = body.model_dump(exclude_unset=True) if body else {}
    return _final(req, lease_id, ReportKind.COMPLETE, raw)


def fail(req: Request, lease_id: str, body: models.Fail) -> Answer:
    return _final(req, lease_id, ReportKind.FAIL, body.model_dump(exclude_unset=True))


def _final(req: Request, lease_id: str, kind: ReportKind, raw: dict[str, Any]) -> Answer:
    """A final report. Sent with the worker token that claimed the lease, its `next` claims
    that worker's next lease in the same call (one request fewer per lease); sent with the
    lease's own token, which the job holds too, it claims nothing and answers `next: null`."""
    ask = raw.pop("next", None)
    beats = raw.pop("heartbeat", None)  # not the report's: renewed after it, apart
    caller, core = req.caller, req.core
    if caller.kind != "worker":
        if beats is not None:  # the dispatcher refuses this before the body is read; a guard
            raise errors.LeaseTokenMismatch(authz.LEASE_TOKENS_RENEW_NOTHING)
        report = core.reports.complete if kind is ReportKind.COMPLETE else core.reports.fail
        reported = lease_out(core, report(caller, lease_id, raw))
        return ok(
            models.ReportAnswer(lease=reported)
            if ask is None
            else models.ReportAnswer(lease=reported, next=None)
        )
    if ask is None:  # the dispatcher refuses this before the body is read; kept as a guard
        raise errors.Forbidden(authz.WORKER_REPORTS_NEED_NEXT)
    ended, won = core.handover.report_then_claim(caller, lease_id, kind, raw, NextClaim(**ask))
    if won is not None:
        logger.debug("lease claimed", extra={"lease_id": won.lease.id, "pool": won.pool.name})
    shown = lease_out(core, ended)
    next_view = _claimed_view(req, won) if won is not None else None
    answer = models.ReportAnswer(lease=shown, next=next_view)
    if beats is not None:
        answer["heartbeat"] = _riding_beats(req, ask["worker_id"], lease_id, beats)
    return ok(answer)


def _riding_beats(
    req: Request, worker_id: str, reported: str, items: list[dict[str, Any]]
) -> list[models.BeatRow] | models.ErrorEnvelope:
    """The worker heartbeat a final report carries, renewed after the report and its claim
    exactly as `POST /workers/{worker_id}/heartbeat` renews it (one request fewer). The
    reported lease has just ended: its item alone is refused. A refusal of the heartbeat as a
    whole is this answer's `{error}`, never the report's: the report stands."""
    pairs = [(str(item["id"]), int(item["fence"])) for item in items]
    asked = [pair for pair in pairs if pair[0] != reported]
    try:
        answers = (
            req.core.reports.worker_heartbeat(actor=req.caller, worker_id=worker_id, leases=asked)
            if asked
            else []
        )
    except errors.TenureError as refused:
        return models.ErrorEnvelope(
            error=models.ErrorDetail(code=refused.code, message=refused.message)
        )
    renewed = iter(_beat_rows(answers))
    ended = models.ErrorDetail(
        code=errors.InvalidTransition.code,
        message=f"lease {reported} is the one this report ended; nothing to renew",
    )
    return [
        models.BeatRow(id=lease_id, fence=fence, error=ended)
        if lease_id == reported
        else next(renewed)
        for lease_id, fence in pairs
    ]


def release(req: Request, lease_id: str, body: models.Release | None) -> Answer:
    raw = body.model_dump(exclude_unset=True) if body else {}
    released = req.core.reports.release(req.caller, lease_id, raw)
    return ok(models.LeaseAnswer(lease=lease_out(req.core, released)))


def payload(req: Request, lease_id: str) -> Answer:
    bundle = req.core.payloads.payload(req.caller, lease_id)
    return ok(_bundle(bundle, lease_out(req.core, bundle["lease"])))


def post_logs(req: Request, lease_id: str, body: models.LogBatch) -> Answer:
    events = [event.model_dump() for event in body.events]
    accepted = req.core.logs.post_logs(req.caller, lease_id, events)
    return ok(models.LogsAccepted(accepted=accepted), 202)


def add_attachment(req: Request, lease_id: str, body: models.AttachmentCreate) -> Answer:
    content = None
    if body.content_base64 is not None:
        try:
            content = base64.b64decode(body.content_base64, validate=True)
        except (binascii.Error, ValueError) as bad:
            raise errors.ValidationFailed("content_base64: is not valid base64") from bad
    attachment, upload = req.core.attachments.add_attachment(
        req.caller,
        lease_id,
        body.filename,
        body.content_type,
        body.kind,
        body.byte_size,
        content,
    )
    shown = views.attachment_view(attachment)
    if upload is None:  # the bytes came inline: no upload, not even a null one
        return ok(models.AttachmentAnswer(attachment=shown), 201)
    method = cast(Literal["PUT"], upload.method)  # the presigned PUT it always is
    url = models.UploadOut(url=upload.url, method=method, headers=upload.headers)
    return ok(models.AttachmentAnswer(attachment=shown, upload=url), 201)


@record
class Plain:
    """A worker route as the worker function serves it: its function, and the name of the
    model its body is validated with (in tenure.api.models, read on the route's first call;
    None: it reads no body), which an absent body may stand for (`optional`) or not."""

    func: Callable[..., Answer]
    body: str | None = None
    optional: bool = False


_LEASE = f"{BASE}/leases/<lease_id>"
PLAIN: dict[tuple[str, str], Plain] = {
    ("POST", f"{BASE}/pools/<pool>/claim"): Plain(claim, "Claim"),
    ("POST", f"{BASE}/workers/<worker_id>/heartbeat"): Plain(worker_heartbeat, "WorkerHeartbeat"),
    ("POST", f"{_LEASE}/start"): Plain(start),
    ("POST", f"{_LEASE}/heartbeat"): Plain(heartbeat, "Heartbeat", optional=True),
    ("POST", f"{_LEASE}/complete"): Plain(complete, "Complete", optional=True),
    ("POST", f"{_LEASE}/fail"): Plain(fail, "Fail"),
    ("POST", f"{_LEASE}/release"): Plain(release, "Release", optional=True),
    ("GET", f"{_LEASE}/payload"): Plain(payload),
    ("POST", f"{_LEASE}/logs"): Plain(post_logs, "LogBatch"),
    ("POST", f"{_LEASE}/attachments"): Plain(add_attachment, "AttachmentCreate"),
}
