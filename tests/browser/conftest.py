"""Browser tier: Playwright for Python drives Chromium against the session's local stack."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LocalStack, _unavailable
from tests.e2e.support import Api, Recorder

# Playwright's own browser download may be blocked: Debian's chromium does the same job.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    wanted = os.environ.get("TENURE_CHROMIUM")
    for candidate in (wanted, "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


# Module-scoped, not session-scoped: Playwright's sync API runs an asyncio loop on the main
# thread while it is started, and later tiers (the MCP client, anyio) need that thread free.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (make install)")
    path = chromium_path()
    if path is None:
        _unavailable("chromium is not installed (make chromium)")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def api(local_stack: LocalStack) -> Api:
    return Api(local_stack.base, local_stack.admin_token, Recorder())


@pytest.fixture(scope="session")
def board_url(local_stack: LocalStack) -> str:
    return local_stack.base.removesuffix("/api/v1") + "/board"
