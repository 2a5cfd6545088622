"""The routes a worker calls: with its worker token, the claim and the worker's heartbeat;
with a lease's token, that lease's start, heartbeat, reports and payload. (The operators'
routes for leases are in operator_leases.py, the workers list in operator_workers.py.)"""

from __future__ import annotations

from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, core, json_answer, lease_out, logger, op
from tenure.app.leases.handover import NextClaim
from tenure.app.leases.reports import Answer
from tenure.domain import authz, errors
from tenure.domain.model import Principal
from tenure.domain.states import LeaseState, ReportKind, Revoke


@op("POST", f"{BASE}/pools/<pool>/claim", 200, models.Claimed, 404, 409, 422, extra=204)
def claim(pool: str, body: Annotated[models.Claim, Body()]) -> Response[Any]:
    won = core().claims.claim(
        actor(),
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
        return Response(status_code=204, content_type=None, body=None)
    # DEBUG: the claim is on the lease's timeline and in the Claims metric already; a
    # line per claim at INFO was most of what a lease costs in log ingestion.
    logger.debug("lease claimed", extra={"lease_id": won.lease.id, "pool": pool})
    return json_answer(_claimed_view(won))


def _claimed_view(won: Any) -> models.Claimed:
    """A won claim: the lease, its token (shown this once) and the work bundle (payload),
    so the worker needs no GET payload; the bundle's lease is the one just won."""
    lease = lease_out(won.lease)
    bundle = core().payloads.claimed_payload(won.lease, won.task)
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


@op("POST", f"{BASE}/leases/<lease_id>/start", 200, models.LeaseAnswer, 404, 409)
def start(lease_id: str) -> Response[Any]:
    return json_answer(models.LeaseAnswer(lease=lease_out(core().reports.start(actor(), lease_id))))


@op("POST", f"{BASE}/leases/<lease_id>/heartbeat", 200, models.Beat, 404, 409, 422)
def heartbeat(
    lease_id: str, body: Annotated[models.Heartbeat | None, Body()] = None
) -> Response[Any]:
    beat = core().reports.heartbeat(actor(), lease_id, body.lease_seconds if body else None)
    return json_answer(_beat_view(beat.state, beat.deadline, beat.revoke))


@op("POST", f"{BASE}/workers/<worker_id>/heartbeat", 200, models.WorkerBeat, 404, 422)
def worker_heartbeat(
    worker_id: str, body: Annotated[models.WorkerHeartbeat, Body()]
) -> Response[Any]:
    beats = core().reports.worker_beats(
        actor(),
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
    return json_answer(answer)


def _beat_rows(answers: list[tuple[str, int, Answer]]) -> list[models.BeatRow]:
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


@op("POST", f"{BASE}/leases/<lease_id>/complete", 200, models.ReportAnswer, 403, 404, 409, 422)
def complete(
    lease_id: str, body: Annotated[models.Complete | None, Body()] = None
) -> Response[Any]:
    raw = body.model_dump(exclude_unset=True) if body else {}
    return _final(lease_id, ReportKind.COMPLETE, raw)


@op("POST", f"{BASE}/leases/<lease_id>/fail", 200, models.ReportAnswer, 403, 404, 409, 422)
def fail(lease_id: str, body: Annotated[models.Fail, Body()]) -> Response[Any]:
    return _final(lease_id, ReportKind.FAIL, body.model_dump(exclude_unset=True))


def _final(lease_id: str, kind: ReportKind, raw: dict[str, Any]) -> Response[Any]:
    """A final report. Sent with the worker token that claimed the lease, its `next` claims
    that worker's next lease in the same call (one request fewer per lease); sent with the
    lease's own token, which the job holds too, it claims nothing and answers `next: null`."""
    ask = raw.pop("next", None)
    beats = raw.pop("heartbeat", None)  # not the report's: renewed after it, apart
    caller = actor()
    if caller.kind != "worker":
        if beats is not None:  # the dispatcher refuses this before the body is read; a guard
            raise errors.LeaseTokenMismatch(authz.LEASE_TOKENS_RENEW_NOTHING)
        report = core().reports.complete if kind is ReportKind.COMPLETE else core().reports.fail
        reported = lease_out(report(caller, lease_id, raw))
        return json_answer(
            models.ReportAnswer(lease=reported)
            if ask is None
            else models.ReportAnswer(lease=reported, next=None)
        )
    if ask is None:  # the dispatcher refuses this before the body is read; kept as a guard
        raise errors.Forbidden(authz.WORKER_REPORTS_NEED_NEXT)
    ended, won = core().handover.report_then_claim(caller, lease_id, kind, raw, NextClaim(**ask))
    if won is not None:
        logger.debug("lease claimed", extra={"lease_id": won.lease.id, "pool": won.pool.name})
    shown = lease_out(ended)
    answer = models.ReportAnswer(lease=shown, next=_claimed_view(won) if won is not None else None)
    if beats is not None:
        answer["heartbeat"] = _riding_beats(caller, ask["worker_id"], lease_id, beats)
    return json_answer(answer)


def _riding_beats(
    caller: Principal, worker_id: str, reported: str, items: list[dict[str, Any]]
) -> list[models.BeatRow] | models.ErrorEnvelope:
    """The worker heartbeat a final report carries, renewed after the report and its claim
    exactly as `POST /workers/{worker_id}/heartbeat` renews it (one request fewer). The
    reported lease has just ended: its item alone is refused. A refusal of the heartbeat as a
    whole is this answer's `{error}`, never the report's: the report stands."""
    pairs = [(str(item["id"]), int(item["fence"])) for item in items]
    asked = [pair for pair in pairs if pair[0] != reported]
    try:
        answers = (
            core().reports.worker_heartbeat(actor=caller, worker_id=worker_id, leases=asked)
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


@op("POST", f"{BASE}/leases/<lease_id>/release", 200, models.LeaseAnswer, 404, 409, 422)
def release(lease_id: str, body: Annotated[models.Release | None, Body()] = None) -> Response[Any]:
    raw = body.model_dump(exclude_unset=True) if body else {}
    return json_answer(
        models.LeaseAnswer(lease=lease_out(core().reports.release(actor(), lease_id, raw)))
    )


@op("GET", f"{BASE}/leases/<lease_id>/payload", 200, models.Payload, 404, 409)
def payload(lease_id: str) -> Response[Any]:
    bundle = core().payloads.payload(actor(), lease_id)
    return json_answer(_bundle(bundle, lease_out(bundle["lease"])))
