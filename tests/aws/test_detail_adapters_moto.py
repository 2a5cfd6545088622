"""The S3 and CloudWatch Logs adapters (store/blobs.py, store/logs.py) on moto: what the
in-memory fakes of the unit tier promise, held against the real APIs' semantics."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from tenure import wiring
from tenure.app.artifacts.logs import MAX_BATCH_CONTAINERS
from tenure.app.ports import LogLine
from tenure.domain.errors import ValidationFailed
from tenure.store import logs as logs_store
from tenure.store.blobs import S3Blobs
from tenure.store.logs import EVENT_BYTES, MAX_STREAMS, CloudWatchLogSink
from tenure.wiring import ManualClock

from tests.aws.mocked import mocked_aws
from tests.unit.support import Rig, as_lease, with_artifacts

REGION = "us-east-1"
GROUP = "/tenure/test/LeaseLogs"
# CloudWatch refuses events older than 14 days: these tests ship lines from about now.
T0 = (time.time_ns() // 1_000_000) - 3_600_000


@pytest.fixture
def aws() -> Iterator[None]:
    with mocked_aws():
        yield


@pytest.fixture
def sink(aws: None) -> CloudWatchLogSink:
    client = boto3.client("logs", region_name=REGION)
    client.create_log_group(logGroupName=GROUP)
    return CloudWatchLogSink(client, GROUP)


@pytest.fixture
def blobs(aws: None) -> S3Blobs:
    client = wiring.aws_client("s3")  # configured as the service builds it (SigV4)
    client.create_bucket(Bucket="attachments")
    return S3Blobs(client, "attachments")


def lines(*specs: tuple[int, str, str], container: str = "main") -> list[LogLine]:
    return [LogLine(T0 + at, container, stream, message) for at, stream, message in specs]


# ---------------------------------------------------------------------------- logs


def test_lines_shipped_out_of_order_read_back_oldest_first_with_their_stream(
    sink: CloudWatchLogSink,
) -> None:
    shipped = lines((3, "stdout", "three"), (1, "stderr", "one"), (2, "stdout", "two"))
    assert sink.append("lease_a", "main", shipped) == 3
    page = sink.read("lease_a", None, None, None, None, 100)
    assert [(x.message, x.stream, x.container) for x in page.events] == [
        ("one", "stderr", "main"),
        ("two", "stdout", "main"),
        ("three", "stdout", "main"),
    ]
    assert page.next_cursor is None and not page.truncated


def test_a_lease_without_logs_reads_empty_and_never_sees_another_leases(
    sink: CloudWatchLogSink,
) -> None:
    sink.append("lease_a", "main", lines((1, "stdout", "mine")))
    assert sink.read("lease_b", None, None, None, None, 100).events == []
    assert sink.read("lease_b", "main", None, 5, None, 100).events == []
    assert sink.read("lease_b", "main", None, None, None, 100).events == []


def test_containers_are_streams_of_their_own(sink: CloudWatchLogSink) -> None:
    sink.append("lease_a", "main", lines((1, "stdout", "m")))
    sink.append("lease_a", "side", lines((2, "stdout", "s"), container="side"))
    both = sink.read("lease_a", None, None, None, None, 100).events
    assert [(x.container, x.message) for x in both] == [("main", "m"), ("side", "s")]
    assert [x.message for x in sink.read("lease_a", "side", None, None, None, 100).events] == ["s"]


def test_containers_interleave_oldest_first_on_every_page_and_a_container_filters(
    sink: CloudWatchLogSink,
) -> None:
    # 1,150 lines, main on even milliseconds and side on odd ones, each container shipped in
    # one call after the other: read back by time, never one stream after the other.
    sink.append("lease_a", "main", lines(*[(2 * i, "stdout", f"m{i}") for i in range(575)]))
    side = [(2 * i + 1, "stderr", f"s{i}") for i in range(575)]
    sink.append("lease_a", "side", lines(*side, container="side"))
    pages: list[list[LogLine]] = []
    cursor = None
    for _ in range(5):
        page = sink.read("lease_a", None, None, None, cursor, 1000)
        pages.append(page.events)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [len(p) for p in pages] == [1000, 150] and cursor is None
    seen = [x for p in pages for x in p]
    assert [x.timestamp for x in seen] == [T0 + n for n in range(1150)]
    assert [x.container for x in seen[:4]] == ["main", "side", "main", "side"]
    only = sink.read("lease_a", "side", None, None, None, 1000)
    assert [x.message for x in only.events] == [f"s{i}" for i in range(575)]
    assert only.next_cursor is None


def test_tail_and_since(sink: CloudWatchLogSink) -> None:
    sink.append("lease_a", "main", lines(*[(i, "stdout", f"l{i}") for i in range(6)]))
    tail = sink.read("lease_a", None, None, 2, None, 100)
    assert [x.message for x in tail.events] == ["l4", "l5"] and tail.truncated
    whole = sink.read("lease_a", "main", None, 6, None, 100)
    assert len(whole.events) == 6 and not whole.truncated
    since = sink.read("lease_a", None, T0 + 4, None, None, 100)
    assert [x.message for x in since.events] == ["l4", "l5"]


def test_a_tail_over_many_containers_keeps_its_newest_lines_within_what_an_answer_carries(
    sink: CloudWatchLogSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each stream's read may bring up to 1 MB, and a lease may have 50 containers: merged
    # whole, a tail could pass the 6 MB a Lambda answer carries and fail for every reader.
    monkeypatch.setattr(logs_store, "MAX_TAIL_BYTES", 3100)
    for n, container in enumerate(("a", "b", "c")):
        shipped = [(10 * i + n, "stdout", f"{container}{i}" + "x" * 498) for i in range(4)]
        sink.append("lease_a", container, lines(*shipped, container=container))
    tail = sink.read("lease_a", None, None, 100, None, 100)
    assert [x.message[:2] for x in tail.events] == ["a2", "b2", "c2", "a3", "b3", "c3"]
    assert tail.truncated, "the older lines it left out are said"
    assert sum(len(x.message) + 2 for x in tail.events) <= 3100  # as JSON strings


def test_pages_follow_the_cursor_and_a_cursor_of_another_lease_is_refused(
    sink: CloudWatchLogSink,
) -> None:
    sink.append("lease_a", "main", lines(*[(i, "stdout", f"l{i}") for i in range(5)]))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = sink.read("lease_a", None, None, None, cursor, 2)
        seen += [x.message for x in page.events]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["l0", "l1", "l2", "l3", "l4"]
    first = sink.read("lease_a", None, None, None, None, 2).next_cursor
    assert first is not None
    with pytest.raises(ValidationFailed):
        sink.read("lease_b", None, None, None, first, 2)


def test_a_batch_spanning_more_than_a_day_is_split_and_all_of_it_kept(
    sink: CloudWatchLogSink,
) -> None:
    day = 86_400_000
    batch = [LogLine(T0 - n * day // 2, "main", "stdout", f"l{n}") for n in range(5)]
    assert sink.append("lease_a", "main", batch) == 5
    assert len(sink.read("lease_a", None, None, None, None, 100).events) == 5


def test_a_line_too_long_for_one_event_is_cut_and_says_so(sink: CloudWatchLogSink) -> None:
    sink.append("lease_a", "main", [LogLine(T0, "main", "stdout", "x" * (300 * 1024))])
    (event,) = sink.read("lease_a", None, None, None, None, 10).events
    assert event.message.endswith("more bytes]") and len(event.message) <= EVENT_BYTES


def test_delete_removes_every_stream_of_the_lease_only(sink: CloudWatchLogSink) -> None:
    sink.append("lease_a", "main", lines((1, "stdout", "a")))
    sink.append("lease_a", "side", lines((1, "stdout", "a"), container="side"))
    sink.append("lease_b", "main", lines((1, "stdout", "b")))
    assert sink.delete("lease_a") == 2
    assert sink.read("lease_a", None, None, None, None, 10).events == []
    assert [x.message for x in sink.read("lease_b", None, None, None, None, 10).events] == ["b"]
    assert sink.delete("lease_a") == 0


# ----------------------------------------------------------------------- attachments


def test_objects_round_trip_and_a_missing_one_heads_as_none(blobs: S3Blobs) -> None:
    before = int(time.time()) * 1000
    blobs.put("leases/l1/a1", b"hello", "text/plain")
    seen = blobs.head("leases/l1/a1")
    assert seen is not None and (seen.size, seen.content_type) == (5, "text/plain")
    # When S3 wrote it, by S3's clock (to the second): an upload is judged by it.
    assert before <= seen.modified_at <= time.time() * 1000
    assert blobs.get("leases/l1/a1") == b"hello"
    assert blobs.head("leases/l1/nope") is None
    blobs.delete(["leases/l1/a1", "leases/l1/nope"])
    assert blobs.head("leases/l1/a1") is None and blobs.get("leases/l1/a1") is None


def test_the_upload_url_signs_the_declared_type_and_length(blobs: S3Blobs) -> None:
    url, headers = blobs.presign_put("leases/l1/a1", "application/json", 42, 900)
    query = parse_qs(urlsplit(url).query)
    assert query["X-Amz-Expires"] == ["900"]
    assert set(query["X-Amz-SignedHeaders"][0].split(";")) >= {"content-type", "host"}
    assert "content-length" in query["X-Amz-SignedHeaders"][0]
    assert headers == {"Content-Type": "application/json", "Content-Length": "42"}


def test_the_download_url_names_the_file_and_its_type(blobs: S3Blobs) -> None:
    url = blobs.presign_get("leases/l1/a1", "report 1.pdf", "application/pdf", 300)
    query = parse_qs(urlsplit(url).query)
    assert query["response-content-type"] == ["application/pdf"]
    assert "report%201.pdf" in query["response-content-disposition"][0]


def test_events_cloudwatch_refuses_are_not_counted_as_accepted(sink: CloudWatchLogSink) -> None:
    old = LogLine(T0 - 20 * 86_400_000, "main", "stdout", "too old")
    assert sink.append("lease_a", "main", [old, *lines((1, "stdout", "fine"))]) == 1


# ------------------------------------------------- what a batch of logs costs in calls


def _calls(sink: CloudWatchLogSink) -> Counter[str]:
    """The CloudWatch Logs operations the sink's client sends from now on, by name."""
    seen: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        seen[model.name] += 1

    sink.client.meta.events.register("before-call.cloudwatch-logs", note)
    return seen


def test_a_new_container_is_made_then_written_and_a_known_one_only_written(
    sink: CloudWatchLogSink,
) -> None:
    calls = _calls(sink)
    assert sink.append("lease_a", "main", lines((1, "stdout", "a")), new=True) == 1
    assert calls == {"CreateLogStream": 1, "PutLogEvents": 1}  # no write that must fail first
    assert sink.append("lease_a", "main", lines((2, "stdout", "b"))) == 1
    assert calls == {"CreateLogStream": 1, "PutLogEvents": 2}
    assert [x.message for x in sink.read("lease_a", None, None, None, None, 10).events] == [
        "a",
        "b",
    ]


def test_a_stream_another_instance_made_is_written_without_making_it(
    sink: CloudWatchLogSink,
) -> None:
    sink.append("lease_a", "main", lines((1, "stdout", "a")), new=True)
    other = CloudWatchLogSink(boto3.client("logs", region_name=REGION), GROUP)
    calls = _calls(other)
    assert other.append("lease_a", "main", lines((2, "stdout", "b"))) == 1
    assert calls == {"PutLogEvents": 1}


def test_a_stream_that_is_not_there_is_made_when_a_write_finds_it_missing(
    sink: CloudWatchLogSink,
) -> None:
    # The request that counted the container failed before it made the stream.
    calls = _calls(sink)
    assert sink.append("lease_a", "main", lines((1, "stdout", "a"))) == 1
    assert calls == {"PutLogEvents": 2, "CreateLogStream": 1}
    assert len(sink.read("lease_a", None, None, None, None, 10).events) == 1


def test_a_lease_token_cannot_fan_its_logs_out_over_hundreds_of_streams(
    sink: CloudWatchLogSink,
) -> None:
    """A batch whose every event names a new container: refused before any call, and a
    lease's streams stop at what the reads and the reclaim reach."""
    rig = with_artifacts(Rig(clock=ManualClock(T0)))
    rig.svc.artifacts.log_sink = sink
    lease = rig.running()
    me = as_lease(lease.id)
    calls = _calls(sink)

    def batch(names: list[str]) -> list[dict[str, Any]]:
        return [{"stream": "stdout", "message": n, "container": n} for n in names]

    with pytest.raises(ValidationFailed, match=r"^events: "):
        rig.svc.logs.post_logs(me, lease.id, batch([f"c{i}" for i in range(300)]))
    assert calls == {}
    names = [f"c{i:02d}" for i in range(60)]
    refused = 0
    for at in range(0, len(names), MAX_BATCH_CONTAINERS):
        try:
            rig.svc.logs.post_logs(me, lease.id, batch(names[at : at + MAX_BATCH_CONTAINERS]))
        except ValidationFailed:
            refused += 1
    assert refused == 2  # 48 counted, then 8 more would be 56
    assert calls == {"CreateLogStream": 48, "PutLogEvents": 48}
    described = sink.client.describe_log_streams(
        logGroupName=GROUP, logStreamNamePrefix=f"{lease.id}/"
    )
    assert len(described["logStreams"]) == 48 <= MAX_STREAMS
    assert sink.delete(lease.id) == 48
