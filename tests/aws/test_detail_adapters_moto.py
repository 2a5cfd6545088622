"""The S3 and CloudWatch Logs adapters (store/blobs.py, store/logs.py) on moto: what the
in-memory fakes of the unit tier promise, held against the real APIs' semantics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from moto import mock_aws
from tenure import wiring
from tenure.app.ports import LogLine
from tenure.domain.errors import ValidationFailed
from tenure.store.blobs import S3Blobs
from tenure.store.logs import EVENT_BYTES, CloudWatchLogSink
from tenure_cli.local.engines import use_local_credentials

REGION = "us-east-1"
GROUP = "/tenure/test/LeaseLogs"
# CloudWatch refuses events older than 14 days: these tests ship lines from about now.
T0 = (time.time_ns() // 1_000_000) - 3_600_000


@pytest.fixture
def aws() -> Iterator[None]:
    use_local_credentials()
    with mock_aws():
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
    blobs.put("leases/l1/a1", b"hello", "text/plain")
    assert blobs.head("leases/l1/a1") == (5, "text/plain")
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
