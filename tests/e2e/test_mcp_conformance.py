"""What an outside MCP client meets at `tenure local`'s `/api/v1/mcp`: the checks of the
protocol and of its streamable-HTTP transport that run offline, made with the official Python
client (`ClientSession` over `streamable_http_client`, and `Client` negotiating on its own).
Every HTTP exchange the client makes is recorded, so the transport's side is checked too.
What each token sees and what each tool does are in test_mcp.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.tool_name_validation import validate_tool_name
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from tenure.api.mcp import server
from tenure.api.mcp import tools as t

from tests.e2e.support import World, assert_error
from tests.e2e.test_mcp import _held, _token

T = TypeVar("T")
BARE = 'Bearer realm="tenure"'
INVALID = 'Bearer realm="tenure", error="invalid_token"'
MADE_UP = "tnr_o_nobody.abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass
class Exchange:
    """One HTTP request the client sent and the answer it got."""

    method: str
    sent: bytes
    status: int
    headers: httpx2.Headers


@asynccontextmanager
async def connected(
    world: World, token: str | None, exchanges: list[Exchange]
) -> AsyncIterator[tuple[ClientSession, httpx2.AsyncClient]]:
    """An official client session on the endpoint, not yet initialized, every exchange kept."""

    async def keep(response: httpx2.Response) -> None:
        request = response.request
        exchanges.append(
            Exchange(request.method, request.content, response.status_code, response.headers)
        )

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"response": [keep]}) as http,
        streamable_http_client(f"{world.api.base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        yield client, http


def drive(work: Callable[[], Awaitable[T]]) -> T:
    """Run `work`; a JSON-RPC error it meets is raised as itself, not in the client's groups."""
    try:
        return anyio.run(work)
    except BaseExceptionGroup as group:
        errors = group.subgroup(MCPError)
        if errors is None:
            raise
        first: BaseException = errors.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


def _initialize(version: str) -> types.InitializeRequest:
    return types.InitializeRequest(
        params=types.InitializeRequestParams(
            protocol_version=version,
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="tenure-e2e", version="0"),
        )
    )


def test_initialize_negotiates_the_version_and_describes_the_server(world: World) -> None:
    exchanges: list[Exchange] = []

    async def work() -> types.InitializeResult:
        async with connected(world, world.api.admin_token, exchanges) as (client, _):
            result = await client.initialize()
            await client.send_ping()  # after the initialized notification's own exchange
            return result

    result = drive(work)
    assert result.protocol_version == LATEST_HANDSHAKE_VERSION
    assert result.server_info is not None
    assert (result.server_info.name, result.server_info.version) == ("tenure", "1")
    capabilities = result.capabilities
    assert capabilities.tools is not None and capabilities.tools.list_changed is False
    assert capabilities.resources is None and capabilities.prompts is None
    assert capabilities.logging is None
    assert result.instructions == server.INSTRUCTIONS
    for kind in ("Operator token", "Lease token", "Worker token"):
        assert kind in result.instructions

    # The initialized notification is accepted (202) with no body; the server is stateless,
    # so it hands out no Mcp-Session-Id and the client opens no GET stream and sends no DELETE.
    (notified,) = [x for x in exchanges if b"notifications/initialized" in x.sent]
    assert notified.status == 202
    assert all("mcp-session-id" not in x.headers for x in exchanges)
    assert {x.method for x in exchanges} == {"POST"}


@pytest.mark.parametrize("asked", [*HANDSHAKE_PROTOCOL_VERSIONS, "2099-01-01"])
def test_a_version_the_server_speaks_is_answered_as_asked_any_other_with_its_newest(
    world: World, asked: str
) -> None:
    async def work() -> types.InitializeResult:
        async with connected(world, world.api.admin_token, []) as (client, _):
            return await client.send_request(_initialize(asked), types.InitializeResult)

    answered = drive(work).protocol_version
    assert answered == (asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION)


def test_the_default_client_negotiates_the_newest_revision_and_calls_a_tool(
    world: World,
) -> None:
    # `Client` probes `server/discover` (the 2026-07-28 revision) and falls back to
    # `initialize` only where a server lacks it: this server answers the probe.
    reader = world.operator_token("read", spaces=[world.space])

    async def work() -> tuple[str, Any, str | None, Any, Any]:
        headers = {"Authorization": f"Bearer {reader}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{world.api.base}/mcp", http_client=http)
            async with Client(transport) as client:
                listed = await client.list_tools()
                called = await client.call_tool("leases_list", {"space_key": world.space})
                return (
                    client.protocol_version,
                    client.server_info,
                    client.instructions,
                    listed,
                    called,
                )

    version, info, instructions, listed, called = drive(work)
    assert version == "2026-07-28"
    assert info is not None and info.name == "tenure"
    assert instructions == server.INSTRUCTIONS
    assert "leases_list" in {tool.name for tool in listed.tools}
    assert not called.is_error and called.structured_content == {"leases": [], "next_cursor": None}


def test_every_tool_a_token_lists_has_a_valid_name_and_a_json_schema_object_input(
    world: World,
) -> None:
    held, _ = _held(world)
    tokens = {
        "operator": world.api.admin_token,
        "lease": _token(held),
        "worker": world.worker_token(None),
    }

    async def listed(token: str) -> list[types.Tool]:
        async with connected(world, token, []) as (client, _):
            await client.initialize()
            return (await client.list_tools()).tools

    seen: set[str] = set()
    for kind, token in tokens.items():
        tools = drive(lambda token=token: listed(token))
        assert tools, kind
        for tool in tools:
            assert validate_tool_name(tool.name).is_valid, tool.name
            assert tool.description, tool.name
            schema = tool.input_schema
            Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object", tool.name
            assert schema.get("additionalProperties") is False, tool.name
            assert set(schema.get("required", [])) <= set(schema["properties"]), tool.name
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is not tool.annotations.destructive_hint
            seen.add(tool.name)
    assert seen == set(t.BY_NAME)


def test_a_tool_error_is_a_result_and_a_bad_request_a_json_rpc_error(world: World) -> None:
    reader = world.operator_token("read", spaces=[world.space])

    async def work() -> dict[str, Any]:
        async with connected(world, reader, []) as (client, _):
            await client.initialize()
            out: dict[str, Any] = {
                "valid": await client.call_tool("leases_list", {"space_key": world.space}),
                "wrong type": await client.call_tool("leases_list", {"space_key": 5}),
                "missing": await client.call_tool("leases_list", {}),
                "unknown field": await client.call_tool(
                    "leases_get", {"lease_id": "x", "colour": "red"}
                ),
            }
            for name, arguments in (("leases_nope", {}), ("leases_get", {"token": "x"})):
                try:
                    await client.call_tool(name, arguments)
                except MCPError as refused:
                    out[name] = refused
            return out

    out = drive(work)
    valid = out["valid"]
    assert valid.is_error is False
    assert valid.structured_content == {"leases": [], "next_cursor": None}
    assert valid.content[0].type == "text"
    # Arguments that break the tool's input schema: a tool error the model can read and fix,
    # naming the field, in structured content as the HTTP API's envelope.
    for case, field in (
        ("wrong type", "space_key"),
        ("missing", "space_key"),
        ("unknown field", "colour"),
    ):
        result = out[case]
        assert result.is_error is True, case
        error = result.structured_content["error"]
        assert error["code"] == "validation_failed" and field in error["message"], case
        assert field in result.content[0].text, case
    # An unknown tool, and an input carrying a credential, are the request's fault: JSON-RPC.
    assert out["leases_nope"].code == types.INVALID_PARAMS
    assert "leases_nope" in out["leases_nope"].message
    assert out["leases_get"].code == types.INVALID_PARAMS


def test_ping_answers_empty_and_an_unknown_method_is_method_not_found(world: World) -> None:
    async def work() -> dict[str, Any]:
        async with connected(world, world.api.admin_token, []) as (client, _):
            await client.initialize()
            out: dict[str, Any] = {"ping": await client.send_ping()}
            unknown = types.Request[types.RequestParams | None, str](
                method="tenure/nope", params=None
            )
            asks: dict[str, Callable[[], Awaitable[Any]]] = {
                "tenure/nope": lambda: client.send_request(unknown, types.EmptyResult),
                "resources/list": client.list_resources,
                "prompts/list": client.list_prompts,
            }
            for method, ask in asks.items():
                try:
                    await ask()
                except MCPError as refused:
                    out[method] = refused
            return out

    out = drive(work)
    assert isinstance(out["ping"], types.EmptyResult)
    for method in ("tenure/nope", "resources/list", "prompts/list"):
        assert out[method].code == types.METHOD_NOT_FOUND, method


def test_a_notification_is_accepted_with_202_and_nothing_to_read(world: World) -> None:
    exchanges: list[Exchange] = []

    async def work() -> None:
        async with connected(world, world.api.admin_token, exchanges) as (client, _):
            await client.initialize()
            await client.send_notification(types.RootsListChangedNotification())
            await client.send_ping()  # the client still reads answers after it

    drive(work)
    (sent,) = [x for x in exchanges if b"notifications/roots/list_changed" in x.sent]
    assert sent.status == 202
    assert "content-type" not in sent.headers


@pytest.mark.parametrize(
    ("token", "challenge"), [(None, BARE), (MADE_UP, INVALID)], ids=["no-token", "unknown-token"]
)
def test_without_a_valid_token_the_client_meets_a_401_with_the_bearer_challenge(
    world: World, token: str | None, challenge: str
) -> None:
    exchanges: list[Exchange] = []

    async def work() -> None:
        async with connected(world, token, exchanges) as (client, _):
            await client.initialize()

    with pytest.raises(MCPError):
        drive(work)
    (refused,) = exchanges
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == challenge


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_the_token_is_checked_before_the_method_or_the_body(world: World, method: str) -> None:
    with world.api.client() as anonymous:
        r = anonymous.request(method, "/mcp", content=b"{" if method == "POST" else None)
    assert_error(r, 401, "unauthenticated")
    assert r.headers["www-authenticate"] == BARE
