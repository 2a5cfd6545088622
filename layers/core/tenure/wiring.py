"""Composition root: builds clients, the store and the service lazily, never at import. The
whole service (`service`) and the worker's use cases alone (`worker_service`, what the worker
function serves) are two compositions: the whole one's modules are imported only by the
function that builds it, so the worker function never loads them."""

from __future__ import annotations

import gc
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config

from tenure.app.ports import Clock, EventPublisher
from tenure.app.rows import Rows, Store
from tenure.app.worker_tenure import WorkerTenure, compose_worker
from tenure.config import settings
from tenure.store.blobs import S3Blobs
from tenure.store.dynamo import OneTable
from tenure.store.events import EventBridgePublisher
from tenure.store.logs import CloudWatchLogSink

if TYPE_CHECKING:
    from tenure.app.rules.ports import RuleStore
    from tenure.app.tenure import Tenure
    from tenure.store.schedules import EventBridgeSchedules

# Functions run on every DynamoDB client this process builds, in order. Empty on AWS; the local
# stack adds its fault injection here when a reliability test asks for throttling.
DYNAMODB_CLIENT_HOOKS: list[Callable[[Any], None]] = []


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """A clock moved by hand (benchmarks and tests): sleeping advances it instantly."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

    def advance(self, seconds: float) -> None:
        self.sleep(seconds)


class RandomIds:
    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def new_id(self, prefix: str) -> str:
        # Time-ordered (ms, hex) then 64 random bits: sortable and unguessable enough for ids.
        return f"{prefix}_{time.time_ns() // 1_000_000:011x}{secrets.token_hex(8)}"

    def secret(self) -> str:
        return secrets.token_urlsafe(24)  # 192 bits

    def shuffle(self, items: list[str]) -> list[str]:
        out = list(items)
        self._rng.shuffle(out)
        return out

    def jitter(self) -> float:
        return self._rng.random()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector paused while boto3 builds a client (as the entries pause it while
    they import): the service model's thousands of new objects would otherwise set off
    collections that walk them over and over, about 4 ms of the first client's CPU
    (`tenure bench coldstart`). They are kept alive by the client anyway; the collector
    resumes where it was (another thread's pause is left to that thread)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def dynamodb_client(endpoint: str | None = None) -> Any:
    cfg = settings()
    with collector_paused():
        client = boto3.client(
            "dynamodb",
            region_name=cfg.region,
            endpoint_url=endpoint or cfg.dynamodb_endpoint,
            # botocore retries nothing: the store's one bounded retry (store.calls) re-sends
            # throttled calls and the connection failures safe to re-send, so two bounds
            # cannot multiply past a Lambda's time budget (botocore's own standard mode would
            # sleep up to 1+2+4+8 s across its retries before the store saw the throttle).
            config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"}, max_pool_connections=64
            ),
        )
    for hook in DYNAMODB_CLIENT_HOOKS:
        hook(client)
    return client


def build_store(endpoint: str | None = None, table: str | None = None) -> OneTable:
    """Every port of the store on the table, as one object (`.ports` is its Rows)."""
    return OneTable(dynamodb_client(endpoint), table or settings().table_name)


def build_schedules() -> EventBridgeSchedules | None:
    """The rules' schedules adapter, where this function is configured to manage schedules."""
    from tenure.store.schedules import EventBridgeSchedules  # the whole service's alone

    cfg = settings()
    if cfg.scheduler_target_arn is None or cfg.scheduler_role_arn is None:
        return None
    client = LazyClient(lambda: boto3.client("scheduler", region_name=cfg.region))
    return EventBridgeSchedules(
        client, cfg.schedule_group, cfg.scheduler_target_arn, cfg.scheduler_role_arn
    )


def aws_client(service: str) -> Any:
    """An S3 or CloudWatch Logs client (the local stack points these at moto). S3 signs with
    SigV4 so presigned URLs work in every region; path-style addressing for moto; and, on the
    local stack, with the key id its URLs may name (same secret as the process's own)."""
    cfg = settings()
    options: dict[str, Any] = {"signature_version": "s3v4"} if service == "s3" else {}
    keys: dict[str, Any] = {}
    if service == "s3" and cfg.aws_endpoint:
        options["s3"] = {"addressing_style": "path"}
    if service == "s3" and cfg.s3_access_key_id:
        own = boto3.session.Session().get_credentials()
        secret = own.secret_key if own is not None else None
        keys = {"aws_access_key_id": cfg.s3_access_key_id, "aws_secret_access_key": secret}
    with collector_paused():
        return boto3.client(
            service,  # type: ignore[call-overload]
            region_name=cfg.region,
            endpoint_url=cfg.aws_endpoint,
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, **options),
            **keys,
        )


class LazyClient:
    """A boto3 client made when it is first used. The service holds an S3, a CloudWatch Logs
    and a Scheduler client, but only the attachment, log and rule routes call them: building
    all three on the first request of any route cost it ~40 ms of CPU (`tenure bench
    coldstart`, `api_import_and_first_request_ms`). Locked: the local stack serves from threads, and
    boto3's default session must not make two clients at once."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not the client's (and no recursion before __init__ ran)
            raise AttributeError(name)
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
        return getattr(self._client, name)


def build_blobs() -> S3Blobs | None:
    bucket = settings().attachments_bucket
    return S3Blobs(LazyClient(lambda: aws_client("s3")), bucket) if bucket else None


def build_log_sink() -> CloudWatchLogSink | None:
    group = settings().log_group
    return CloudWatchLogSink(LazyClient(lambda: aws_client("logs")), group) if group else None


def build_publisher() -> EventBridgePublisher | None:
    bus = settings().event_bus
    return EventBridgePublisher(aws_client("events"), bus) if bus else None


@lru_cache(maxsize=1)
def publisher() -> EventBridgePublisher | None:
    """The process's publisher (one client for every batch a warm reactor handles)."""
    return build_publisher()


def build_service(
    store: Store | None = None,
    clock: Clock | None = None,
    *,
    bare: bool = False,
    publisher: EventPublisher | None = None,
) -> Tenure:
    """The one place a deployment, the reactor and the CLI compose the service: on `store`
    (the configured table by default) and `clock` (the system's). The deployment's adapters
    (attachments, logs, schedules, the event bus) come from its settings; `bare` leaves them
    out (the CLI's admin and bench, a reactor handed its own table), but for `publisher`."""
    # Imported here, not at the top: the worker function builds only worker_service below.
    from tenure.app.tenure import compose

    rows = _rows(store or build_store())
    if bare:
        return compose(rows, clock or SystemClock(), RandomIds(), publisher=publisher)
    return compose(
        rows,
        clock or SystemClock(),
        RandomIds(),
        blobs=build_blobs(),
        log_sink=build_log_sink(),
        schedules=build_schedules(),
        publisher=publisher or build_publisher(),
    )


@lru_cache(maxsize=1)
def service() -> Tenure:
    """The process's service, built on first use (a Lambda's warm start reuses it)."""
    return build_service()


def _rows(table: Store | OneTable) -> Rows:
    # The adapter hands out one object per port; a test's fake holds the whole table itself.
    return table.ports if isinstance(table, OneTable) else Rows.of(table, cast("RuleStore", table))


def build_worker_service(store: Store | None = None, clock: Clock | None = None) -> WorkerTenure:
    """The worker's use cases alone, on `store` (the configured table by default) with the
    deployment's attachments and logs adapters: what the worker and claim functions serve."""
    return compose_worker(
        _rows(store or build_store()),
        clock or SystemClock(),
        RandomIds(),
        blobs=build_blobs(),
        log_sink=build_log_sink(),
    )


@lru_cache(maxsize=1)
def worker_service() -> WorkerTenure:
    """The worker function's use cases, built on its first request."""
    return build_worker_service()
