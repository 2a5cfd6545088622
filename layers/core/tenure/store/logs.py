"""The CloudWatch Logs adapter of the LogSink port: one stream per lease and container."""

from __future__ import annotations

import json
import re
from typing import Any

from botocore.exceptions import ClientError

from tenure.app.ports import LogLine, LogPage
from tenure.domain.errors import ValidationFailed
from tenure.store import cursors
from tenure.store.calls import Retry, translate

# PutLogEvents' limits: a batch holds at most 10,000 events and 1,048,576 bytes (each event
# counts its UTF-8 message plus 26 bytes), spans at most 24 hours, in time order; one event is
# at most 256 KB (its JSON wrapping included).
BATCH_EVENTS = 10_000
BATCH_BYTES = 1_048_576
EVENT_OVERHEAD = 26
BATCH_SPAN_MS = 24 * 3_600_000
EVENT_BYTES = 256 * 1024 - EVENT_OVERHEAD - 256  # room for the JSON wrapping
# A read that finds only empty pages (FilterLogEvents searches in slices) stops after this
# many calls and hands back a cursor to go on with.
READ_CALLS = 5
# The streams of one lease (its containers) read or deleted at most: one DescribeLogStreams
# page. The service lets no lease ship from more containers than this (app/artifacts/logs.py
# MAX_LEASE_CONTAINERS).
MAX_STREAMS = 50
# A tail reads up to 1 MB from each of a lease's streams (GetLogEvents), and a lease may have
# 50: its newest lines are kept within this many bytes of messages, so the answer stays under
# the 6 MB a Lambda answer carries (with its JSON), and `truncated` says older lines were left.
MAX_TAIL_BYTES = 4 * 1024 * 1024
LOG_CURSOR = "l"


def stream_name(lease_id: str, container: str) -> str:
    return f"{lease_id}/{container}"


class CloudWatchLogSink:
    def __init__(self, client: Any, group: str, retry: Retry | None = None) -> None:
        self.client = client
        self.group = group
        self.retry = retry or Retry()

    def _call(self, what: str, fn: Any, read: bool = False, **request: Any) -> dict[str, Any]:
        try:
            return self.retry.call(what, fn, request, read=read)
        except ClientError as err:
            raise translate(err, None) from err

    # ----------------------------------------------------------------------- writes

    def append(self, lease_id: str, container: str, lines: list[LogLine], new: bool = False) -> int:
        """A container first counted just now (`new`) has no stream yet: it is made, then
        written (two calls, where a write that must fail first would make three). Any other
        is written straight away (one call), and made only if the write finds it missing
        (the request that counted it failed before making it)."""
        stream = stream_name(lease_id, container)
        events = [
            {"timestamp": line.timestamp, "message": _encode(line)}
            for line in sorted(lines, key=lambda x: x.timestamp)  # stable: printed order
        ]
        if new:
            self._create_stream(stream)
        accepted = 0
        for batch in _batches(events):
            accepted += self._put(stream, batch)
        return accepted

    def _put(self, stream: str, batch: list[dict[str, Any]]) -> int:
        request: dict[str, Any] = {
            "logGroupName": self.group,
            "logStreamName": stream,
            "logEvents": batch,
        }
        try:
            out = self.retry.call("put_log_events", self.client.put_log_events, request)
        except ClientError as err:
            if _code(err) != "ResourceNotFoundException":
                raise translate(err, None) from err
            self._create_stream(stream)
            out = self._call("put_log_events", self.client.put_log_events, **request)
        return len(batch) - _rejected(out.get("rejectedLogEventsInfo") or {}, len(batch))

    def _create_stream(self, stream: str) -> None:
        try:
            self.client.create_log_stream(logGroupName=self.group, logStreamName=stream)
        except ClientError as err:
            if _code(err) != "ResourceAlreadyExistsException":  # a concurrent batch made it
                raise translate(err, None) from err

    # ------------------------------------------------------------------------ reads

    def read(
        self,
        lease_id: str,
        container: str | None,
        since: int | None,
        tail: int | None,
        cursor: str | None,
        limit: int,
    ) -> LogPage:
        if tail is not None:
            return self._tail(lease_id, container, since, tail)
        scope = f"{lease_id}/{container or ''}"
        # Oldest first across every container, as the logs route answers. FilterLogEvents on
        # AWS sorts what it returns by event time, then ingestion time, across the streams it
        # searched, and has since 2019 ignored `interleaved` (documented as assumed true). moto
        # still reads it: without it, moto returns one stream after another. So it is sent,
        # for both.
        request: dict[str, Any] = {"logGroupName": self.group, "limit": limit, "interleaved": True}
        # The lease's streams by name (not logStreamNamePrefix: moto ignores it there, and
        # names keep a read inside the lease whatever the engine).
        if cursor:
            request["nextToken"] = _token_of(cursor, scope)
        names = [stream_name(lease_id, container)] if container else self._streams(lease_id)
        if not names:
            return LogPage([], False, None)
        request["logStreamNames"] = names
        if since is not None:
            request["startTime"] = since
        events: list[LogLine] = []
        token: str | None = None
        for _ in range(READ_CALLS):
            try:
                search = self.client.filter_log_events
                out = self._call("filter_log_events", search, True, **request)
            except ClientError as err:
                if _code(err) == "ResourceNotFoundException":
                    return LogPage([], False, None)  # nothing was ever shipped
                if _code(err) == "InvalidParameterException" and cursor:
                    raise ValidationFailed("cursor: not a cursor this API handed out") from err
                raise
            events.extend(_line(e) for e in out.get("events", []))
            token = out.get("nextToken")
            if events or not token:
                break
            request["nextToken"] = token
        next_cursor = cursors.encode(LOG_CURSOR, f"{scope}|{token}") if token else None
        return LogPage(events, False, next_cursor)

    def _tail(self, lease_id: str, container: str | None, since: int | None, tail: int) -> LogPage:
        streams = [stream_name(lease_id, container)] if container else self._streams(lease_id)
        found: list[LogLine] = []
        for stream in streams:
            request: dict[str, Any] = {
                "logGroupName": self.group,
                "logStreamName": stream,
                "startFromHead": False,
                "limit": min(tail + 1, 10_000),
            }
            if since is not None:
                request["startTime"] = since
            try:
                out = self._call("get_log_events", self.client.get_log_events, True, **request)
            except ClientError as err:
                if _code(err) == "ResourceNotFoundException":
                    continue
                raise
            found.extend(_line(e, stream) for e in out.get("events", []))
        found.sort(key=lambda x: x.timestamp)
        kept = _newest_within(found[-tail:] if tail else [], MAX_TAIL_BYTES)
        return LogPage(kept, len(found) > len(kept), None)

    def _streams(self, lease_id: str) -> list[str]:
        try:
            out = self._call(
                "describe_log_streams",
                self.client.describe_log_streams,
                True,
                logGroupName=self.group,
                logStreamNamePrefix=f"{lease_id}/",
                limit=MAX_STREAMS,
            )
        except ClientError as err:
            if _code(err) == "ResourceNotFoundException":
                return []
            raise
        return [s["logStreamName"] for s in out.get("logStreams", [])]

    def delete(self, lease_id: str) -> int:
        streams = self._streams(lease_id)
        for stream in streams:
            try:
                self.client.delete_log_stream(logGroupName=self.group, logStreamName=stream)
            except ClientError as err:
                if _code(err) != "ResourceNotFoundException":
                    raise translate(err, None) from err
        return len(streams)


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _encode(line: LogLine) -> str:
    """The stored message: JSON, so the stream (stdout/stderr) survives and Logs Insights
    reads the fields; a message too long for one event is cut, and says so."""
    message = line.message
    raw = message.encode()
    if len(raw) > EVENT_BYTES - 100:  # room for the wrapping and the note
        cut = raw[: EVENT_BYTES - 100].decode(errors="ignore")
        message = f"{cut} …[cut: {len(raw) - len(cut.encode())} more bytes]"
    text = json.dumps({"stream": line.stream, "message": message}, ensure_ascii=False)
    while len(text.encode()) > EVENT_BYTES:  # escapes grew it: cut further (bounded: halves)
        message = message[: len(message) // 2] + " …[cut]"
        text = json.dumps({"stream": line.stream, "message": message}, ensure_ascii=False)
    return text


def _batches(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = []
    batch: list[dict[str, Any]] = []
    size = 0
    for event in events:
        cost = len(event["message"].encode()) + EVENT_OVERHEAD
        if batch and (
            len(batch) >= BATCH_EVENTS
            or size + cost > BATCH_BYTES
            or event["timestamp"] - batch[0]["timestamp"] > BATCH_SPAN_MS
        ):
            batches.append(batch)
            batch, size = [], 0
        batch.append(event)
        size += cost
    if batch:
        batches.append(batch)
    return batches


def _rejected(info: dict[str, Any], count: int) -> int:
    """How many events of a batch CloudWatch refused (too old, expired, or too new); the
    end indexes name the last refused event (inclusive), the start index the first."""
    refused: set[int] = set()
    for key in ("tooOldLogEventEndIndex", "expiredLogEventEndIndex"):
        if key in info:
            refused.update(range(0, min(int(info[key]) + 1, count)))
    if "tooNewLogEventStartIndex" in info:
        refused.update(range(int(info["tooNewLogEventStartIndex"]), count))
    return len(refused)


def _line(event: dict[str, Any], stream: str | None = None) -> LogLine:
    name = str(stream or event.get("logStreamName") or "")
    container = name.split("/", 1)[1] if "/" in name else "main"
    text = str(event.get("message", ""))
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and set(doc) == {"stream", "message"}:
        return LogLine(int(event["timestamp"]), container, str(doc["stream"]), str(doc["message"]))
    return LogLine(int(event["timestamp"]), container, "stdout", text)


def _token_of(cursor: str, scope: str) -> str:
    position = cursors.decode(cursor, LOG_CURSOR, _SHAPE)
    found_scope, _, token = position.partition("|")
    if found_scope != scope or not token:
        raise ValidationFailed("cursor: it belongs to another lease or container")
    return token


_SHAPE = re.compile(r"[^|]+/[^|]*\|.+", re.DOTALL)


def _newest_within(events: list[LogLine], budget: int) -> list[LogLine]:
    """The newest of `events` (oldest first) whose messages together fit `budget` bytes, as
    an answer's JSON writes them (a character beyond ASCII escaped)."""
    spent = 0
    for index in range(len(events) - 1, -1, -1):
        spent += len(json.dumps(events[index].message))
        if spent > budget:
            return events[index + 1 :]
    return events
