"""An attachment downloads byte for byte through the API function, whatever its bytes are
(a 200 with the bytes as stored and the content type they were stored with)."""

from __future__ import annotations

import base64
import os

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
    out = api.handle(event, None)
    assert out["statusCode"] == 200, out.get("body")
    raw = out.get("body") or ""
    got = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    assert got == data
    assert out["headers"]["Content-Type"] == content_type
