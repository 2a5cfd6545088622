"""Every `tenure` command, in every output mode it offers, against the local stack with real
ids: none may end in a Python traceback or in an exit code outside the CLI's exit-code table.

The commands are found by walking `tenure`'s argparse tree, so a new command fails this test
until it is given a row in COMMANDS (how to run it against the stack) or in HELP_ONLY (why it
gets only `--help`). The commands run in this process through `main()`, their output
captured: a command that crashes raises here, which counts as its traceback. BAD_INPUTS holds
the mistakes an operator makes (an address without its scheme, a misspelled table), each of
which must end in one line `error: …` and its exit code.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tenure_cli import main as tenure_main
from tenure_cli.common import EXIT_CODES, FAILED, OK, USAGE
from tenure_cli.local.stack import TABLE
from tenure_cli.main import main, parser

from tests.conftest import LocalStack
from tests.e2e.support import Api, suffix
from tests.e2e.worker_support import service_url

# The variables the commands read to reach the service or their lease: each run gets only
# those its row gives (the operator's pair by default), never what this process happens to hold.
CLIENT_VARS = (
    "TENURE_API",
    "TENURE_TOKEN",
    "TENURE_WORKER_API",
    "TENURE_LEASE_ID",
    "TENURE_LEASE_TOKEN",
    "TENURE_PAYLOAD_FILE",
    "TENURE_REPORT_MARKER",
    "TENURE_USAGE_FILE",
    "TENURE_PROFILE",
    "XDG_CONFIG_HOME",
)
DOCUMENTED_EXITS = {code for code, _ in EXIT_CODES}
NOTE = "every command\n"  # what the held lease's attachment holds
LONG = {"renew_seconds": 30, "grace_seconds": 3600, "toleration_seconds": 3600}

# Commands given only `--help`, and why they cannot be run here.
HELP_ONLY: dict[str, str] = {
    "local": "runs a whole stack until stopped",
    "worker run": "a worker loop that claims and runs jobs until stopped (test_worker_run.py "
    "drives it as a subprocess)",
    "bench lifecycle": "starts engines of its own and takes tens of seconds",
    "bench cost": "a 240-lease workload on engines of its own: minutes",
    "bench claims": "2,000 leases under 32 claimers on engines of its own: minutes",
    "bench coldstart": "starts fresh interpreters eleven times over: tens of seconds",
    "bench load": "two minutes of load by default (test_load_smoke.py runs a short one)",
}


@dataclass
class Run:
    """One invocation: the arguments after the command's words (`-o MODE` is added), the
    variables it is given on top of the operator's, the exit code it must end with, a check
    of what it printed in table form (None: all is well; else what is wrong), and what to put
    back once it has run."""

    args: list[str]
    env: dict[str, str] | None = None
    exits: int = OK
    check: Callable[[str], str | None] | None = None
    after: Callable[[], None] | None = None


@dataclass
class Held:
    task_id: str
    lease_id: str
    token: str


@dataclass
class Stage:
    """One space of real things for the commands to show and act on, and makers of fresh
    ones for the commands that use theirs up (a cancelled lease cannot be cancelled again)."""

    api: Api  # its clients record every answer, as the tier's other clients do
    admin: httpx.Client
    stack: LocalStack
    tmp: Path
    space: str = ""
    pool: str = ""  # long timings: what is held stays held for the whole walk
    quiet_pool: str = ""  # no worker ever claims here: its pending runs are stranded
    worker_token: str = ""
    worker: httpx.Client | None = None
    held_lease: Held | None = None
    attachment_id: str = ""
    rule_id: str = ""
    topic: str = ""

    # ------------------------------------------------------------------ raw calls

    def post(self, path: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
        client = kw.pop("client", self.admin)
        r = client.post(path, json=body if body is not None else {}, **kw)
        assert r.status_code in (200, 201, 202), (path, r.status_code, r.text)
        return r.json() if r.content else None

    # ----------------------------------------------------------------- set-up

    def build(self) -> Stage:
        self.space = f"X{suffix()}"
        self.post("/spaces", {"key": self.space, "name": "every command"})
        self.pool = self.new_pool(**LONG)
        self.quiet_pool = self.new_pool()
        self.worker_token = self.post(
            "/tokens", {"name": f"w-{suffix().lower()}", "kind": "worker", "pools": [self.pool]}
        )["token"]
        self.worker = self.api.client(self.worker_token)
        self.held_lease = self.held()
        with self.api.client(self.held_lease.token) as lease:
            content = NOTE.encode()
            self.attachment_id = self.post(
                f"/leases/{self.held_lease.lease_id}/attachments",
                {
                    "filename": "note.txt",
                    "content_type": "text/plain",
                    "kind": "file",
                    "byte_size": len(content),
                    "content_base64": base64.b64encode(content).decode(),
                },
                client=lease,
            )["attachment"]["id"]
        self.topic = f"cli.every.{suffix().lower()}"
        self.rule_id = self.new_rule(trigger={"topic": self.topic})
        return self

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()

    # ------------------------------------------------------------------ makers

    def new_pool(self, **fields: Any) -> str:
        name = f"pool-{suffix().lower()}"
        self.post("/pools", {"name": name, "space": self.space, "kind": "command", **fields})
        return name

    def task(self, pool: str | None = None, **fields: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"space": self.space, "title": f"task {suffix()}", **fields}
        if pool is not None:
            body["pool"] = pool
        made: dict[str, Any] = self.post("/tasks", body)
        return made

    def pending(self, pool: str | None = None) -> str:
        """A pending lease's id."""
        return str(self.task(pool or self.pool)["lease"]["id"])

    def held(self) -> Held:
        """A task's run, claimed by a worker and held (toleration of an hour)."""
        lease_id = self.pending()
        won = self.post(
            f"/pools/{self.pool}/claim",
            {"worker_id": "every-command", "lease_id": lease_id},
            client=self.worker,
        )
        assert won["lease"]["id"] == lease_id, won
        return Held(won["lease"]["task"]["id"], lease_id, won["token"])

    def cancelled(self) -> str:
        lease_id = self.pending()
        self.post(f"/leases/{lease_id}/cancel")
        return lease_id

    def block(self, task_id: str, kind: str = "needs_input") -> str:
        made = self.post(f"/tasks/{task_id}/blocks", {"kind": kind, "reason": "waits"})
        return str(made["block"]["id"])

    def blocked_task(self) -> str:
        task_id = str(self.task()["task"]["id"])
        self.block(task_id)
        return task_id

    def escalated(self) -> str:
        """A task in needs_attention: its second error block escalates it."""
        task_id = str(self.task()["task"]["id"])
        self.post(f"/tasks/{task_id}/blocks/{self.block(task_id, 'error')}/clear")
        self.block(task_id, "error")
        return task_id

    def awaiting_approval(self) -> str:
        return str(self.task(self.pool, requires_approval=True)["task"]["id"])

    def new_space(self, archived: bool = False) -> str:
        key = f"X{suffix()}"
        self.post("/spaces", {"key": key, "name": "every command"})
        if archived:
            self.post(f"/spaces/{key}/archive")
        return key

    def paused_pool(self) -> str:
        name = self.new_pool()
        self.post(f"/pools/{name}/pause")
        return name

    def paused_task(self) -> str:
        task_id = str(self.task()["task"]["id"])
        self.post(f"/tasks/{task_id}/pause")
        return task_id

    def address(self, added: bool = False) -> str:
        address = f"every-{suffix().lower()}@inbound.example.com"
        if added:
            self.post(f"/spaces/{self.space}/addresses", {"address": address})
        return address

    def token_id(self) -> str:
        made = self.post("/tokens", {"name": f"r-{suffix().lower()}", "kind": "operator"})
        return str(made["id"])

    def rule_body(self, **fields: Any) -> dict[str, Any]:
        return {
            "space": self.space,
            "name": f"rule-{suffix().lower()}",
            "pool": self.pool,
            "subject": {"kind": "task", "title": "from a rule"},
            "trigger": {"topic": f"cli.every.{suffix().lower()}"},
            **fields,
        }

    def new_rule(self, **fields: Any) -> str:
        return str(self.post("/rules", self.rule_body(**fields))["rule"]["id"])

    def rule_file(self) -> str:
        path = self.tmp / f"rule-{suffix().lower()}.json"
        path.write_text(json.dumps(self.rule_body()))
        return str(path)

    def file(self, name: str, content: str) -> str:
        path = self.tmp / f"{suffix().lower()}-{name}"
        path.write_text(content)
        return str(path)

    def lease_env(self, held: Held) -> dict[str, str]:
        """What `tenure worker run` gives a job besides the API's address: its lease's id and
        its lease token."""
        return {"TENURE_LEASE_ID": held.lease_id, "TENURE_LEASE_TOKEN": held.token}

    def config(self, token_mode: int = 0o600, api: str | None = None) -> dict[str, str]:
        """A config home whose `ops` profile names this stack and the admin token, in a
        token file of `token_mode`: the variables that choose it."""
        home = self.tmp / f"config-{suffix().lower()}"
        (home / "tenure").mkdir(parents=True)
        token = home / "tenure" / "ops.token"
        token.write_text(self.api.admin_token + "\n")
        token.chmod(token_mode)
        address = api or service_url(self.api.base)
        (home / "tenure" / "config.toml").write_text(
            f'[profiles.ops]\napi = "{address}"\ntoken_file = "ops.token"\n'
        )
        return {"XDG_CONFIG_HOME": str(home), "TENURE_PROFILE": "ops"}

    def resume_scheduler(self) -> None:
        self.post("/scheduler/resume")

    @property
    def table_endpoint(self) -> str:
        """The local stack's DynamoDB Local, which holds its table (under its engine key)."""
        return str(self.stack.info()["dynamodb"]["endpoint"])


def _mentions(*wanted: str) -> Callable[[str], str | None]:
    def check(out: str) -> str | None:
        missing = [w for w in wanted if w not in out]
        return f"does not show {missing}" if missing else None

    return check


def _inspect(s: Stage, mode: str | None) -> list[Run]:
    """A stranded task (its diagnostic shown), a held lease, and a task never enqueued."""
    stranded = s.task(s.quiet_pool)["task"]["id"]
    assert s.held_lease is not None
    shows = _mentions("stranded", f"queued with no reachable worker in pool {s.quiet_pool}")
    return [
        Run([stranded], check=shows),
        Run([s.held_lease.lease_id]),
        Run([s.task()["task"]["id"]]),
    ]


def _held(s: Stage) -> Held:
    assert s.held_lease is not None
    return s.held_lease


# How each command runs against the stage, by its words: the arguments for one output mode
# (`mode` is None for a command that offers none). A row may return several runs.
Case = Callable[[Stage, str | None], Run | list[Run]]
COMMANDS: dict[str, Case] = {
    # ------------------------------------------------------------- the tooling
    "dynamodb-local install": lambda s, o: Run([]),
    "email send": lambda s, o: Run(
        [
            s.file("mail.eml", "From: a@example.com\nTo: b@example.com\nSubject: hi\n\nhello\n"),
            "--to",
            s.address(),
            "--data-dir",
            str(s.stack.data_dir),
        ]
    ),
    "admin bootstrap": lambda s, o: Run(
        ["--table", TABLE, "--endpoint", s.table_endpoint, "--name", f"a-{suffix().lower()}"],
        env=s.stack.engine_env(),
    ),
    "admin migrate": lambda s, o: Run(
        ["--table", TABLE, "--endpoint", s.table_endpoint, "--dry-run"], env=s.stack.engine_env()
    ),
    # ------------------------------------------------------- a worker and its job
    "worker claim": lambda s, o: Run(
        ["--pool", s.pool, "--lease", s.pending(), "--worker-id", "every-command"],
        env={"TENURE_TOKEN": s.worker_token},
    ),
    "worker complete": lambda s, o: Run(["--result", '{"ok": true}'], env=s.lease_env(s.held())),
    "worker fail": lambda s, o: Run(["--error", "it broke"], env=s.lease_env(s.held())),
    "worker heartbeat": lambda s, o: Run([], env=s.lease_env(_held(s))),
    "worker payload": lambda s, o: Run([], env=s.lease_env(_held(s))),
    "worker attach": lambda s, o: Run(
        [s.file("report.txt", "a report\n"), "--kind", "report"], env=s.lease_env(_held(s))
    ),
    "worker block": lambda s, o: Run(
        ["--kind", "needs_input", "--reason", "which branch?"], env=s.lease_env(s.held())
    ),
    "worker delegate": lambda s, o: Run(
        ["--title", "a delegated task", "--no-wake-creator"], env=s.lease_env(_held(s))
    ),
    "worker usage": lambda s, o: Run(
        ["--input-tokens", "10", "--cost-amount", "0.5", "--cost-status", "estimated"],
        env={"TENURE_USAGE_FILE": s.file("usage.json", "{}")},
    ),
    # ------------------------------------------------------------------ leases
    "leases list": lambda s, o: [
        Run(["--space", s.space, "--limit", "3"]),
        Run(["--space", s.space, "--limit", "2", "--all", "--state", "dispatched"]),
    ],
    "leases get": lambda s, o: [
        Run([_held(s).lease_id]),
        # Reached through a profile alone: its address and its token file.
        Run(
            [_held(s).lease_id],
            env={**s.config(), "TENURE_API": "", "TENURE_TOKEN": ""},
            check=_mentions(_held(s).lease_id),
        ),
    ],
    "leases cancel": lambda s, o: Run([s.pending()]),
    "leases logs": lambda s, o: Run([_held(s).lease_id]),
    "leases attachments": lambda s, o: Run([_held(s).lease_id]),
    "leases download": lambda s, o: [
        Run([_held(s).lease_id, s.attachment_id, "--to", str(s.tmp / f"{suffix()}.txt")]),
        # To stdout: the bytes themselves, whatever -o says (so only once).
        *(
            [Run([_held(s).lease_id, s.attachment_id, "--to", "-"], check=_mentions(NOTE))]
            if o == "table"
            else []
        ),
    ],
    "leases exec-target": lambda s, o: Run([_held(s).lease_id]),
    "leases release": lambda s, o: Run([s.held().lease_id, "--reason", "moving it"]),
    "leases fail": lambda s, o: Run([s.held().lease_id, s.held().lease_id, "--reason", "stop"]),
    "leases retry": lambda s, o: Run([s.cancelled()]),
    # ------------------------------------------------------------------- tasks
    "tasks create": lambda s, o: Run(
        ["--space", s.space, "--title", "filed", "--pool", s.quiet_pool, "--priority", "7"]
    ),
    "tasks list": lambda s, o: [
        Run(["--space", s.space]),
        Run(["--space", s.space, "--limit", "2", "--all"]),
    ],
    "tasks get": lambda s, o: Run([_held(s).task_id]),
    "tasks update": lambda s, o: Run(
        [s.task()["task"]["id"], "--auto-enqueue-on-ready", "--pool", s.quiet_pool]
    ),
    "tasks pause": lambda s, o: Run([s.task()["task"]["id"]]),
    "tasks resume": lambda s, o: Run([s.paused_task()]),
    "tasks block": lambda s, o: Run(
        [s.task()["task"]["id"], "--kind", "needs_input", "--reason", "which branch?"]
    ),
    "tasks blocks": lambda s, o: Run([s.blocked_task(), "--all"]),
    "tasks unblock": lambda s, o: Run(
        [(t := s.task()["task"]["id"]), s.block(t), "--note", "answered"]
    ),
    "tasks recover": lambda s, o: Run([s.escalated(), "--note", "fixed"]),
    "tasks approve": lambda s, o: Run([s.awaiting_approval(), "--note", "go"]),
    "tasks reject": lambda s, o: Run([s.awaiting_approval(), "--note", "not now"]),
    "tasks cancel": lambda s, o: Run(
        [s.task(s.pool)["task"]["id"], "--reason", "off", "--subtree"]
    ),
    # ------------------------------------------------------------------ spaces
    "spaces create": lambda s, o: Run(
        ["--key", f"X{suffix()}", "--name", "made", "--max-active", "3"]
    ),
    "spaces list": lambda s, o: Run(["--limit", "100"], check=_mentions(s.space)),
    "spaces archive": lambda s, o: Run([s.new_space()]),
    "spaces unarchive": lambda s, o: Run([s.new_space(archived=True)]),
    "spaces address-add": lambda s, o: Run([s.space, s.address()]),
    "spaces address-remove": lambda s, o: Run([s.space, s.address(added=True)]),
    "spaces addresses": lambda s, o: Run([s.space]),
    # ------------------------------------------------------------------- pools
    "pools create": lambda s, o: Run(
        ["--name", f"pool-{suffix().lower()}", "--space", s.space, "--retry-on-failure"]
    ),
    "pools list": lambda s, o: [
        Run(["--space", s.space]),
        Run(["--space", s.space, "--all"], check=_mentions(s.pool, s.quiet_pool)),
    ],
    "pools show": lambda s, o: Run([s.pool]),
    "pools update": lambda s, o: Run(
        [s.quiet_pool, "--display-name", "Quiet", "--keeps-logs", "yes"]
    ),
    "pools pause": lambda s, o: Run([s.new_pool()]),
    "pools resume": lambda s, o: Run([s.paused_pool()]),
    # ----------------------------------------------------------------- workers
    "workers list": lambda s, o: [
        Run(["--pool", s.pool]),
        Run(["--space", s.space, "--limit", "5"]),
    ],
    # ------------------------------------------------------------------ tokens
    "tokens create": lambda s, o: Run(
        ["--name", f"t-{suffix().lower()}", "--kind", "worker", "--pools", s.pool]
    ),
    "tokens list": lambda s, o: Run(["--kind", "worker"]),
    "tokens revoke": lambda s, o: Run([s.token_id()]),
    # --------------------------------------------------------------- scheduler
    # Pausing holds back every claim on the shared stack: each run puts it back at once.
    "scheduler status": lambda s, o: Run([]),
    "scheduler backlog": lambda s, o: Run(["--space", s.space, "--include-paused"]),
    "scheduler pause": lambda s, o: Run([], after=s.resume_scheduler),
    "scheduler resume": lambda s, o: Run([]),
    "scheduler drain": lambda s, o: Run(["--timeout", "0"], after=s.resume_scheduler),
    # ------------------------------------------------------------------- rules
    "rules create": lambda s, o: Run([s.rule_file(), "--space", s.space]),
    "rules list": lambda s, o: Run(["--space", s.space]),
    "rules get": lambda s, o: Run([s.rule_id]),
    "rules enable": lambda s, o: Run([s.rule_id]),
    "rules disable": lambda s, o: Run([s.new_rule()]),
    "rules fire": lambda s, o: Run([s.rule_id]),
    "rules delete": lambda s, o: Run([s.new_rule()]),
    "events post": lambda s, o: Run(
        ["--space", s.space, "--topic", s.topic, "--data", '{"sha": "abc"}']
    ),
    "events send": lambda s, o: Run(
        ["--space", s.space, "--name", "deploy.done", "--key", "v1", "--data", '{"sha": "abc"}']
    ),
    # ----------------------------------------------------------------- inspect
    "inspect": _inspect,
    # -------------------------------------------------------------- completion
    "completion": lambda s, o: [
        Run([shell], check=_mentions("leases", "workers", "completion"))
        for shell in ("bash", "zsh", "fish")
    ],
}


# ------------------------------------------------------------------ the walk


def _tree(
    p: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree (the root, each group, each command) by its words."""
    yield words, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _tree(sub, (*words, name))


def _is_command(p: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)


def _modes(p: argparse.ArgumentParser) -> list[str | None]:
    """The `-o` choices a command offers, or [None] when it has no `-o`."""
    for action in p._actions:
        if "--output" in action.option_strings:
            return list(action.choices or [])
    return [None]


def commands() -> dict[str, list[str | None]]:
    return {
        " ".join(words): _modes(node)
        for words, node in _tree(parser())
        if words and _is_command(node)
    }


@contextlib.contextmanager
def _environ(given: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for name in CLIENT_VARS:
            os.environ.pop(name, None)
        os.environ.update(given)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Ran:
    argv: list[str]
    code: int | str | None
    out: str
    err: str


def invoke(argv: list[str], env: dict[str, str]) -> Ran:
    """`tenure ARGV` in this process, as a shell would see it: exit code, stdout, stderr. An
    exception out of main() is printed to stderr as the interpreter would print it."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    # Text streams with a .buffer, as a real stdout has (`leases download --to -` writes there).
    out = io.TextIOWrapper(out_bytes, encoding="utf-8")
    err = io.TextIOWrapper(err_bytes, encoding="utf-8")
    code: int | str | None
    with _environ(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse: --help, usage errors
            code = 0 if exited.code is None else exited.code
        except Exception:  # what a user would see as a traceback
            err.write(traceback.format_exc())
            code = 1
    out.flush()
    err.flush()
    text = [b.getvalue().decode(errors="replace") for b in (out_bytes, err_bytes)]
    return Ran(argv, code, *text)


def problems(ran: Ran, expected: int) -> str | None:
    if "Traceback (most recent call last)" in ran.out + ran.err:
        return "a traceback"
    if ran.code not in DOCUMENTED_EXITS:
        return f"exit {ran.code!r}, not in the exit-code table"
    if ran.code != expected:
        return f"exit {ran.code}, not {expected}"
    return None


def _is_json(out: str) -> bool:
    """One JSON document, or JSON lines (what a stream of records prints), or nothing."""
    try:
        json.loads(out)
        return True
    except ValueError:
        pass
    try:
        for line in out.splitlines():
            json.loads(line)
    except ValueError:
        return False
    return True


def lists() -> set[str]:
    """The list commands: those that take --limit."""
    return {
        " ".join(words)
        for words, node in _tree(parser())
        if any("--limit" in a.option_strings for a in node._actions)
    }


def _list_shape(out: str) -> str | None:
    """A list's JSON: one object, a list of records under one key, and next_cursor."""
    found = json.loads(out)
    if not isinstance(found, dict) or "next_cursor" not in found or len(found) != 2:
        return "-o json of a list is not {<records>: [...], next_cursor}"
    (key,) = set(found) - {"next_cursor"}
    if not isinstance(found[key], list):
        return f"-o json of a list: {key} is not a list"
    return None


def _report(failures: list[tuple[str, Ran]]) -> str:
    lines = [f"{len(failures)} runs went wrong:"]
    for why, ran in failures:
        lines.append(f"\n$ tenure {' '.join(ran.argv)}  -> {why}")
        lines += [f"  out| {line}" for line in ran.out.splitlines()[-15:]]
        lines += [f"  err| {line}" for line in ran.err.splitlines()[-25:]]
    return "\n".join(lines)


# ------------------------------------------------------------------ the tests


def test_every_command_has_a_row_or_a_reason_it_gets_only_help() -> None:
    found = set(commands())
    assert found, "the walk found no command"
    both = set(COMMANDS) & set(HELP_ONLY)
    assert not both, f"both run and given only --help: {sorted(both)}"
    missing = found - set(COMMANDS) - set(HELP_ONLY)
    assert not missing, (
        f"commands this test does not run: {sorted(missing)}; give each a row in COMMANDS "
        "(how to run it against the stack), or in HELP_ONLY with the reason it cannot run"
    )
    gone = (set(COMMANDS) | set(HELP_ONLY)) - found
    assert not gone, f"rows for commands tenure no longer has: {sorted(gone)}"


@pytest.fixture
def one_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() builds the whole parser tree on every call (tens of milliseconds, a few hundred
    times over here); built once, it parses each command line as a fresh process would."""
    built = parser()
    monkeypatch.setattr(tenure_main, "parser", lambda: built)


def test_every_help_prints_without_a_traceback(one_parser: None) -> None:
    failures = []
    for words, _ in _tree(parser()):
        ran = invoke([*words, "--help"], {})
        why = problems(ran, OK) or (None if ran.out.startswith("usage: ") else "no usage line")
        if why:
            failures.append((why, ran))
    assert not failures, _report(failures)


def test_every_command_in_every_output_mode_against_the_stack(
    api: Api, local_stack: LocalStack, tmp_path: Path, one_parser: None
) -> None:
    operator = {"TENURE_API": service_url(api.base), "TENURE_TOKEN": api.admin_token}
    listing = lists()
    assert {"leases list", "tasks list", "pools list", "workers list"} <= listing
    plan = [
        (name, mode)
        for name, modes in commands().items()
        if name not in HELP_ONLY
        for mode in modes
    ]
    failures: list[tuple[str, Ran]] = []
    with api.admin() as admin:
        stage = Stage(api, admin, local_stack, tmp_path)
        try:
            stage.build()
            # What the runs act on is made first, the calls overlapping; the runs go one by
            # one (they share this process's stdout and environment).
            with ThreadPoolExecutor(max_workers=6) as makers:
                made = list(makers.map(lambda item: COMMANDS[item[0]](stage, item[1]), plan))
            for (name, mode), runs in zip(plan, made, strict=True):
                for run in runs if isinstance(runs, list) else [runs]:
                    argv = [*name.split(), *run.args, *(["-o", mode] if mode else [])]
                    ran = invoke(argv, {**operator, **(run.env or {})})
                    if run.after is not None:
                        run.after()
                    why = problems(ran, run.exits)
                    if why is None and run.check is not None and mode != "json":
                        why = run.check(ran.out)
                    if why is None and mode == "json" and not _is_json(ran.out):
                        why = "-o json printed something that is not JSON"
                    if why is None and mode == "json" and name in listing:
                        why = _list_shape(ran.out)
                    if why:
                        failures.append((why, ran))
        finally:
            stage.resume_scheduler()
            stage.close()
    assert not failures, _report(failures)


# Bad input, each with the exit code it must end with: one line on stderr, `error: …`, and no
# traceback. What was wrong is in the row's own words.
BadInput = Callable[[Stage], tuple[list[str], dict[str, str], int]]
BAD_INPUTS: dict[str, BadInput] = {
    "an address without its scheme": lambda s: (
        ["leases", "get", "lease_x"],
        {"TENURE_API": s.api.base.removeprefix("http://")},
        USAGE,
    ),
    "an address that is one word": lambda s: (
        ["tasks", "list", "--space", s.space],
        {"TENURE_API": "stack"},
        USAGE,
    ),
    "a job's address without its scheme": lambda s: (
        ["worker", "heartbeat"],
        {**s.lease_env(_held(s)), "TENURE_API": "127.0.0.1:8787"},
        USAGE,
    ),
    "a worker's address without its scheme": lambda s: (
        ["worker", "claim", "--pool", s.pool, "--api", "localhost:8787"],
        {"TENURE_TOKEN": s.worker_token},
        USAGE,
    ),
    "a task that does not exist": lambda s: (["inspect", "task_missing"], {}, FAILED),
    "a profile that does not exist": lambda s: (
        ["leases", "get", _held(s).lease_id, "--profile", "nope"],
        s.config(),
        USAGE,
    ),
    "a profile whose token file others may read": lambda s: (
        ["tasks", "list", "--space", s.space],
        {**s.config(token_mode=0o644), "TENURE_API": "", "TENURE_TOKEN": ""},
        USAGE,
    ),
    "a job's command outside a job": lambda s: (["worker", "complete"], {}, USAGE),
    "a table that does not exist": lambda s: (
        ["admin", "migrate", "--table", "no-such-table", "--endpoint", s.table_endpoint],
        s.stack.engine_env(),
        FAILED,
    ),
    "a table that does not exist, bootstrapping": lambda s: (
        ["admin", "bootstrap", "--table", "no-such-table", "--endpoint", s.table_endpoint],
        s.stack.engine_env(),
        FAILED,
    ),
    "a mail file that is not there": lambda s: (
        ["email", "send", str(s.tmp / "missing.eml"), "--data-dir", str(s.stack.data_dir)],
        {},
        FAILED,
    ),
}


def test_bad_input_is_one_error_line_never_a_traceback(
    api: Api, local_stack: LocalStack, tmp_path: Path, one_parser: None
) -> None:
    operator = {"TENURE_API": service_url(api.base), "TENURE_TOKEN": api.admin_token}
    failures: list[tuple[str, Ran]] = []
    with api.admin() as admin:
        stage = Stage(api, admin, local_stack, tmp_path)
        try:
            stage.build()
            for what, row in BAD_INPUTS.items():
                argv, env, exits = row(stage)
                ran = invoke(argv, {**operator, **env})
                lines = ran.err.splitlines()
                why = problems(ran, exits)
                if why is None and not (len(lines) == 1 and lines[0].startswith("error: ")):
                    why = "not one line beginning `error: ` on stderr"
                if why:
                    failures.append((f"{what}: {why}", ran))
        finally:
            stage.close()
    assert not failures, _report(failures)
