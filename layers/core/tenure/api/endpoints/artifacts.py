"""A lease's detail: its logs, its attachments, where it runs. The two a lease's own token
writes (its logs, an attachment) call their one function in api/worker_logic.py, which the
worker function calls too."""

from __future__ import annotations

from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure.api import models, views
from tenure.api import worker_logic as logic
from tenure.api.routes import BASE
from tenure.api.surface import actor, core, json_answer, op, served
from tenure.app.artifacts.attachments import served_type

Cursor = Annotated[str | None, Query(max_length=4096)]


@op("GET", f"{BASE}/leases/<lease_id>/exec_target", 200, models.ExecTarget, 404)
def exec_target(lease_id: str) -> Response[Any]:
    target = core().logs.exec_target(actor(), lease_id)
    shown = {
        **target,
        "claimed_at": views.iso(target["claimed_at"]),
    }  # the service's, as ExecTarget
    return json_answer(cast(models.ExecTarget, shown))


op("POST", f"{BASE}/leases/<lease_id>/logs", 202, models.LogsAccepted, 404, 409, 501)(
    served(logic.post_logs, lease_id=str, body=Annotated[models.LogBatch, Body()])
)


@op("GET", f"{BASE}/leases/<lease_id>/logs", 200, models.Logs, 404, 501)
def get_logs(
    lease_id: str,
    container: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] = None,
    tail: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    since: Annotated[str | None, Query(max_length=64)] = None,
    cursor: Cursor = None,
) -> Response[Any]:
    caller = actor()
    logs = core().logs
    after = models.since_ms(since)
    page = logs.read_logs(caller, lease_id, container or None, tail, after, cursor or None)
    events = [views.log_line_view(line) for line in page.events]
    return json_answer(
        models.Logs(events=events, truncated=page.truncated, next_cursor=page.next_cursor)
    )


op("POST", f"{BASE}/leases/<lease_id>/attachments", 201, models.AttachmentAnswer, 404, 409, 501)(
    served(logic.add_attachment, lease_id=str, body=Annotated[models.AttachmentCreate, Body()])
)


@op("GET", f"{BASE}/leases/<lease_id>/attachments", 200, models.Attachments, 404)
def list_attachments(lease_id: str) -> Response[Any]:
    found = core().attachments.list_attachments(actor(), lease_id)
    return json_answer(
        models.Attachments(attachments=[views.attachment_view(a) for a in found], next_cursor=None)
    )


@op(
    "GET",
    f"{BASE}/leases/<lease_id>/attachments/<attachment_id>",
    200,
    None,
    404,
    extra=302,
    raw=True,
)
def fetch_attachment(lease_id: str, attachment_id: str) -> Response[Any]:
    got = core().attachments.fetch_attachment(actor(), lease_id, attachment_id)
    if got.url is not None:
        return Response(
            status_code=302, content_type=None, body=None, headers={"Location": got.url}
        )
    disposition = f'attachment; filename="{_ascii(got.attachment.filename)}"'
    return Response(
        status_code=200,
        content_type=served_type(got.attachment.content_type),
        body=got.data or b"",
        headers={
            "Content-Disposition": disposition,
            # Served on the API's own origin: never sniffed into something that runs, and
            # sandboxed should a browser render it after all.
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
        },
    )


def _ascii(name: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name)
