"""The JSON-RPC 2.0 messages POST /api/v1/mcp carries, as the OpenAPI document shows them. The
SDK validates what arrives; these describe it, no stricter than the SDK reads it."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from tenure.api import models


class JsonRpcRequest(BaseModel):
    """A JSON-RPC request, answered 200; without an `id`, a notification, answered 202."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    jsonrpc: Literal["2.0"]
    method: str = Field(description="e.g. initialize, tools/list, tools/call")
    # Any JSON value: the SDK reads a message whose id is not an integer or a string as a
    # notification, so no id is one the endpoint refuses.
    id: Any = Field(default=None, description="an integer or a string; absent: a notification")
    params: dict[str, Any] | None = None


class JsonRpcErrorObject(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    code: int
    message: str
    data: Any = None


class JsonRpcAnswer(BaseModel):
    """The answer to one request: its `result`, or its `error` (a tool's own failure is a
    result with `isError`)."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    jsonrpc: Literal["2.0"]
    id: int | str | None
    result: dict[str, Any] | None = None
    error: JsonRpcErrorObject | None = None


class JsonRpcError(BaseModel):
    """A JSON-RPC error answering the request with this `id`."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    jsonrpc: Literal["2.0"]
    id: int | str
    error: JsonRpcErrorObject


class McpRefusal(RootModel[models.ErrorEnvelope | JsonRpcError]):
    """A request refused before it was read (the error envelope), or, under the 2026-07-28
    revision of the protocol, a JSON-RPC error answering the request at the status that
    revision gives its code."""

    model_config = ConfigDict(defer_build=True)
