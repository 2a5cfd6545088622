"""Shared fixtures: one hands each test DynamoDB Local, started once and then again after every
ENGINE_TESTS tests of the process; one starts the local stack once for the whole run. An engine
takes seconds to start, so no test starts its own."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from tenure import wiring
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.config import local_settings
from tenure.domain.model import Principal
from tenure.store.dynamo import OneTable
from tenure_cli.local.engines import (
    DynamoDBLocal,
    EngineUnavailable,
    free_port,
    use_local_credentials,
)
from tenure_cli.local.streams import StreamPump

from tests.infra import aws_calls

# Every AWS call a Lambda function's code makes in this run is noted as the IAM request it is
# (tests/infra/aws_calls.py); tests/infra/test_least_privilege.py decides each against that
# function's role in the template, after every other test of the run.
aws_calls.install()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "after_every_tier: runs after every other test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("after_every_tier") is not None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    aws_calls.LOG.test = item.nodeid


ADMIN = Principal(kind="operator", token_id="test-admin", role="admin")
WORKER = Principal(kind="worker", token_id="test-worker")


def lease_principal(lease_id: str) -> Principal:
    return Principal(kind="lease", token_id="test-lease", lease_id=lease_id)


def _unavailable(why: str) -> None:
    # In CI (make test sets TENURE_REQUIRE_ENGINES=1) a tier that cannot start its engine fails.
    if local_settings().require_engines:
        pytest.fail(f"engine unavailable: {why}")
    pytest.skip(f"engine unavailable: {why}")


# DynamoDB Local grows slower the more one engine has served, whether or not the tables are
# deleted: the same small table's work (a world and 20 filed tasks) cost its JVM 0.34 s of CPU
# on the engine's 10th table, 1.1 s on its 100th and 2.2 s on its 250th. So each test is handed
# an engine that has served fewer than ENGINE_TESTS tests, and a start (about 1.5 s of the
# JVM's CPU) renews it. tests/conformance under two xdist workers took 630 s of CPU with one
# engine a worker, 481 s renewing it every 25 tests, 380 s every 12 and 501 s every 5.
ENGINE_TESTS = 12


class Engines:
    """The DynamoDB Local this process's tests run on, renewed between tests."""

    def __init__(self) -> None:
        self.engine: DynamoDBLocal | None = None
        self.served = 0

    def for_a_test(self) -> DynamoDBLocal:
        if self.engine is not None and self.served >= ENGINE_TESTS:
            self.stop()
        if self.engine is None:
            engine = DynamoDBLocal(Path(local_settings().cache_dir))
            try:
                engine.start()
            except EngineUnavailable as why:
                _unavailable(str(why))
            self.engine, self.served = engine, 0
        self.served += 1
        return self.engine

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()
            self.engine = None


@pytest.fixture(scope="session")
def engines() -> Iterator[Engines]:
    use_local_credentials()
    made = Engines()
    yield made
    made.stop()


@pytest.fixture
def ddb_local(engines: Engines) -> DynamoDBLocal:
    """The engine of this test: every fixture and the test itself get the same one."""
    return engines.for_a_test()


@dataclass
class Rig:
    """A fresh table on DynamoDB Local with a service on a hand-moved clock."""

    store: OneTable
    clock: wiring.ManualClock
    svc: Tenure
    pump: StreamPump


@pytest.fixture
def rig(ddb_local: DynamoDBLocal) -> Rig:
    table = f"t{uuid.uuid4().hex[:12]}"
    store = wiring.build_store(ddb_local.endpoint, table)
    store.create_table()
    clock = wiring.ManualClock(wiring.SystemClock().now_ms())
    svc = compose(Rows.of(store, store), clock, wiring.RandomIds())
    return Rig(store=store, clock=clock, svc=svc, pump=StreamPump(ddb_local.endpoint, table, store))


@dataclass
class LocalStack:
    base: str  # http://127.0.0.1:PORT/api/v1
    admin_token: str
    data_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)

    def admin(self) -> httpx.Client:
        return self.client(self.admin_token)

    def info(self) -> dict[str, Any]:
        """Its record, stack.json: endpoints, resources and the engine key."""
        found: dict[str, Any] = json.loads((self.data_dir / "stack.json").read_text())
        return found

    def aws(self, service: str) -> Any:
        """A boto3 client of its engines (DynamoDB Local for DynamoDB, moto's server for the
        rest), signed with its engine key: they answer no other."""
        info = self.info()
        aws = info["aws"]
        ddb = service in ("dynamodb", "dynamodbstreams")
        session = boto3.session.Session(
            aws_access_key_id=aws["access_key_id"],
            aws_secret_access_key=aws["secret_access_key"],
            region_name=aws["region"],
        )
        return session.client(
            service, endpoint_url=info["dynamodb"]["endpoint"] if ddb else aws["endpoint"]
        )

    def engine_env(self) -> dict[str, str]:
        """What a command given the engines' endpoints needs in its environment."""
        aws = self.info()["aws"]
        return {
            "AWS_ACCESS_KEY_ID": aws["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": aws["secret_access_key"],
            "AWS_DEFAULT_REGION": aws["region"],
        }


def start_stack(
    data_dir: Path,
    admin_token: str,
    sweep_interval: float = 1.0,
    *,
    port: int | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> LocalStack:
    """Start `tenure local` as a user would; `data_dir` may be relative to `cwd`."""
    port = port or free_port()
    where = cwd or Path.cwd()
    log = (where / data_dir).parent / f"stack-{port}-{time.monotonic_ns()}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    environ = {**(env or os.environ), "TENURE_ADMIN_TOKEN": admin_token, "PYTHONUNBUFFERED": "1"}
    args = ["local", "--port", str(port), "--data-dir", str(data_dir)]
    args += ["--sweep-interval", str(sweep_interval), *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tenure_cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
            cwd=where,
        )
    base = f"http://127.0.0.1:{port}/api/v1"
    give_up = time.monotonic() + 120
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise RuntimeError(f"tenure local exited early:\n{log.read_text()}")
        try:
            # Up is the banner after a healthy answer: the front door serves a moment before
            # the start has finished (a SIGTERM in that moment is "interrupted while starting").
            healthy = httpx.get(f"{base}/health", timeout=2).status_code == 200
            if healthy and "tenure local is up" in log.read_text(errors="replace"):
                return LocalStack(base, admin_token, where / data_dir, proc, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"tenure local did not come up:\n{log.read_text()}")


def stop_stack(stack: LocalStack, *, to_a_thread: bool = False) -> int:
    """SIGTERM the stack and wait for it. `to_a_thread` hands the signal to one of its other
    threads rather than letting the kernel pick (a stop must not depend on which thread the
    kernel picks)."""
    if to_a_thread:
        _signal_a_thread(stack.proc.pid, signal.SIGTERM)
    else:
        stack.proc.send_signal(signal.SIGTERM)
    return stack.proc.wait(timeout=60)


# tgkill(2): a signal for one thread of a process. The syscall's number by machine.
_TGKILL = {"x86_64": 234, "aarch64": 131}


def _signal_a_thread(pid: int, sig: int) -> None:
    others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert others, "the stack has only its main thread"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_TGKILL[platform.machine()], pid, others[0], int(sig)) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


# The session stack's sweeper pass. A pass reads every pool, and the tiers leave some 170 pools
# behind by their end: at a pass a second the idle stack and its DynamoDB Local took 0.56 of a
# core there, at one every 2 s 0.38, which the tests waiting on an expiry pay back with at most
# a second more each (tests/e2e/support.py's SHORT_LOST_BY counts it).
SESSION_SWEEP_SECONDS = 2.0


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    use_local_credentials()
    try:
        from tenure_cli.local.engines import install_dynamodb_local, java_available

        if not java_available():
            raise EngineUnavailable("java is not installed")
        install_dynamodb_local(Path(local_settings().cache_dir))
    except EngineUnavailable as why:
        _unavailable(str(why))
    root = tmp_path_factory.mktemp("stack")
    stack = start_stack(root / "data", "tnr_o_e2e-" + uuid.uuid4().hex, SESSION_SWEEP_SECONDS)
    yield stack
    # The children are taken just before the stop and ended only after it: a reap before the
    # stop (as this tier once did, its fixtures torn down in another order) kills a live
    # stack's DynamoDB Local and workers and blames the stack for leaving them.
    from tests.e2e.support import alive, descendants, reap

    children = descendants(stack.proc.pid)
    stop_stack(stack)
    # multiprocessing's resource tracker ends on its own once the stack has exited (it reads
    # the end of its pipe), a moment later: only what is still running after that was left.
    give_up = time.monotonic() + 5
    while alive(children) and time.monotonic() < give_up:
        time.sleep(0.1)
    left = reap(children)
    if left:
        names = sorted({cmd.split(" -c ")[-1][:60] for cmd in left.values()})
        warnings.warn(
            f"the session stack left {len(left)} processes running: {names}", stacklevel=1
        )
