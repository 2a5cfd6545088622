"""The board's page and `whoami` through `handle()`: the page needs no token and
admits only its own inlined script and style; whoami tells an operator its role and spaces."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from tenure.api import app as api
from tenure.api.endpoints import board as board_endpoint
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import MEMBER, READER, WORKER, as_lease


def _call(path: str, actor: Principal | None) -> dict[str, Any]:
    event = to_event("GET", path, {"host": "unit"}, b"")
    if actor is not None:
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out: dict[str, Any] = api.handle(event, None)
    return out


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_board_is_one_page_served_without_a_token() -> None:
    out = _call("/board", None)
    assert out["statusCode"] == 200
    headers = {k.lower(): v for k, v in out["headers"].items()}
    assert headers["content-type"].startswith("text/html")
    assert headers["cache-control"] == "no-store"
    page = out["body"]
    assert 'href="board.css"' not in page and 'src="board.js"' not in page
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", page, re.S)
    policy = headers["content-security-policy"]
    assert f"script-src {_sha(script)}" in policy and f"style-src {_sha(style)}" in policy
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    # Nothing is fetched from elsewhere: no CDN, no second request for an asset.
    assert set(re.findall(r'(?:src|href)="([^"]*)"', page)) == {"data:,", "#board"}


def test_the_board_is_in_the_openapi_document_as_public() -> None:
    doc = api.contract()
    assert (
        "security" not in doc["paths"]["/board"]["get"]
        or not doc["paths"]["/board"]["get"]["security"]
    )
    assert "/api/v1/whoami" in doc["paths"]


@pytest.mark.parametrize(
    ("actor", "role", "spaces"),
    [(READER, "read", None), (dataclasses.replace(MEMBER, spaces=("OPS",)), "member", ["OPS"])],
)
def test_whoami_names_an_operators_role_and_spaces(
    actor: Principal, role: str, spaces: list[str] | None
) -> None:
    out = _call("/api/v1/whoami", actor)
    assert out["statusCode"] == 200, out
    assert json.loads(out["body"]) == {"kind": "operator", "role": role, "spaces": spaces}


@pytest.mark.parametrize(
    ("actor", "status", "code"),
    [
        (None, 401, "unauthenticated"),
        (WORKER, 403, "forbidden"),
        (as_lease("lease_1"), 403, "lease_token_mismatch"),
    ],
)
def test_whoami_is_for_operator_tokens(
    actor: Principal | None, status: int, code: str | None
) -> None:
    out = _call("/api/v1/whoami", actor)
    assert out["statusCode"] == status, out
    if code:
        assert json.loads(out["body"])["error"]["code"] == code


def test_the_page_script_is_every_part_of_the_board_script_in_order() -> None:
    """The board's script is split into parts that share one function: the page must carry
    every part, in the order the function needs (opened by the first, closed by the last),
    and no script file of the board may be left out of it."""
    folder = Path(board_endpoint.__file__).resolve().parents[1] / "board"
    assert {p.name for p in folder.glob("*.js")} == set(board_endpoint._SCRIPTS)
    parts = [(folder / name).read_text(encoding="utf-8") for name in board_endpoint._SCRIPTS]
    page = _call("/board", None)["body"]
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert script == "".join(parts)
    assert parts[0].startswith('"use strict";') and "(() => {" in parts[0]
    assert parts[-1].rstrip().endswith("})();")
    assert all("})();" not in part for part in parts[:-1])
