"""An attachment downloads byte for byte through the API function, whatever its bytes are
(a 200 with the bytes as stored and the content type they were stored with)."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api.authorizer import authorize
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import Rig
from tests.unit.test_authz_matrix import scene

BINARY = bytes(range(256)) * 8 + os.urandom(1000)  # never valid UTF-8 (0x80 alone, 0xff …)


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (BINARY, "application/octet-stream"),
        (BINARY, "image/png"),
        ("héllo, wörld\n".encode(), "text/plain; charset=utf-8"),
        (b'{"a": 1}', "application/json"),
        (b"", "application/octet-stream"),
    ],
)
def test_an_attachment_comes_back_byte_for_byte(
    monkeypatch: pytest.MonkeyPatch, data: bytes, content_type: str
) -> None:
    out = _fetch(monkeypatch, data, content_type)
    assert out["statusCode"] == 200, out.get("body")
    raw = out.get("body") or ""
    got = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    assert got == data
    assert out["headers"]["Content-Type"] == content_type


@pytest.mark.parametrize(
    "content_type",
    ["text/html", "text/html; charset=utf-8", "image/svg+xml", "application/xhtml+xml"],
)
def test_an_attachment_a_browser_would_run_is_served_as_bytes_it_will_not(
    monkeypatch: pytest.MonkeyPatch, content_type: str
) -> None:
    """A job's attachment is served on the API's own origin: a page or an image with script
    in it, opened there, would run with that origin. It is served as opaque bytes, sandboxed,
    and never sniffed into something else."""
    page = b"<html><script>fetch('/api/v1/tokens')</script></html>"
    out = _fetch(monkeypatch, page, content_type)
    assert out["statusCode"] == 200, out.get("body")
    headers = out["headers"]
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == "sandbox; default-src 'none'"
    assert headers["Content-Disposition"].startswith("attachment;")


def test_every_inline_attachment_is_sandboxed_and_never_sniffed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = _fetch(monkeypatch, b"plain", "text/plain")["headers"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == "sandbox; default-src 'none'"


def _fetch(monkeypatch: pytest.MonkeyPatch, data: bytes, content_type: str) -> dict[str, Any]:
    rig = Rig()
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    s = scene(rig)
    body = {
        "filename": "blob.bin",
        "content_type": content_type,
        "byte_size": len(data),
        "content_base64": base64.b64encode(data).decode(),
    }
    made = s.must("POST", f"/leases/{s.ids['mine']}/attachments", "lease", body)
    path = f"/api/v1/leases/{s.ids['mine']}/attachments/{made['attachment']['id']}"
    head = {"host": "unit", "authorization": f"Bearer {s.tokens['admin']}"}
    event = to_event("GET", path, head, b"")
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    return dict(api.handle(event, None))


@pytest.mark.parametrize("content_type", ["text/plaïn", "téxt/plain", "text/plain; q=é"])
def test_a_content_type_no_http_header_can_carry_is_refused(
    monkeypatch: pytest.MonkeyPatch, content_type: str
) -> None:
    """A content type is served back as a header, and a header carries ASCII alone: a type of
    other letters is refused when the attachment is made, naming the field."""
    rig = Rig()
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    s = scene(rig)
    body = {"filename": "a.txt", "content_type": content_type, "content_base64": "YQ=="}
    got = s.send("POST", f"/leases/{s.ids['mine']}/attachments", "lease", body)
    assert got.status == 422 and got.code == "validation_failed", got
    assert "content_type" in str(got.body), got
