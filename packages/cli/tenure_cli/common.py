"""What every `tenure` command shares: exit codes, clients, one-line errors, and output."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tenure_worker.client import Answer, ApiError, Client, OutcomeUnknown, Unreachable

from tenure_cli import profiles

# What `tenure` exits with; `tenure --help` prints this table and docs/cli.md repeats it.
OK = 0
FAILED = 1
USAGE = 2
UNREACHABLE = 3
OUTCOME_UNKNOWN = 4
INTERRUPTED = 130
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (OK, "done"),
    (FAILED, "the service refused the request (its error code is printed), or the command failed"),
    (USAGE, "a usage error: a missing or invalid option, a missing variable, invalid JSON"),
    (UNREACHABLE, "no answer from the service: nothing was applied, or it is safe to run again"),
    (
        OUTCOME_UNKNOWN,
        "a request not safe to repeat was sent and its answer lost: check before running again",
    ),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
)

# The `tenure` command groups, in the order `tenure --help` lists them.
GROUPS: tuple[tuple[str, str], ...] = (
    ("worker", "run commands under leases; report from inside a job"),
    ("leases", "operator: watch and control leases"),
    ("tasks", "operator: file work"),
    ("spaces", "admin: spaces"),
    ("pools", "admin: pools"),
    ("workers", "operator: the workers polling the pools"),
    ("tokens", "admin: tokens"),
    ("admin", "set up and upgrade an instance with your AWS credentials (bootstrap, migrate)"),
    ("scheduler", "the scheduler: status, pause, drain"),
    ("rules", "admin: rules that mint leases (email, events, schedules)"),
    ("events", "member: post an event for inbound rules, or send one blocks wait for"),
)

Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """The command was given something it cannot use; exits with USAGE."""


class Groups:
    """The command groups' subparsers, so that each command module adds its commands to a
    group (`tenure leases logs`, `tenure leases release`) without importing another."""

    def __init__(self, sub: Any) -> None:
        self.top = sub
        self._groups: dict[str, Any] = {}
        for name, help_ in GROUPS:
            group = sub.add_parser(name, help=help_, description=help_)
            self._groups[name] = group.add_subparsers(dest=f"{name}_command", required=True)

    def __getitem__(self, name: str) -> Any:
        return self._groups[name]


def service_options(p: argparse.ArgumentParser, output: str = "table") -> argparse.ArgumentParser:
    """--api, --token, --profile and -o: what every command that calls the service takes."""
    p.add_argument("--api", help="service address (or TENURE_API), e.g. http://127.0.0.1:8787")
    p.add_argument("--token", help="bearer token (or TENURE_TOKEN)")
    p.add_argument(
        "--profile",
        help="a profile of ~/.config/tenure/config.toml (or TENURE_PROFILE): its api and "
        "token_file, when neither the option nor the variable gives them",
    )
    output_option(p, output)
    return p


def output_option(p: argparse.ArgumentParser, default: str = "json") -> argparse.ArgumentParser:
    p.add_argument(
        "-o", "--output", choices=["table", "json"], default=default, help="how to print it"
    )
    return p


# ------------------------------------------------------------------------ inputs


def positive(text: str) -> int:
    """A whole number, 1 or more: the argparse type of every count or length whose 0 the
    service would refuse, or a client would take for the option left out."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text!r}")
    return value


def env(name: str, given: str | None) -> str:
    value = given or os.environ.get(name)
    if not value:
        raise UsageError(f"{name} is not set (and no option gave it)")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def json_arg(text: str | None, what: str) -> Any:
    """`text` as JSON, strictly: Python's parser also reads NaN and Infinity, which no JSON
    body may carry (the request would be refused, or the file written with it unsendable)."""
    if text is None:
        return None
    try:
        return json.loads(text, parse_constant=_not_json)
    except ValueError as err:
        raise UsageError(f"{what} is not valid JSON: {err}") from err


# The user info of an address (`user:password@` before its host), with or without a scheme:
# whatever stands before an `@` ahead of the first `/`, `?` or `#` after the `//`.
_USER_INFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)?[^/?#]*@")


def service_address(value: str, where: str) -> str:
    """`value` if it is an http:// or https:// address; else a usage error naming `where` it
    came from. (Without the scheme the HTTP client fails on it: a bare host with a traceback,
    `host:port` as "unreachable", which says wrongly that running it again might work.)"""
    example = "an address like http://127.0.0.1:8787"
    if _USER_INFO.match(value):
        # The client would take `user:password@host` whole for the host name and say the
        # service is unreachable; and a password there ends up in shell history and in every
        # message that names the address. So it is refused, and never repeated in the refusal.
        shown = _USER_INFO.sub(r"\g<head>***@", value, count=1)
        raise UsageError(
            f"{where}: {shown!r} carries credentials: a token goes in --token (or TENURE_TOKEN, "
            "or a profile's token_file), never in the address"
        )
    if _UNSENDABLE.search(value):
        # Checked before urlsplit, which drops a tab or a newline the client would keep.
        raise UsageError(
            f"{where}: {value!r} is not {example} (it holds a space or control character)"
        )
    try:
        parts = urlsplit(value)
        port = parts.port  # ValueError when not a number, or out of 0-65535
    except ValueError as err:  # an unclosed [IPv6] bracket too
        raise UsageError(f"{where}: {value!r} is not {example} ({err})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where}: {value!r} is not {example}")
    if port == 0:
        # urllib would take port 0 for "none given" and connect to 80 or 443 instead.
        raise UsageError(f"{where}: {value!r} is not {example} (a port is 1 to 65535)")
    why = _unusable_host(unquote(parts.hostname)) or _unusable_path(parts.path + parts.query)
    if why:
        raise UsageError(f"{where}: {value!r} is not {example} ({why})")
    return value


# What http.client refuses in a host or a request line: a space, a control character or DEL.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")


def _unusable_host(host: str) -> str | None:
    """Why the HTTP client cannot use `host`, or None. Read as urllib reads it, %-escapes
    decoded; looked up through the idna codec, which refuses an empty part between dots or one
    of over 63 characters; sent in the Host header as Latin-1 (so `ü` goes, `☃` does not)."""
    if _UNSENDABLE.search(host):
        return "its host holds a space or control character"
    try:
        looked_up = host.encode("idna")
    except UnicodeError as err:  # most often: a part between dots empty or over 63 characters
        return f"its host name cannot be looked up: {err.__cause__ or err}"
    try:
        host.encode("latin-1")
    except UnicodeEncodeError:
        return f"the Host header cannot carry that host: write it as {looked_up.decode()}"
    return None


def _unusable_path(path: str) -> str | None:
    """Why the HTTP client cannot put the address's path (and query) in its request line, or
    None: it sends ASCII only there (other characters go %-escaped)."""
    return None if path.isascii() else "its path is ASCII: write other characters %-escaped"


def _named_profile(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "profile", None) or os.environ.get("TENURE_PROFILE"))


def chosen_api(args: argparse.Namespace) -> tuple[str, str] | None:
    """The service address and where it came from: --api, else TENURE_API, else the profile's
    `api`; None when none gives one."""
    given = getattr(args, "api", None)
    if given:
        return given, "--api"
    if os.environ.get("TENURE_API"):
        return os.environ["TENURE_API"], "TENURE_API"
    profile = profiles.load(getattr(args, "profile", None))
    if profile is not None and profile.api:
        return profile.api, profile.where
    return None


def chosen_token(args: argparse.Namespace) -> str:
    """The bearer token: --token, else TENURE_TOKEN, else the profile's token_file."""
    given = getattr(args, "token", None)
    if given:
        return bearer(given, "--token")
    if os.environ.get("TENURE_TOKEN"):
        return bearer(os.environ["TENURE_TOKEN"], "TENURE_TOKEN")
    profile = profiles.load(getattr(args, "profile", None))
    token = profile.token() if profile is not None else None
    if not token or profile is None:
        raise UsageError("TENURE_TOKEN is not set (and no option or profile gave it)")
    return bearer(token, f"{profile.where}: token_file {profile.token_path()}")


# What every Tenure token is made of: its kind's prefix, then URL-safe characters (a lease
# token's `<lease id>.<secret>` too). A value holding anything else was never a token, and some
# of it must never be sent: a line break ends the Authorization header and starts one of the
# value's choosing (after a space http.client even sends it, as a folded line), and a character
# beyond Latin-1 has no bytes in a header at all.
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")


def bearer(token: str, where: str) -> str:
    """`token` if a token could be it; else a usage error naming `where` it came from, and
    never the token itself (a token is never printed: the mistyped one may be most of one)."""
    if not _TOKEN.fullmatch(token):
        raise UsageError(
            f"{where}: the token holds characters a token never has (only letters, digits, "
            "'_', '.' and '-'); it is not shown here"
        )
    return token


# What a 500 is, in the error table of docs/api.md: the service's own failure (a bug).
SERVER_ERROR = 500


class ServiceClient(Client):
    """The SDK's client, telling a service that answered 500 through every retry from one
    that gave no answer. The SDK retries a 500 (it may pass) and then raises Unreachable, which
    would exit 3: "no answer", run it again as it is. But a 500 is an answer — the service's
    internal_error — so it ends as that refusal (exit 1, its code printed). A request not safe
    to repeat answered 500 stays OutcomeUnknown (exit 4): it may have been applied."""

    def __init__(self, api: str, token: str, **options: Any) -> None:
        super().__init__(api, token, **options)
        self._last: Answer | None = None  # the last attempt's answer; None: it got none
        sent = self.transport

        def remembered(
            method: str, url: str, headers: dict[str, str], data: bytes | None, timeout: float
        ) -> Answer:
            self._last = None  # stays None when this attempt gets no answer
            answer = sent(method, url, headers, data, timeout)
            self._last = answer
            return answer

        self.transport = remembered

    def call(self, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        self._last = None
        try:
            return super().call(method, path, *args, **kwargs)
        except OutcomeUnknown:
            raise
        except Unreachable:
            last = self._last
            if last is None or last.status != SERVER_ERROR:
                raise
            raise _server_error(method, path, last) from None


def _server_error(method: str, path: str, answer: Answer) -> ApiError:
    """The service's error of a 500, its envelope's code and message when it carries one."""
    try:
        envelope = json.loads(answer.body)["error"]
        code, message = str(envelope["code"]), str(envelope["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "internal_error", answer.body.decode(errors="replace")[:200]
    said = " ".join(message.split()) or "no message"
    return ApiError(answer.status, code, f"{said} ({method} {path}: HTTP {answer.status})")


def operator_client(args: argparse.Namespace) -> Client:
    if _named_profile(args):
        profiles.load(getattr(args, "profile", None))  # a misspelled name is said, always
    found = chosen_api(args)
    if found is None:
        raise UsageError("TENURE_API is not set (and no option or profile gave it)")
    return ServiceClient(service_address(*found), chosen_token(args))


def lease_client(worker_routes: bool = True) -> tuple[Client, str, str]:
    """Inside a job: a client on the job's own lease token, the lease's id and that token.
    For the worker routes (reports, payload, attachments) the worker endpoint when the worker
    runs on one (TENURE_WORKER_API); for any other route (`worker_routes=False`: filing a
    task, blocking one) the API, which the worker endpoint does not stand in for."""
    chosen = os.environ.get("TENURE_WORKER_API") if worker_routes else None
    api = service_address(
        chosen or env("TENURE_API", None), "TENURE_WORKER_API" if chosen else "TENURE_API"
    )
    lease_id = env("TENURE_LEASE_ID", None)
    token = bearer(env("TENURE_LEASE_TOKEN", None), "TENURE_LEASE_TOKEN")
    return ServiceClient(api, token), lease_id, token


def mark_reported() -> None:
    """Tell the runner the job reported its lease itself, so it sends no report of its own."""
    marker = os.environ.get("TENURE_REPORT_MARKER")
    if marker:
        Path(marker).write_text("reported\n")


def usage_file() -> Path:
    """Where `worker usage` keeps the job's usage until its completion sends it."""
    given = os.environ.get("TENURE_USAGE_FILE")
    if given:
        return Path(given)
    marker = os.environ.get("TENURE_REPORT_MARKER")
    if marker:
        return Path(marker.removesuffix(".reported") + ".usage")
    raise UsageError("no usage file: run inside a job, or set TENURE_USAGE_FILE")


def noted_usage() -> dict[str, Any] | None:
    """The usage noted so far by `worker usage`, or None."""
    try:
        path = usage_file()
    except UsageError:
        return None
    if not path.exists():
        return None
    found = json.loads(path.read_text())
    return found if isinstance(found, dict) else None


# ------------------------------------------------------------------------ output

# What a terminal would act on rather than show: C0 controls but tab and newline (ESC starts
# the sequences that move the cursor, retitle the window or write the clipboard), DEL, and
# the C1 controls (U+0080-U+009F; U+009B is a one-character CSI). Anything a service answers
# may hold them — a task title, an email's subject — so they never reach the terminal.
# So are the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069):
# they reorder what follows them on screen, so `report\u202etxt.exe` reads as `reportexe.txt`.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# In a table cell, the two kept above are written as escapes: a cell is one line, and a title
# holding a newline would otherwise print a row of its own, one that no task has.
_CELL_BREAKS = str.maketrans({"\n": "\\n", "\t": "\\t"})


def printable(text: str) -> str:
    """`text` without the terminal control characters (tab and newline kept)."""
    return _CONTROLS.sub("", text)


def cell(value: Any) -> str:
    """A table cell: printable, on one line."""
    return "" if value is None else printable(str(value)).translate(_CELL_BREAKS)


def say(text: str, err: bool = False) -> None:
    print(printable(text), file=sys.stderr if err else sys.stdout)


def _dig(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def table(rows: list[dict[str, Any]], args: argparse.Namespace, cols: list[str]) -> int:
    if args.output == "json":
        # ensure_ascii writes every control character as a \u escape.
        print(json.dumps(rows, indent=2))
        return OK
    cells = [[cell(_dig(r, c)) for c in cols] for r in rows]
    # A column named by a path into the record (`task.key`) is headed by its last name (KEY).
    heads = [c.rsplit(".", 1)[-1].upper() for c in cols]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    say("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip())
    for row in cells:
        say("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return OK


def show(answer: Any, args: argparse.Namespace) -> int:
    if getattr(args, "output", "table") == "json" or not isinstance(answer, dict):
        print(json.dumps(answer, indent=2))
        return OK
    # An answer wrapping a lease or a task prints that record (the task when it has both);
    # a field that merely has one of those names (inspect's "task": "OPS-1 ready") is a field.
    lease, task = answer.get("lease"), answer.get("task")
    record = answer
    if isinstance(task, dict) and task and ("lease" in answer or not lease):
        record = task
    elif isinstance(lease, dict) and lease:
        record = lease
    width = max((len(k) for k in record), default=0)
    for key, value in record.items():
        if key == "token":
            continue  # printed once below, with its warning
        shown = json.dumps(value) if isinstance(value, dict | list) else value
        say(f"{key.ljust(width)}  {'' if shown is None else shown}")
    if "token" in answer and isinstance(answer["token"], str):
        say(f"{'token'.ljust(width)}  {answer['token']}   (shown once: keep it now)")
    return OK


def done(record: dict[str, Any], line: str, args: argparse.Namespace) -> int:
    """What a command whose request the service answers with nothing (204) prints: the
    record of what was done under -o json, a line of words under -o table."""
    if getattr(args, "output", "table") == "json":
        print(json.dumps(record, indent=2))
    else:
        say(line)
    return OK


def fields(rows: list[tuple[str, list[str]]]) -> int:
    """Named values, one name a row and its value beside it; a value of several lines (a
    list of findings) goes on below, under the first, so each finding reads on its own."""
    width = max((len(name) for name, _ in rows), default=0)
    for name, lines in rows:
        for n, line in enumerate(lines or [""]):
            say(f"{(name if n == 0 else '').ljust(width)}  {line}".rstrip())
    return OK


# ------------------------------------------------------------------------ errors

CHECK_BEFORE_RETRYING = "look at the service's state before running it again"


def guarded(fn: Command, check: str = CHECK_BEFORE_RETRYING) -> Command:
    """Errors as one line on stderr and an exit code from EXIT_CODES, never a traceback.

    `check` says how to find out whether a request whose answer was lost was applied; it is
    formatted with the command's arguments (`{space}`)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ApiError as err:
            say(f"error: {err.code}: {err.message}", err=True)
            return FAILED
        except OutcomeUnknown as err:
            hint = check.format(**vars(args))
            say(
                f"error: outcome unknown: {err} (the request was sent and may have been "
                f"applied; it was not sent again): {hint}",
                err=True,
            )
            return OUTCOME_UNKNOWN
        except Unreachable as err:
            say(f"error: unreachable: {err}", err=True)
            return UNREACHABLE
        except UsageError as err:
            say(f"error: {err}", err=True)
            return USAGE
        except profiles.ConfigError as err:
            say(f"error: {err.code}: {' '.join(err.message.split())}", err=True)
            return USAGE

    return run


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def duration_seconds(text: str) -> int:
    """`90`, `90s`, `5m`, `2h`, `1d` → seconds (what every `--expires-in` takes)."""
    found = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if not found:
        raise UsageError(f"--expires-in: {text!r} is not a duration like 90s, 5m, 2h or 1d")
    return int(found.group(1)) * _UNITS[found.group(2) or "s"]
