"""A local stack's engine key, and the door that holds moto's server to it.

Loopback is every local user's, and neither engine checks credentials of its own. So a stack
keeps three values in `<data-dir>/engine-key` (owner-only):

* `access_key_id`: what the stack's own processes sign their calls with. DynamoDB Local, which
  checks no signature, files the stack's tables under this id, so it must never leave the
  stack's processes: no URL names it.
* `url_key_id`: what the service's S3 client signs with, so every presigned URL it hands out
  (an upload for a lease token, a download for a reader) names this id. DynamoDB Local holds
  nothing under it.
* `secret`: both ids' secret access key. It leaves no process of the stack: a signature is an
  HMAC of the request under it, and a URL carries the signature alone.

`KeyedApp` sits in front of moto's server and lets through a call only when its SigV4 signature,
in the `Authorization` header or in a presigned URL's query, is one of the two ids' under the
secret, recomputed here over the request as it arrived. A presigned URL is then good for the one
object and method it was signed for, until it expires; an id read from it opens nothing else.

moto serves whatever reaches it, so nothing else may: not a CORS preflight (moto runs OPTIONS
like any method, its admin routes and, named by a header nobody checked, Logs and SQS actions
included: the door answers preflights itself), not moto's own admin routes (a dump of every
object and log line, a reset, a recorder of the stack's signed calls), not a header beside a
signature that the signature does not cover (moto copies an object named by an unsigned
`x-amz-copy-source`, and routes by an `Authorization` header beside a presigned query).
"""

from __future__ import annotations

import calendar
import hmac
import io
import json
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ACCESS_KEY_SHAPE = re.compile(r"TNRL[0-9A-F]{32}")
URL_KEY_SHAPE = re.compile(r"TNRU[0-9A-F]{32}")
SECRET_SHAPE = re.compile(r"[0-9a-f]{64}")
# A signed call's body is read here to check its hash when no header gives one (every service
# but S3, whose calls name theirs): moto's services take nothing near this size.
MAX_HASHED_BODY = 16 * 1024 * 1024
AMZ_DATE = "%Y%m%dT%H%M%SZ"
# How far a header signature's X-Amz-Date may lie from now (AWS allows the same 15 minutes).
CLOCK_SKEW_SECONDS = 15 * 60
# Bodies moto reads as a request's parameters: a presigned request may not carry them.
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})
# moto's own routes: no call of the stack uses them.
MOTO_ADMIN = "/moto-api"
# What a preflight may ask for: the attachments bucket's CORS rule in the template (GET from
# any origin, kept 600 s), which the board's download follows a redirect by.
CORS_METHODS = ("GET",)
CORS_MAX_AGE = "600"
# `AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request, SignedHeaders=a;b,
# Signature=hex`
_HEADER = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<credential>[^,\s]+),\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)
_SIGNATURE_PARAM = re.compile(r"(?:^|&)X-Amz-Signature=[^&]*")


@dataclass(frozen=True)
class EngineKey:
    access_key_id: str
    url_key_id: str
    secret: str

    def __repr__(self) -> str:  # never the secret, in a traceback or a log line
        return f"EngineKey({self.access_key_id}, {self.url_key_id}, secret=…)"

    @classmethod
    def new(cls) -> EngineKey:
        return cls(
            "TNRL" + secrets.token_hex(16).upper(),
            "TNRU" + secrets.token_hex(16).upper(),
            secrets.token_hex(32),
        )

    def dumps(self) -> str:
        fields = {"access_key_id": self.access_key_id, "url_key_id": self.url_key_id}
        return json.dumps({**fields, "secret": self.secret}, indent=2) + "\n"

    @classmethod
    def loads(cls, text: str) -> EngineKey | None:
        """The key `text` holds, or None when it holds no key of this shape."""
        try:
            kept = json.loads(text)
            key = cls(str(kept["access_key_id"]), str(kept["url_key_id"]), str(kept["secret"]))
        except (ValueError, TypeError, KeyError):
            return None
        shaped = (
            ACCESS_KEY_SHAPE.fullmatch(key.access_key_id)
            and URL_KEY_SHAPE.fullmatch(key.url_key_id)
            and SECRET_SHAPE.fullmatch(key.secret)
        )
        return key if shaped else None


def signature_of(environ: dict[str, Any], key_ids: Iterable[str], secret: str) -> bool:
    """True when the WSGI request `environ` is signed (SigV4, in its header or as a presigned
    URL still in date) by one of `key_ids` under `secret`. A body that must be hashed is read
    and put back for whoever serves the call."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    query = environ.get("QUERY_STRING", "")
    if authorization is not None:
        header = _HEADER.fullmatch(authorization.strip())
        if header is None:
            return False
        credential, signed, given = header["credential"], header["signed"], header["signature"]
        stamp = environ.get("HTTP_X_AMZ_DATE", "")
        if not _near_now(stamp):
            return False
        presigned = False
    else:
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            return False
        if "HTTP_TRANSFER_ENCODING" in environ:  # a chunked body would pass a signed length
            return False
        if _body_read_as_parameters(environ):
            return False
        credential = params.get("X-Amz-Credential", "")
        signed = params.get("X-Amz-SignedHeaders", "")
        given = params.get("X-Amz-Signature", "")
        stamp = params.get("X-Amz-Date", "")
        if not _in_date(stamp, params.get("X-Amz-Expires", "")):
            return False
        query = _SIGNATURE_PARAM.sub("", query).lstrip("&")
        presigned = True
    scope = credential.split("/")
    if len(scope) != 5 or scope[4] != "aws4_request" or not stamp.startswith(scope[1]):
        return False
    key_id, _, region, service, _ = scope
    if key_id not in set(key_ids):
        return False
    names = signed.split(";")
    if _unsigned_amz_headers(environ, names):
        return False
    request = _as_signed(environ, names, query, service, presigned)
    if request is None:
        return False
    request.context["timestamp"] = stamp
    kind: Any = S3SigV4QueryAuth if presigned else S3SigV4Auth if service == "s3" else SigV4Auth
    signer = kind(Credentials(key_id, secret), service, region)
    wanted = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return hmac.compare_digest(wanted.encode(), given.encode())


def _unsigned_amz_headers(environ: dict[str, Any], signed: list[str]) -> list[str]:
    """The x-amz-* headers the request carries that its signature does not cover (S3 refuses
    those too: moto would act on them)."""
    covered = {name.lower() for name in signed}
    sent = (key[5:].lower().replace("_", "-") for key in environ if key.startswith("HTTP_"))
    return [name for name in sent if name.startswith("x-amz-") and name not in covered]


def _body_read_as_parameters(environ: dict[str, Any]) -> bool:
    """A presigned request's body that moto would read in place of its signed query: any body
    of a GET, HEAD or DELETE, and a form of any method (moto takes a form's fields as the
    request's parameters: a response type, an object's metadata)."""
    media = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
    if media in FORM_TYPES:
        return True
    bodiless = environ.get("REQUEST_METHOD", "GET") in ("GET", "HEAD", "DELETE")
    return bodiless and environ.get("CONTENT_LENGTH", "") not in ("", "0")


def _signed_at(stamp: str) -> int | None:
    """An X-Amz-Date as epoch seconds (None when it is not one)."""
    try:
        return calendar.timegm(time.strptime(stamp, AMZ_DATE))
    except ValueError:
        return None


def _near_now(stamp: str) -> bool:
    signed_at = _signed_at(stamp)
    return signed_at is not None and abs(time.time() - signed_at) <= CLOCK_SKEW_SECONDS


def _in_date(stamp: str, expires: str) -> bool:
    signed_at = _signed_at(stamp)
    lasts = int(expires) if expires.isdigit() else 0
    return signed_at is not None and lasts > 0 and time.time() <= signed_at + lasts


def _as_signed(
    environ: dict[str, Any], names: list[str], query: str, service: str, presigned: bool
) -> AWSRequest | None:
    """The request as its signer saw it: its method, its path and query as sent, and the
    headers it signed (None when one of them is missing, or its body is too large to hash)."""
    headers: dict[str, str] = {}
    for name in names:
        wsgi = name.upper().replace("-", "_")
        value = environ.get(wsgi if wsgi in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{wsgi}")
        if value is None:
            return None
        headers[name] = value
    if "host" not in headers:
        return None
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
    path = raw.split("?", 1)[0]
    # The path signed must be the path moto serves: a target not starting with `/` would be
    # read here as part of the host, while moto routes on all of it.
    if not path.startswith("/") or unquote(path) != _served_path(environ):
        return None
    url = f"http://{headers['host']}{path}" + (f"?{query}" if query else "")
    body = b""
    hashed = presigned or service == "s3" or "x-amz-content-sha256" in headers
    if not hashed:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length > MAX_HASHED_BODY:
            return None
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        environ["wsgi.input"] = io.BytesIO(body)
    return AWSRequest(
        method=environ.get("REQUEST_METHOD", "GET"), url=url, headers=headers, data=body
    )


def _served_path(environ: dict[str, Any]) -> str:
    """The path moto routes on: the server's decoded PATH_INFO, as text (WSGI hands it over
    as UTF-8 bytes read as latin-1)."""
    return str(environ.get("PATH_INFO", "")).encode("latin-1").decode("utf-8", "replace")


class KeyedApp:
    """moto's app, answering only calls signed with the stack's engine key (see the module's
    docstring). A browser's CORS preflight is answered here; anything else is a 403 in the
    shape its client parses, before moto sees it."""

    def __init__(self, app: Any, key: EngineKey) -> None:
        self.app = app
        self.key_ids = (key.access_key_id, key.url_key_id)
        self.secret = key.secret

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        asked = environ.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD")
        if environ.get("REQUEST_METHOD") == "OPTIONS" and asked:
            headers = environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "").strip()
            return self._preflight(asked, headers, start_response)
        # As moto's own router tells them: any path that starts with it, whatever follows.
        admin = _served_path(environ).lower().startswith(MOTO_ADMIN)
        if not admin and signature_of(environ, self.key_ids, self.secret):
            return self.app(environ, start_response)
        return self._refuse(environ, start_response)

    @staticmethod
    def _preflight(asked: str, headers: str, start_response: Any) -> list[bytes]:
        """A CORS preflight, answered here as the attachments bucket's rule would (a method
        it names, no request headers): it grants nothing alone (the request it precedes is
        checked like any other)."""
        if asked.strip().upper() not in CORS_METHODS or headers:
            message = b"CORS request not allowed: the bucket allows a plain GET alone"
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(message)))],
            )
            return [message]
        start_response(
            "200 OK",
            [
                ("Access-Control-Allow-Origin", "*"),
                ("Access-Control-Allow-Methods", ", ".join(CORS_METHODS)),
                ("Access-Control-Max-Age", CORS_MAX_AGE),
                ("Content-Length", "0"),
            ],
        )
        return []

    @staticmethod
    def _refuse(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        message = (
            "not signed (SigV4) with this stack's engine key, or a presigned URL past its "
            "expiry: the engines answer that key alone"
        )
        if environ.get("HTTP_X_AMZ_TARGET") or "json" in environ.get("CONTENT_TYPE", ""):
            body = json.dumps({"__type": "UnrecognizedClientException", "message": message})
            kind = "application/x-amz-json-1.1"
        else:
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId'
                f"</Code><Message>{message}</Message></Error>"
            )
            kind = "application/xml"
        data = body.encode()
        start_response(
            "403 Forbidden", [("Content-Type", kind), ("Content-Length", str(len(data)))]
        )
        return [data]
