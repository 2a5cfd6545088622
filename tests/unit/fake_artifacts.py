"""In-memory stand-ins for the attachments bucket and the log group (the BlobStore and
LogSink ports), with the adapters' semantics: what tests/aws holds S3 and Logs to."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from tenure.app.ports import Blob, LogLine, LogPage
from tenure.domain.errors import ValidationFailed
from tenure.store import cursors

_SHAPE = re.compile(r"[^|]+/[^|]*\|\d+")


class FakeBlobs:
    def __init__(self, clock: Callable[[], int] = lambda: 0) -> None:
        self.clock = clock  # S3's own clock: when an object was written (ms)
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.modified: dict[str, int] = {}
        self.deleted: Counter[str] = Counter()  # key -> how many times a delete named it
        self.presigned: list[tuple[str, str, int]] = []

    def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_s: int
    ) -> tuple[str, dict[str, str]]:
        self.presigned.append((key, content_type, byte_size))
        url = f"https://bucket.example/{key}?X-Amz-Expires={expires_s}"
        return url, {"Content-Type": content_type, "Content-Length": str(byte_size)}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = (data, content_type)
        self.modified[key] = self.clock()

    def head(self, key: str) -> Blob | None:
        found = self.objects.get(key)
        return Blob(len(found[0]), found[1], self.modified[key]) if found else None

    def get(self, key: str) -> bytes | None:
        found = self.objects.get(key)
        return found[0] if found else None

    def presign_get(self, key: str, filename: str, content_type: str, expires_s: int) -> str:
        return f"https://bucket.example/{key}?download={filename}&X-Amz-Expires={expires_s}"

    def origin(self) -> str:
        return "https://bucket.example"

    def copy(self, source: str, target: str) -> None:
        self.objects[target] = self.objects[source]
        self.modified[target] = self.clock()

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self.deleted[key] += 1
            self.objects.pop(key, None)


class FakeLogSink:
    def __init__(self) -> None:
        self.streams: dict[str, list[LogLine]] = {}
        self.deleted: Counter[str] = Counter()
        self.made: list[str] = []  # the streams appended to as new ones, in order

    def append(self, lease_id: str, container: str, lines: list[LogLine], new: bool = False) -> int:
        if new:
            self.made.append(f"{lease_id}/{container}")
        stream = self.streams.setdefault(f"{lease_id}/{container}", [])
        stream.extend(lines)
        stream.sort(key=lambda x: x.timestamp)
        return len(lines)

    def read(
        self,
        lease_id: str,
        container: str | None,
        since: int | None,
        tail: int | None,
        cursor: str | None,
        limit: int,
    ) -> LogPage:
        scope = f"{lease_id}/{container or ''}"
        lines = [
            line
            for name, stream in self.streams.items()
            if name.startswith(scope if container else f"{lease_id}/")
            and (container is None or name == scope)
            for line in stream
            if since is None or line.timestamp >= since
        ]
        lines.sort(key=lambda x: x.timestamp)
        if tail is not None:
            return LogPage(lines[-tail:], len(lines) > tail, None)
        start = 0
        if cursor:
            found, _, offset = cursors.decode(cursor, "l", _SHAPE).partition("|")
            if found != scope:
                raise ValidationFailed("cursor: it belongs to another lease or container")
            start = int(offset)
        page = lines[start : start + limit]
        more = start + limit < len(lines)
        return LogPage(
            page, False, cursors.encode("l", f"{scope}|{start + limit}") if more else None
        )

    def delete(self, lease_id: str) -> int:
        names = [n for n in self.streams if n.startswith(f"{lease_id}/")]
        for name in names:
            self.deleted[name] += 1
            del self.streams[name]
        return len(names)
