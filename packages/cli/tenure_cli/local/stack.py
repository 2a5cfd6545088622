"""`tenure local`: the whole service on 127.0.0.1, on DynamoDB Local and moto."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenure import wiring
from tenure.config import ENVIRONMENT, LocalSettings, export, local_settings

from tenure_cli.local import lambda_host
from tenure_cli.local.claimhost import ClaimHost
from tenure_cli.local.engine_key import ACCESS_KEY_SHAPE, EngineKey
from tenure_cli.local.engines import (
    MOTO_SERVICES,
    DynamoDBLocal,
    EngineUnavailable,
    MotoServer,
    owner_only,
    use_engine_key,
)
from tenure_cli.local.faults import fault_file
from tenure_cli.local.frontdoor import FrontDoor, claim_lane
from tenure_cli.local.inbound_poller import InboundPoller
from tenure_cli.local.provision import REGION, Provisioned, Provisioner
from tenure_cli.local.scheduler_loop import SchedulerLoop
from tenure_cli.local.streams import StreamPump
from tenure_cli.stack_record import (
    LOCK_FILE,
    STACK_FILE,
    forget_own_record,
    lock_held,
    record_path,
)

TABLE = "tenure"
# The stack's engine key, kept in its data dir: the one key its engines answer.
ENGINE_KEY_FILE = "engine-key"
STREAM_POLL_SECONDS = 0.2
# Scheduler fires on whole minutes; a tick this often fires each time within seconds.
SCHEDULER_TICK_SECONDS = 2.0
# How often the main thread wakes to run a pending SIGTERM or SIGINT handler.
SIGNAL_POLL_SECONDS = 0.5
# A command that asks whether a stack runs holds the lock shared for an instant: a start that
# meets that tries again, a bounded number of times, before it calls the data dir in use.
HOLD_TRIES = 5
HOLD_RETRY_SECONDS = 0.1
# What a stack writes in its data dir, besides its engine's logs (`dynamodb-local-<port>.log`)
# and a half-written file's `.<name>.part`. --reset empties only a data dir that holds nothing
# else, and only such a dir is closed to group and others.
STACK_ENTRIES = frozenset({LOCK_FILE, STACK_FILE, "admin-token", ENGINE_KEY_FILE, "dynamodb"})


class StartFailed(RuntimeError):
    """A start that cannot go on, with the cause in words a user can act on."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM while starting. A BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way (an engine's readiness poll) can swallow it."""


def one_line(err: BaseException) -> str:
    """The cause of a failed start, on one line."""
    text = " ".join(str(err).split())
    if type(err).__module__.startswith("tenure."):  # ours already say what went wrong
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


@dataclass
class Stack:
    port: int
    data_dir: Path
    sweep_interval: float
    engines: list[Any] = field(default_factory=list)
    provisioned: list[Provisioned] = field(default_factory=list)
    door: FrontDoor | None = None
    worker_door: FrontDoor | None = None  # the worker function's URL
    claim_door: FrontDoor | None = None  # the claim function's URL (and the API's claims)
    stopping: threading.Event = field(default_factory=threading.Event)
    admin_token: str | None = None  # the one bootstrapped, once started
    # --verbose: a line per request and the handlers' INFO logs (a claim, a sweeper pass);
    # without it the stack prints its banner and then only what went wrong.
    verbose: bool = False
    outbound_events: str = "endings"  # the template's OutboundEvents, as a deploy would set it
    held: int | None = None  # the open lock file that holds the data dir for this stack
    engine_key: EngineKey | None = None  # the key the engines answer alone (see _engine_key)

    def hold_data_dir(self) -> None:
        """Hold the data dir for this stack alone, or StartFailed naming the process that
        holds it. Two stacks on one data dir would run two DynamoDB Locals on one table file,
        and the second would replace the first's stack.json and admin token (or, with
        --reset, delete its data under it). The hold is an exclusive lock on
        `<data-dir>/.lock`, which ends with the process however it ends: a killed stack
        leaves no lock to clear by hand. A data dir that is a file is left to the start's
        own refusal."""
        if self.data_dir.exists() and not self.data_dir.is_dir():
            return
        _close(self.data_dir)
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            _lock(fd)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StartFailed(
                f"the data dir {self.data_dir} is in use by another tenure local (pid "
                f"{holder}): stop that one, or give this one another --data-dir"
            ) from None
        except OSError as err:  # a file system without locks (some network and VM mounts)
            os.close(fd)
            print(
                f"warning: cannot lock the data dir {self.data_dir} ({err.strerror or err}): "
                "a second tenure local there would not be refused",
                file=sys.stderr,
                flush=True,
            )
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.held = fd

    def start(self) -> dict[str, Any]:
        """Everything up, or an exception; stop() then ends whatever had started."""
        cfg = local_settings()
        self._prepare(cfg)
        door, worker_door, claim_door = self._open_doors()
        print(
            "starting moto's server, DynamoDB Local, the template's resources and the "
            "front door (about 10 s)…",
            flush=True,
        )
        door.lanes = (claim_lane(claim_door.workers),)
        key = self.engine_key
        assert key is not None, "_prepare reads it"
        moto, endpoint, engine = self._start_engines(cfg, key)
        claim_url = f"http://127.0.0.1:{claim_door.port}/"
        resources, inbound_queue = self._provision(endpoint, moto, claim_url)
        token_file = self._bootstrap()
        door.start()
        worker_door.start()
        claim_door.start()
        threading.Thread(target=self._sweep_loop, daemon=True).start()
        threading.Thread(target=self._stream_loop, args=(endpoint,), daemon=True).start()
        threading.Thread(target=self._scheduler_loop, daemon=True).start()
        threading.Thread(target=self._inbound_loop, args=inbound_queue, daemon=True).start()
        info = {
            "api": f"http://127.0.0.1:{door.port}/api/v1",
            "worker_api": f"http://127.0.0.1:{worker_door.port}/api/v1",
            "worker_claim_api": f"{claim_url}api/v1",
            "dynamodb": {"engine": engine, "endpoint": endpoint},
            "aws": {
                "endpoint": moto.endpoint,
                "region": REGION,
                # What the engines answer alone: calls signed with this key (the file
                # engine-key also holds the id the service's presigned URLs name).
                "access_key_id": key.access_key_id,
                "secret_access_key": key.secret,
                "resources": resources,
                "services": " ".join(MOTO_SERVICES),
            },
            "data_dir": str(self.data_dir),
            "admin_token_file": str(token_file) if token_file else None,
            "sweep_interval_seconds": self.sweep_interval,
            "pid": os.getpid(),
        }
        # Owner-only, like the admin token: it holds the engine key and its secret.
        text = json.dumps(info, indent=2) + "\n"
        _write_atomically(record_path(self.data_dir), text, mode=0o600)
        return info

    def _prepare(self, cfg: LocalSettings) -> None:
        """The log level, the test faults, and a data dir of its owner's alone with no
        stack.json left from an earlier run."""
        # Before any handler module is imported here or in a worker process: Powertools reads
        # the level when each module makes its logger. A level the caller set is kept.
        if "POWERTOOLS_LOG_LEVEL" not in os.environ:
            export("POWERTOOLS_LOG_LEVEL", "INFO" if self.verbose else "WARNING")
        if cfg.test_faults_file:  # a stack started by the reliability tests: throttle on cue
            from tenure_cli.local.faults import hook_faults

            hook_faults(cfg.test_faults_file)
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise StartFailed(f"the data dir {self.data_dir} is a file, not a directory")
        _close(self.data_dir)
        # A stack.json left by an earlier run names engines that are gone: it comes back only
        # once this start has succeeded.
        record_path(self.data_dir).unlink(missing_ok=True)
        self.engine_key = self._engine_key()
        use_engine_key(self.engine_key)

    def _open_doors(self) -> tuple[FrontDoor, FrontDoor, FrontDoor]:
        """The three listeners, bound but not serving yet: the API's, the worker function's
        URL and the claim function's URL."""
        # Bind the API's port first: the engines pick free ports, and one could otherwise take
        # the very port a restart asks for in the moment it is free.
        try:
            self.door = FrontDoor("127.0.0.1", self.port, log_requests=self.verbose)
        except OSError as err:
            raise StartFailed(
                f"cannot listen on 127.0.0.1:{self.port}: {err.strerror or err} "
                "(another tenure local? choose another --port)"
            ) from err
        # The worker endpoint, as a function URL: the worker function's own handler, no
        # authorizer in front, on a free port (stack.json names it), so stacks run side by side.
        self.worker_door = FrontDoor(
            "127.0.0.1",
            0,
            invoke=lambda_host.invoke_worker,
            warm=lambda_host.warm_worker,
            log_requests=self.verbose,
        )
        # The claim function: its own URL and processes, which the API listener's claims run
        # on too (the template's claim route), so long polls hold neither the API's processes
        # nor the worker function's; a waiting claim parks a thread there (claimhost.py).
        self.claim_door = FrontDoor(
            "127.0.0.1",
            0,
            invoke=lambda_host.invoke_claim,
            warm=lambda_host.warm_worker,
            workers=ClaimHost(),
            log_requests=self.verbose,
        )
        return self.door, self.worker_door, self.claim_door

    def _start_engines(self, cfg: LocalSettings, key: EngineKey) -> tuple[MotoServer, str, str]:
        """moto's server and DynamoDB Local (or moto for DynamoDB too, when allowed), both
        held to `key`: moto, the DynamoDB endpoint and which engine serves it."""
        # Each engine is listed before it starts, so that stop() ends one that failed halfway.
        moto = MotoServer(key=key)
        self.engines.append(moto)
        moto.start()
        engine = "dynamodb-local"
        try:
            ddb = DynamoDBLocal(
                Path(cfg.cache_dir),
                self.data_dir / "dynamodb",
                key=key.access_key_id,
            )
            self.engines.append(ddb)
            ddb.start()
            endpoint = ddb.endpoint
        except EngineUnavailable as why:
            if cfg.require_engines:
                raise
            print(f"WARNING: {why}", file=sys.stderr)
            print(
                "WARNING: falling back to moto for DynamoDB: data is lost on restart and "
                "conditional writes are not atomic across threads",
                file=sys.stderr,
            )
            endpoint, engine = moto.endpoint, "moto"
        return moto, endpoint, engine

    def _provision(
        self, endpoint: str, moto: MotoServer, claim_url: str
    ) -> tuple[dict[str, Any], tuple[str, str]]:
        """The template's resources made, the handlers' settings exported: the resources and
        the inbound queue (its URL and ARN)."""
        export("TENURE_TABLE", TABLE)
        export("TENURE_SWEEP_INTERVAL_SECONDS", str(self.sweep_interval))
        export("TENURE_DYNAMODB_ENDPOINT", endpoint)
        # The handlers talk to the region the resources were made in, whatever the shell says.
        export("AWS_REGION", REGION)
        export("AWS_DEFAULT_REGION", REGION)
        provisioner = Provisioner(
            endpoint,
            moto.endpoint,
            TABLE,
            "tenure-local",
            {"ClaimFunction": claim_url},
            {"OutboundEvents": self.outbound_events},
        )
        self.provisioned = provisioner.run()
        resources = provisioner.stack_resources()
        self._export_function_settings(provisioner, moto.endpoint)
        inbound_queue = (resources["inbound_queue_url"], provisioner.arns["InboundQueue"]["Arn"])
        # Attachments and lease logs go to moto's S3 and CloudWatch Logs.
        export("TENURE_ATTACHMENTS_BUCKET", resources["attachments_bucket"])
        export("TENURE_LOG_GROUP", resources["log_group"])
        export("TENURE_AWS_ENDPOINT", moto.endpoint)
        return resources, inbound_queue

    def _bootstrap(self) -> Path | None:
        """The admin token bootstrapped, the table migrated, the schedules re-made: the
        admin token's file, if it has one."""
        store = wiring.build_store()
        admin_token, token_file = self._admin_token()
        wiring.build_service(store).tokens.bootstrap_admin(admin_token)
        self.admin_token = admin_token
        self._migrate(store)
        # moto forgets schedules on restart; the rules in DynamoDB Local do not.
        remade = wiring.build_service(store).rules.resync_schedules()
        if remade:
            print(f"re-made the schedules of {remade} scheduled rules")
            # Occasions missed while the stack was stopped, within each rule's catch-up window.
            wiring.build_service(store).firings.catch_up()
        return token_file

    @staticmethod
    def _migrate(store: Any) -> None:
        """The local table is migrated at every start, as `tenure admin migrate` does a
        deployed one (a data directory kept from an older release is brought up to date; a
        fresh table only records its version)."""
        from tenure.app.migrations import SchemaTooNew, migrate

        try:
            outcomes = migrate(store)
        except SchemaTooNew as newer:
            print(f"WARNING: {newer}", file=sys.stderr)
            return
        for outcome in outcomes:
            if outcome.status == "applied" and outcome.counts.get("listed"):
                print(f"migrated: {outcome.name} {outcome.counts}")

    def _engine_key(self) -> EngineKey:
        """The data dir's engine key, made at its first start and kept: DynamoDB Local files
        the tables under its access key id, so a restart must use the same one. An earlier
        release kept a bare access key id, which its presigned URLs named and its engines took
        without a secret: that one is retired for a new key (DynamoDB Local moves its tables
        to the new id as it starts)."""
        path = self.data_dir / ENGINE_KEY_FILE
        if path.exists() or path.is_symlink():
            text = _kept_secret(path, ENGINE_KEY_FILE)
            kept = EngineKey.loads(text)
            if kept is not None:
                return kept
            if not ACCESS_KEY_SHAPE.fullmatch(text):
                raise StartFailed(
                    f"{path} does not hold an engine key; remove it (the tables it filed are "
                    "lost with it), or give another --data-dir"
                )
        key = EngineKey.new()
        _write_atomically(path, key.dumps(), mode=0o600)
        return key

    def _admin_token(self) -> tuple[str, Path | None]:
        given = local_settings().admin_token
        if given:
            return given, None
        path = self.data_dir / "admin-token"
        if path.exists() or path.is_symlink():
            return _kept_secret(path, "admin-token"), path
        raw = "tnr_o_" + wiring.RandomIds().secret()
        _write_atomically(path, raw + "\n", mode=0o600)
        # Its path, not the token: what is printed ends up in terminals' scrollback and CI logs.
        print(f"new admin token in {path} (readable by you alone)")
        return raw, path

    def _sweep_loop(self) -> None:
        """Stands in for the sweeper's rate(1 minute) schedule."""
        from tenure.triggers.sweep import run_pass

        faults_file = local_settings().test_faults_file
        faults = fault_file(faults_file) if faults_file else None
        while not self.stopping.wait(self.sweep_interval):
            if faults is not None and faults.sweeper_paused():
                continue  # a test stands in for a sweeper outage (tenure_cli.local.faults)
            try:
                # Nothing here publishes the pools' depth gauges (CloudWatch metrics on AWS):
                # a pass leaves out their reads, 2 of its 4 or 5 queries a pool, which at a pass
                # a second and a few hundred pools kept DynamoDB Local busy even when idle.
                run_pass(gauges=False)
            except Exception as err:
                print(f"[sweeper] pass failed: {err!r}", file=sys.stderr, flush=True)

    def _stream_loop(self, endpoint: str) -> None:
        """Stands in for the reactor's DynamoDB stream trigger."""
        pump = StreamPump(endpoint, TABLE, wiring.build_store())
        while not self.stopping.wait(STREAM_POLL_SECONDS):
            try:
                pump.pump_once()
            except Exception as err:
                print(f"[reactor] stream read failed: {err!r}", file=sys.stderr, flush=True)

    def _export_function_settings(self, provisioner: Provisioner, aws_endpoint: str) -> None:
        """Settings the template sets on one function, as it resolves here (one process
        plays every function, so each is exported once for all)."""
        for variable, source in ENVIRONMENT.values():
            if source.startswith("template:"):
                env = provisioner.function_environment(source.split(":", 1)[1])
                export(variable, env[variable])
        # The AWS clients the functions make reach moto; DynamoDB keeps its own endpoint.
        for service in ("SCHEDULER", "S3", "SQS", "SNS"):
            export(f"AWS_ENDPOINT_URL_{service}", aws_endpoint)

    def _inbound_loop(self, queue_url: str, queue_arn: str) -> None:
        """Stands in for the inbound function's SQS event source."""
        import boto3
        from tenure.triggers.inbound.handler import handle

        sqs = boto3.client("sqs", region_name=REGION)
        poller = InboundPoller(sqs, queue_url, queue_arn, handle)
        while not self.stopping.is_set():
            try:
                poller.poll_once(wait_seconds=1)
            except Exception as err:
                print(f"[inbound] poll failed: {err!r}", file=sys.stderr, flush=True)
                self.stopping.wait(1.0)

    def _scheduler_loop(self) -> None:
        """Stands in for EventBridge Scheduler invoking the scheduler function."""
        from tenure.triggers.rule_schedule import handle

        schedules = wiring.build_schedules()
        if schedules is None:
            print("[scheduler] no schedule settings; rules' schedules will not fire", flush=True)
            return
        loop = SchedulerLoop(schedules, lambda event: handle(event, None))
        while not self.stopping.wait(SCHEDULER_TICK_SECONDS):
            try:
                loop.tick(datetime.now(UTC))
            except Exception as err:
                print(f"[scheduler] tick failed: {err!r}", file=sys.stderr, flush=True)

    def stop(self) -> bool:
        """End every part that started, each even when another fails; False if one did.
        The record of its endpoints goes first: no command finds a stack that is going."""
        self.stopping.set()
        forget_own_record(self.data_dir)
        doors = (self.door, self.worker_door, self.claim_door)
        parts: list[Any] = [door for door in doors if door is not None]
        parts += reversed(self.engines)
        clean = True
        for part in parts:
            try:
                part.stop()
            except Exception as err:  # reported, and the next part is still stopped
                print(f"error: stopping {type(part).__name__}: {one_line(err)}", file=sys.stderr)
                clean = False
        if self.held is not None:  # only once every part is down may another start begin
            os.close(self.held)
            self.held = None
        return clean


def _lock(fd: int) -> None:
    """An exclusive lock on `fd`, tried HOLD_TRIES times; BlockingIOError while another
    process holds the file."""
    for _ in range(HOLD_TRIES - 1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(HOLD_RETRY_SECONDS)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _kept_secret(path: Path, name: str) -> str:
    """The secret (admin token, engine key) an earlier start kept at `path`, closed to group
    and others (an earlier release made the token 0644). Opened without following a link and
    taken only from a file of this user's: a link, or a file someone else put in a data dir
    others may write to, would make the stack chmod a file elsewhere or adopt a secret its
    planter knows."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise StartFailed(f"{path}: {name} is a symbolic link; not following it") from None
        raise StartFailed(f"{path}: cannot read {name} ({err.strerror})") from None
    with os.fdopen(fd) as kept:
        seen = os.fstat(fd)
        if not stat.S_ISREG(seen.st_mode) or seen.st_uid != os.geteuid():
            raise StartFailed(
                f"{path}: {name} is not a file of yours; remove it, or give another --data-dir"
            )
        if stat.S_IMODE(seen.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
        return kept.read().strip()


def _write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Readers (and the next start) see the whole file or none, even if this one dies. The
    file is created with `mode` (the umask may only narrow it), never opened wider first: a
    file made with the umask's mode and narrowed afterwards can be opened by anyone in
    between, and an open file stays readable after a chmod."""
    part = path.with_name(f".{path.name}.part")
    part.unlink(missing_ok=True)  # left by a start that died while writing it
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    part.replace(path)


def _reset(data_dir: Path) -> None:
    """Everything in the data dir but the lock this stack holds it by: a start that removed
    the lock file would leave the next start a new one to lock beside this stack."""
    if data_dir.exists() and not data_dir.is_dir():
        raise StartFailed(f"--reset: {data_dir} is a file, not a data dir; not removing it")
    kept = [e for e in data_dir.iterdir() if e.name != LOCK_FILE] if data_dir.exists() else []
    if not kept:
        return
    foreign = foreign_entries(data_dir)
    if foreign:  # a home, a checkout, /tmp: given by mistake, and never a stack's to empty
        shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
        raise StartFailed(
            f"--reset: {data_dir} holds what tenure local does not write ({shown}); not "
            "removing anything: give --reset the data dir of a stack"
        )
    _refuse_a_running_neighbour(data_dir)
    for entry in kept:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    print(f"reset: removed {data_dir}")


def foreign_entries(data_dir: Path) -> list[str]:
    """The names in `data_dir` that no stack writes, sorted."""
    if not data_dir.is_dir():
        return []
    return sorted(e.name for e in data_dir.iterdir() if not _a_stack_s(e.name))


def _a_stack_s(name: str) -> bool:
    return (
        name in STACK_ENTRIES
        or (name.startswith("dynamodb-local-") and name.endswith(".log"))
        or (name.startswith(".") and name.endswith(".part"))
    )


def _close(data_dir: Path) -> None:
    """Make the data dir if missing and close it to group and others: the table's file, the
    admin token and the logs are in it. A directory that also holds what no stack writes (a
    /tmp, a home, a checkout) keeps its mode: narrowing a /tmp would lock every other user out
    of it, and every file a stack writes is its owner's alone already."""
    if not foreign_entries(data_dir):
        owner_only(data_dir)


def _refuse_a_running_neighbour(data_dir: Path) -> None:
    """StartFailed when emptying `data_dir` would delete from under another running stack:
    its own lock covers only its own directory, so a running stack's lock is looked for in
    every directory above this one and below it. Stopped stacks' lock files are no obstacle."""
    here = data_dir.resolve()
    for outer in here.parents:
        if lock_held(outer):
            raise StartFailed(
                f"--reset: {data_dir} is inside the data dir {outer} of a running tenure "
                "local; not removing it"
            )
    for place, _, files in os.walk(here):  # symlinks are removed, never followed
        inner = Path(place)
        if inner != here and LOCK_FILE in files and lock_held(inner):
            raise StartFailed(
                f"--reset: {data_dir} holds the data dir {inner} of a running tenure local; "
                "not removing it"
            )


def run(
    port: int,
    data_dir: Path,
    sweep_interval: float,
    reset: bool,
    show_admin_token: bool = False,
    verbose: bool = False,
    outbound_events: str = "endings",
) -> int:
    stack = Stack(
        port=port,
        data_dir=data_dir,
        sweep_interval=sweep_interval,
        verbose=verbose,
        outbound_events=outbound_events,
    )
    done = threading.Event()
    starting = True

    def _stop(signum: int, _frame: Any) -> None:
        if starting:
            raise Interrupted(f"interrupted by {signal.Signals(signum).name} while starting")
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        stack.hold_data_dir()
        if reset:
            _reset(data_dir)
        info = stack.start()
    except (Exception, Interrupted) as failed:  # the top level: one line, then clean up
        starting = False
        _say(f"error: {one_line(failed)}", sys.stderr)
        stack.stop()
        return 1
    except BaseException:
        starting = False
        stack.stop()
        raise
    starting = False
    try:
        if verbose:
            _resources(stack.provisioned)
        shown = stack.admin_token if show_admin_token else None
        _banner(info, len(stack.provisioned), shown, verbose)
        # A timed wait: CPython runs a signal's handler only in the main thread, and a SIGTERM
        # the kernel hands to another thread does not wake a main thread blocked in an untimed
        # wait, so the stack could sleep through its stop (seen: a stack alive minutes after
        # SIGTERM, its main thread still in done.wait()).
        while not done.wait(SIGNAL_POLL_SECONDS):
            pass
    finally:
        _say("stopping…", sys.stdout)  # its reader may be gone (`| tee` ended first)
        clean = stack.stop()
    return 0 if clean else 1


def _say(line: str, to: Any) -> None:
    """A line on the way out that must not keep the stack from stopping: with no reader left
    on the pipe, the print fails, and the stop (its record removed, its engines ended) must
    still run."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=to, flush=True)


def _resources(provisioned: list[Provisioned]) -> None:
    """What stands in for each resource of the template (--verbose)."""
    print("from infra/template.yaml:")
    for made in provisioned:
        print(f"  {made.logical_id:28s} {made.kind:30s} {made.local_name}")


def board_url(api: str) -> str:
    """The board is served beside the API, not under it."""
    return api.removesuffix("/api/v1") + "/board"


def _banner(info: dict[str, Any], resources: int, token: str | None, verbose: bool) -> None:
    """At most 15 lines: where to go first (API, board, token), then what runs where."""
    api = info["api"]
    token_file = info["admin_token_file"]
    print("tenure local is up")
    print(f"  API            {api}  (try {api}/health)")
    print(f"  board          {board_url(api)}  (sign in with the admin token)")
    if token_file and token:
        print(f"  admin token    {token}  (kept in {token_file})")
    elif token_file:
        print(f"  admin token    in {token_file}  (--show-admin-token prints it)")
    else:
        print("  admin token    the value of TENURE_ADMIN_TOKEN")
    print(f"  worker API     {info['worker_api']}  (the worker routes alone)")
    print(f"  claim API      {info['worker_claim_api']}  (where claims long-poll)")
    print(f"  DynamoDB       {info['dynamodb']['engine']} at {info['dynamodb']['endpoint']}")
    print(f"  AWS (moto)     {info['aws']['endpoint']}  ({info['aws']['services']})")
    print(f"  data           {info['data_dir']}  (stack.json there names every endpoint)")
    print(f"  sweeper        every {info['sweep_interval_seconds']:g}s")
    faults = local_settings().test_faults_file
    if faults:
        print(f"  TEST FAULTS    hooks read {faults} (throttling, sweeper pause)")
    listed = "listed above" if verbose else "--verbose lists them"
    print(f"  template       {resources} resources of infra/template.yaml ({listed})")
    logged = "each logged, with the handlers' INFO logs" if verbose else "not logged (--verbose)"
    print(f"  requests       {logged}")
    print("Ctrl-C stops everything.", flush=True)
