"""The bearer token of a request's headers: read by the authorizer and, where it could not
decide, by the API function. Its own module so the API function does not load the
authorizer's event classes to read one header."""

from __future__ import annotations

from collections.abc import Mapping


def bearer(headers: Mapping[str, str] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            scheme, _, token = value.strip().partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None
