"""The local stack in one process, metered: every Lambda invocation timed, every AWS request
counted, on DynamoDB Local (the table) and moto (S3, SQS, SNS, Logs, EventBridge).

It is `tenure local` without the HTTP socket and the process pool: the same template
provisioning, the same settings, the same function entry points (functions/*/app.py), the
same worker SDK (its Client, with a transport that hands each request to API Gateway's
stand-in here). Time is the service's clock, moved by hand, so a two-minute job takes no two
minutes; the handlers, the table and the stream run for real.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import logging
import math
import os
import re
import secrets
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import boto3
from tenure import wiring
from tenure.api.routes import PUBLIC_ROUTES, match
from tenure.config import ENVIRONMENT, export, local_settings, settings
from tenure_worker.client import Answer

from tenure_cli.local.email_send import INBOUND_PREFIX, notification, ses_message_id
from tenure_cli.local.engines import DynamoDBLocal, MotoServer, use_local_credentials
from tenure_cli.local.frontdoor import to_event
from tenure_cli.local.inbound_poller import InboundPoller
from tenure_cli.local.provision import REGION, Provisioner, load_template
from tenure_cli.local.streams import StreamPump

from .meter import AwsMeter

ROOT = Path(__file__).resolve().parents[4]
FUNCTIONS = {  # the template's logical id of each function folder
    "api": "ApiFunction",
    "authorizer": "AuthorizerFunction",
    "reactor": "ReactorFunction",
    "inbound": "InboundFunction",
    "sweeper": "SweeperFunction",
}
TABLE = "tenure-bench"
# API Gateway caches an authorizer's answer per Authorization header (ReauthorizeEvery).
AUTHORIZER_TTL_SECONDS = 60
# Lambda's trigger hands the reactor at most this many stream records at once (BatchSize).
REACTOR_BATCH = 100
# What API Gateway puts in an access log line for each `$context` variable the template's
# AccessLogSettings.Format names (infra/template.yaml, read by `access_log_format`): a
# request id as API Gateway writes one (16 characters), a public IPv4 address, and "-" for
# an empty value, as API Gateway writes it. The route key, status, latency and the caller's
# User-Agent are the request's own: the clients' transport is urllib's, which sends its own
# User-Agent unless the request names one.
ACCESS_LOG_REQUEST_ID = "Kx3vZgBYIAMEbQw="
ACCESS_LOG_SOURCE_IP = "203.0.113.25"
URLLIB_USER_AGENT = dict(urllib.request.build_opener().addheaders)["User-agent"]
CONTEXT_VARIABLE = re.compile(r"\$context\.[A-Za-z.]+")
PLATFORM_LINES = (  # what Lambda itself writes per invocation (text log format)
    "START RequestId: {rid} Version: $LATEST",
    "END RequestId: {rid}",
    "REPORT RequestId: {rid}\tDuration: {ms}.00 ms\tBilled Duration: {ms} ms\t"
    "Memory Size: {mb} MB\tMax Memory Used: 120 MB",
)


class _Context:
    """What a Lambda context carries that the handlers read."""

    def __init__(self, function: str, memory_mb: int) -> None:
        self.function_name = f"tenure-{function}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:000000000000:function:{function}"
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = secrets.token_hex(16)
        self.log_group_name = f"/aws/lambda/tenure-{function}"
        self.log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


class _Tally(io.TextIOBase):
    """Stands in for stdout while handlers run: counts the bytes and lines they log."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        self.lines += text.count("\n")
        return len(text)


@dataclass
class Invocations:
    billed_ms: list[int] = field(default_factory=list)
    cpu_ms: float = 0.0  # this process's CPU time in the handler (no waiting on engines)
    log_bytes: int = 0
    log_events: int = 0

    @property
    def count(self) -> int:
        return len(self.billed_ms)


def load_function(name: str) -> ModuleType:
    """functions/<name>/app.py, the deployed entry point, under a module name of its own."""
    path = ROOT / "functions" / name / "app.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the benches from a Tenure checkout")
    spec = importlib.util.spec_from_file_location(f"tenure_bench_fn_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def memory_sizes() -> dict[str, int]:
    """Each function's MemorySize in the template (the Globals' where it sets none)."""
    template = load_template()
    default = int(template["Globals"]["Function"]["MemorySize"])
    resources = template["Resources"]
    return {
        name: int(resources[logical]["Properties"].get("MemorySize", default))
        for name, logical in FUNCTIONS.items()
    }


def access_log_format() -> str:
    """The HTTP API's access log line as the template writes it (AccessLogSettings.Format)."""
    api = load_template()["Resources"]["HttpApi"]["Properties"]
    return str(api["AccessLogSettings"]["Format"])


def access_log_line(form: str, event: dict[str, Any], status: int, ms: int) -> str:
    """The access log line API Gateway writes for `event`, answered `status` in `ms`."""
    known = {
        "$context.requestId": ACCESS_LOG_REQUEST_ID,
        "$context.routeKey": event.get("routeKey", "-"),
        "$context.status": str(status),
        "$context.responseLatency": str(ms),
        "$context.identity.sourceIp": ACCESS_LOG_SOURCE_IP,
        "$context.identity.userAgent": event["headers"].get("user-agent", URLLIB_USER_AGENT),
    }
    return CONTEXT_VARIABLE.sub(lambda m: known.get(m.group(0), "-"), form)


def platform_logged() -> dict[str, bool]:
    """Whether Lambda writes its START/END/REPORT lines for each function: only where the
    template's LoggingConfig leaves SystemLogLevel at INFO or below (they are INFO lines)."""
    resources = load_template()["Resources"]
    levels = {
        name: str(resources[logical]["Properties"].get("LoggingConfig", {}).get("SystemLogLevel"))
        for name, logical in FUNCTIONS.items()
    }
    return {name: level in ("None", "DEBUG", "INFO") for name, level in levels.items()}


class Rig:
    def __init__(
        self, ddb_endpoint: str | None = None, table: str = TABLE, outbound_events: str = "endings"
    ) -> None:
        """`ddb_endpoint`: a DynamoDB Local already running (else one is started);
        `outbound_events`: the template's OutboundEvents, as a deploy would set it."""
        self.ddb_endpoint = ddb_endpoint
        self.table = table
        self.outbound_events = outbound_events
        self.meter = AwsMeter()
        self.clock = wiring.ManualClock(wiring.SystemClock().now_ms())
        self.memory = memory_sizes()
        self.platform_logged = platform_logged()
        self.calls: dict[str, Invocations] = defaultdict(Invocations)
        self.routes: Counter[str] = Counter()
        # Per route: the write and read units its requests caused, the reactor's included.
        self.route_units: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        # Per route: the bytes of the HTTP API's access log lines its requests wrote.
        self.access_log_bytes: Counter[str] = Counter()
        self.access_format = access_log_format()
        self.engines: list[Any] = []
        self.auth_cache: dict[str, tuple[int, dict[str, Any]]] = {}
        self.tally = _Tally()
        self.real_stdout = sys.stdout
        self.functions: dict[str, ModuleType] = {}
        self.resources: dict[str, str] = {}
        self.inbound_queue: tuple[str, str] = ("", "")

    # ------------------------------------------------------------------- stack

    def start(self) -> Rig:
        # Everything changed here for the process is put back by stop(): settings, the
        # default session, stdout and where loggers write.
        self.saved_env = dict(os.environ)
        self.saved_session = boto3.DEFAULT_SESSION
        self.rebound: list[tuple[logging.StreamHandler[Any], Any]] = []
        use_local_credentials()
        self.meter.install()  # before any client is made
        moto = MotoServer()
        self.engines.append(moto)
        moto.start()
        endpoint = self.ddb_endpoint
        if endpoint is None:
            ddb = DynamoDBLocal(Path(local_settings().cache_dir))
            self.engines.append(ddb)
            ddb.start()
            endpoint = ddb.endpoint
        self.meter.price_writes(endpoint, REGION)
        export("TENURE_TABLE", self.table)
        export("TENURE_DYNAMODB_ENDPOINT", endpoint)
        export("AWS_REGION", REGION)
        export("AWS_DEFAULT_REGION", REGION)
        with self.meter.acting("setup"):
            provisioner = Provisioner(
                endpoint,
                moto.endpoint,
                self.table,
                f"tenure-bench-{secrets.token_hex(3)}",  # moto keeps one state a process
                parameters={"OutboundEvents": self.outbound_events},
            )
            provisioner.run()
        self.resources = provisioner.stack_resources()
        for variable, source in ENVIRONMENT.values():
            if source.startswith("template:"):
                env = provisioner.function_environment(source.split(":", 1)[1])
                export(variable, env[variable])
        for service in ("SCHEDULER", "S3", "SQS", "SNS", "EVENTS", "LOGS"):
            export(f"AWS_ENDPOINT_URL_{service}", moto.endpoint)
        export("TENURE_ATTACHMENTS_BUCKET", self.resources["attachments_bucket"])
        export("TENURE_LOG_GROUP", self.resources["log_group"])
        export("TENURE_AWS_ENDPOINT", moto.endpoint)
        self.inbound_queue = (
            self.resources["inbound_queue_url"],
            provisioner.arns["InboundQueue"]["Arn"],
        )
        self._fresh_caches()
        # Handlers log to stdout (Powertools' handlers were bound to it at import): the tally.
        sys.stdout = self.tally
        for name in FUNCTIONS:
            self.functions[name] = load_function(name)
        for logger in [logging.getLogger(n) for n in logging.Logger.manager.loggerDict]:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream in (
                    self.real_stdout,
                    sys.__stdout__,
                ):
                    self.rebound.append((handler, handler.setStream(self.tally)))
        svc = wiring.service()
        # The start-up wrote rows on the real clock (the first admin token, its first use):
        # the bench's clock takes over from now, never from before them.
        self.clock.now = max(self.clock.now, wiring.SystemClock().now_ms())
        # Every function of this process shares the one service: each part that tells the
        # time takes the bench's clock.
        kernel = svc.kernel
        for part in (kernel, kernel.catalog, kernel.gates, kernel.stale, kernel.owned):
            part.clock = self.clock
        svc.sweep.clock = svc.figures.clock = self.clock
        self.pump = _ReactorPump(self, endpoint)
        return self

    def stop(self) -> None:
        sys.stdout = self.real_stdout
        for handler, stream in getattr(self, "rebound", []):
            handler.setStream(stream)
        for engine in reversed(self.engines):
            engine.stop()
        if hasattr(self, "saved_env"):
            os.environ.clear()
            os.environ.update(self.saved_env)
            boto3.DEFAULT_SESSION = self.saved_session
        settings.cache_clear()
        self._fresh_caches()

    def _fresh_caches(self) -> None:
        from tenure.triggers.inbound import handler as inbound_handler

        wiring.service.cache_clear()
        wiring.publisher.cache_clear()
        inbound_handler.inbound.cache_clear()

    def __enter__(self) -> Rig:
        try:
            return self.start()
        except BaseException:
            self.stop()  # whatever had started ends with it
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------- invocations

    def invoke(self, function: str, event: dict[str, Any], actor: str | None = None) -> Any:
        """One invocation of a deployed entry point: its time (rounded up to the ms, as
        Lambda bills, less the meter's own time inside it) and what it logged are booked to
        the function, or to `actor` when the caller books this invocation's work apart (the
        retention reclaim's sweeper passes)."""
        actor = actor or function
        ctx = _Context(function, self.memory[function])
        bytes0, lines0 = self.tally.bytes, self.tally.lines
        with self.meter.acting(actor):
            own_wall, own_cpu = self.meter.own_time()
            started, cpu = time.perf_counter(), time.thread_time()
            out = self.functions[function].handler(event, ctx)
            wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
            # Less the meter's own time inside the call (pricing a write reads its item).
            spent_wall, spent_cpu = self.meter.own_time()
            wall -= spent_wall - own_wall
            cpu -= spent_cpu - own_cpu
            ms = max(1, math.ceil(wall * 1000))
        calls = self.calls[actor]
        calls.cpu_ms += cpu * 1000
        calls.billed_ms.append(ms)
        platform = [
            line.format(rid=ctx.aws_request_id, ms=ms, mb=self.memory[function])
            for line in PLATFORM_LINES
            if self.platform_logged[function]
        ]
        calls.log_bytes += self.tally.bytes - bytes0 + sum(len(x) + 1 for x in platform)
        calls.log_events += self.tally.lines - lines0 + len(platform)
        return out

    def transport(
        self, method: str, url: str, headers: dict[str, str], data: bytes | None, _: float
    ) -> Answer:
        """The worker SDK's transport: API Gateway's part (authorizer and its cache, the
        access log), the API function, then the stream's records to the reactor."""
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        event = to_event(method, target, headers, data or b"")
        found = match(method, parts.path)
        route = f"{method} {found.rule if found else parts.path}"
        self.routes[route] += 1
        before = self.meter.total()
        try:
            return self._serve(event, route, method, parts.path)
        finally:
            after = self.meter.total()
            units = self.route_units[route]
            units[0] += after.write_units + after.lost_write_units
            units[0] -= before.write_units + before.lost_write_units
            units[1] += after.read_units - before.read_units

    def _serve(self, event: dict[str, Any], route: str, method: str, path: str) -> Answer:
        if (method, path) not in PUBLIC_ROUTES:
            verdict = self._authorize(event)
            if not verdict.get("isAuthorized"):
                self._access_log(event, route, 403, 0)
                return Answer(403, {}, b'{"message":"Forbidden"}')
            event["requestContext"]["authorizer"] = {"lambda": verdict.get("context", {})}
        started = time.perf_counter()
        result = self.invoke("api", event)
        self._access_log(event, route, int(result.get("statusCode", 200)), started)
        self.pump.pump_once()  # reads on until the stream has nothing new
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        return Answer(int(result.get("statusCode", 200)), dict(result.get("headers") or {}), raw)

    def _authorize(self, event: dict[str, Any]) -> dict[str, Any]:
        key = event["headers"].get("authorization", "")
        now = self.clock.now_ms()
        cached = self.auth_cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        path = event["rawPath"]
        asked = {
            **event,
            "type": "REQUEST",
            "routeArn": f"arn:aws:execute-api:{REGION}:000000000000:bench/$default/"
            f"{event['requestContext']['http']['method']}{path}",
            "identitySource": [key] if key else [],
        }
        verdict: dict[str, Any] = self.invoke("authorizer", asked)
        self.auth_cache[key] = (now + AUTHORIZER_TTL_SECONDS * 1000, verdict)
        return verdict

    def _access_log(self, event: dict[str, Any], route: str, status: int, started: float) -> None:
        ms = int((time.perf_counter() - started) * 1000) if started else 0
        line = access_log_line(self.access_format, event, status, ms)
        self.access_log_bytes[route] += len(line.encode()) + 1

    # ------------------------------------------------------- SES, SQS, sweeper

    def receive_email(self, raw: bytes, to: str) -> None:
        """What SES receiving does: the raw mail into the inbound bucket, its
        notification onto the topic (SNS → the inbound queue), then Lambda's SQS poller."""
        message_id = ses_message_id()
        note = notification(
            raw,
            message_id,
            self.resources["inbound_bucket"],
            self.resources["inbound_topic_arn"],
            [to],
        )
        with self.meter.acting("ses"):
            s3 = wiring.aws_client("s3")
            s3.put_object(
                Bucket=self.resources["inbound_bucket"],
                Key=f"{INBOUND_PREFIX}{message_id}",
                Body=raw,
            )
            boto3.client("sns", region_name=REGION).publish(
                TopicArn=self.resources["inbound_topic_arn"],
                Subject="Amazon SES Email Receipt Notification",
                Message=json.dumps(note),
            )
            # SNS's delivery into the subscribed queue is a SendMessage on it (moto does it
            # inside, where no client of ours sees it).
            self.meter.usage("ses").requests["sqs:SendMessage"] += 1

    def poll_inbound(self) -> int:
        """Lambda's SQS event source: receive, invoke the inbound function, delete."""
        with self.meter.acting("lambda-pollers"):
            sqs = boto3.client("sqs", region_name=REGION)
            poller = InboundPoller(
                sqs, *self.inbound_queue, lambda event, _: self.invoke("inbound", event)
            )
            total = 0
            while True:
                got = poller.poll_once(wait_seconds=0)
                total += got
                if not got:
                    break
        self.pump.pump_once()  # reads on until the stream has nothing new
        return total

    def sweep(self, actor: str = "sweeper") -> dict[str, Any]:
        """One pass of the sweeper, as its one-minute schedule invokes it; its answer (what
        it expired, reclaimed and left for later)."""
        answer: dict[str, Any] = self.invoke(
            "sweeper", {"source": "aws.scheduler", "detail-type": "Scheduled Event"}, actor
        )
        self.pump.pump_once()  # reads on until the stream has nothing new
        return answer


class _ReactorPump(StreamPump):
    """The table's stream to the reactor's entry point, in Lambda's batches (BatchSize 100)."""

    def __init__(self, rig: Rig, endpoint: str) -> None:
        with rig.meter.acting("lambda-pollers"):
            # Its calls are counted into the figures: no look-up on a timer, only when a shard
            # it reads closes, as DynamoDB Local keeps one shard open through a run.
            super().__init__(
                endpoint, rig.table, wiring.build_store(), REGION, shard_look_seconds=math.inf
            )
        self.rig = rig
        # Each item's records as an invocation of its own (the retention reclaim: at the
        # reference rate a lease's reclaim reaches the stream alone), not a batch per pass.
        self.per_item = False
        self.actor = "reactor"  # whom the invocations are booked to

    def pump_once(self) -> int:
        """As StreamPump's, with its calls booked to Lambda's stream pollers."""
        with self.rig.meter.acting("lambda-pollers"):
            return super().pump_once()

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        chunks: list[list[dict[str, Any]]] = []
        if self.per_item:
            by_item: dict[str, list[dict[str, Any]]] = {}
            for record in batch:
                key = json.dumps(record["dynamodb"].get("Keys"), sort_keys=True)
                by_item.setdefault(key, []).append(record)
            chunks = list(by_item.values())
        else:
            chunks = [
                batch[start : start + REACTOR_BATCH]
                for start in range(0, len(batch), REACTOR_BATCH)
            ]
        for chunk in chunks:
            answer = self.rig.invoke("reactor", {"Records": chunk}, self.actor)
            if answer.get("batchItemFailures"):
                raise RuntimeError(f"the reactor failed records: {answer['batchItemFailures']}")
