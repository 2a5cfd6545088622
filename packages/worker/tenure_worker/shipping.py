"""Ships a job's stdout and stderr to its lease's logs, line by line, batched on
the worker's renew beat, in bounded memory.

The job writes its output to files in the worker's state directory (so it survives the worker
and a restarted worker re-attaches), and this reads them on from the last position shipped.
When the job prints faster than the service takes it, the oldest unshipped lines are dropped
and the next batch opens with a line saying how many; nothing is dropped silently.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A POST of logs carries at most 1,000 events and 256 KB: batches stay under.
BATCH_EVENTS = 1000
BATCH_BYTES = 240 * 1024
# Bounded memory per job: lines waiting to be shipped, and bytes read per file per beat.
MAX_PENDING_LINES = 5000
READ_CHUNK = 256 * 1024
# A line longer than this is cut: its first MAX_LINE_BYTES are kept and shipped at its end
# with a count of the bytes left out, however many reads it spans. A backlog on disk past
# MAX_BACKLOG_BYTES is skipped over, its lines counted as dropped, so a job that floods its
# output cannot stall shipping.
MAX_LINE_BYTES = 16 * 1024
MAX_BACKLOG_BYTES = 8 * 1024 * 1024
# After a job ends, the rest of its files is read in at most this many chunks per stream.
FINAL_CHUNKS = 64

STREAMS = ("stdout", "stderr")


@dataclass
class _Line:
    stream: str
    end: int  # the file offset just past this line: shipped up to here
    timestamp: int
    message: str
    seq: int = 0  # order of reading: a batch in flight is popped by it, not by position


class LogShipper:
    """One job's output files, read on from `positions` (offsets already shipped)."""

    def __init__(self, files: dict[str, str], positions: dict[str, int]) -> None:
        # Read by the worker's loop, shipped by its LogPump thread: one lock for both.
        self.lock = threading.RLock()
        self.seq = itertools.count(1)
        self.files = files
        self.read_pos = {s: positions.get(s, 0) for s in STREAMS}
        self.shipped = dict(self.read_pos)
        # The line being read, up to MAX_LINE_BYTES of it, and how many bytes past those.
        self.partial = {s: b"" for s in STREAMS}
        self.cut = {s: 0 for s in STREAMS}
        self.pending: deque[_Line] = deque()
        self.dropped = 0
        self.enabled = True

    # ------------------------------------------------------------------ reading

    def collect(self, final: bool = False) -> None:
        """Read what the job wrote since the last call; `final`: the job has ended, so read
        to the end (bounded) and ship a last line without its newline too."""
        with self.lock:
            self._collect(final)

    def _collect(self, final: bool) -> None:
        for stream in STREAMS:
            for _ in range(FINAL_CHUNKS if final else 1):
                if not self._read_chunk(stream):
                    break
            if final and self.partial[stream]:
                self._end_line(stream, self.read_pos[stream])
        self._bound()

    def _read_chunk(self, stream: str) -> bool:
        path = self.files[stream]
        try:
            size = os.path.getsize(path)
        except OSError:
            return False
        pos = self.read_pos[stream]
        if size - pos > MAX_BACKLOG_BYTES:
            pos = self._skip(stream, size - MAX_BACKLOG_BYTES)
        if size <= pos:
            return False
        with open(path, "rb") as f:
            f.seek(pos)
            chunk = f.read(READ_CHUNK)
        self.read_pos[stream] = pos + len(chunk)
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            pos += len(piece) + 1
            self._extend(stream, piece)
            self._end_line(stream, pos)
        self._extend(stream, rest)
        return len(chunk) == READ_CHUNK

    def _extend(self, stream: str, piece: bytes) -> None:
        """Add a piece of the line being read: kept up to MAX_LINE_BYTES, counted past it."""
        room = MAX_LINE_BYTES - len(self.partial[stream])
        if len(piece) <= room:
            self.partial[stream] += piece
        else:
            self.partial[stream] += piece[: max(room, 0)]
            self.cut[stream] += len(piece) - max(room, 0)

    def _end_line(self, stream: str, end: int) -> None:
        self._add(stream, self.partial[stream], self.cut[stream], end)
        self.partial[stream] = b""
        self.cut[stream] = 0

    def _skip(self, stream: str, to: int) -> int:
        """Skip the file ahead to `to`, counting the lines skipped as dropped."""
        skipped = self.partial[stream].count(b"\n")
        with open(self.files[stream], "rb") as f:
            f.seek(self.read_pos[stream])
            left = to - self.read_pos[stream]
            while left > 0:
                block = f.read(min(READ_CHUNK, left))
                if not block:
                    break
                skipped += block.count(b"\n")
                left -= len(block)
        self.dropped += max(1, skipped)
        self.partial[stream] = b""
        self.cut[stream] = 0
        self.read_pos[stream] = to
        self.shipped[stream] = max(self.shipped[stream], to)
        return to

    def _add(self, stream: str, raw: bytes, cut: int, end: int) -> None:
        if cut:
            text = f"{raw.decode(errors='ignore')} …[cut: {cut} more bytes]"
        else:
            text = raw.rstrip(b"\r").decode(errors="replace")
        now = time.time_ns() // 1_000_000
        self.pending.append(_Line(stream, end, now, text, next(self.seq)))

    def _bound(self) -> None:
        while len(self.pending) > MAX_PENDING_LINES:
            gone = self.pending.popleft()
            self.shipped[gone.stream] = max(self.shipped[gone.stream], gone.end)
            self.dropped += 1

    # ----------------------------------------------------------------- shipping

    def ship(self, send: Callable[[list[dict[str, Any]]], None], max_posts: int = 2) -> int:
        """Send pending lines in at most `max_posts` batches; a failed send keeps them (and
        raises). Answers how many lines were shipped. The send runs outside the lock, so the
        worker's loop goes on reading (and bounding) meanwhile."""
        shipped = 0
        for _ in range(max_posts):
            with self.lock:
                if not self.pending and not self.dropped:
                    break
                events, last_seq, noted = self._batch()
            send(events)
            with self.lock:
                while self.pending and self.pending[0].seq <= last_seq:
                    line = self.pending.popleft()
                    self.shipped[line.stream] = max(self.shipped[line.stream], line.end)
                    shipped += 1
                self.dropped -= noted  # what the batch's note counted; more may have come
        return shipped

    def _batch(self) -> tuple[list[dict[str, Any]], int, int]:
        """(events, the seq of the last line in them, the dropped count its note names)."""
        events: list[dict[str, Any]] = []
        size = 0
        noted = self.dropped
        if self.dropped:
            note = f"[tenure worker] {self.dropped} lines dropped (the job printed faster "
            note += "than they could be shipped)"
            # Stamped as the first line kept after the gap, so it reads before that line.
            at = self.pending[0].timestamp if self.pending else _now()
            events.append({"stream": "stderr", "message": note, "timestamp": at})
            size += len(note)
        last_seq = 0
        for line in self.pending:
            cost = len(line.message.encode()) + 1
            if len(events) >= BATCH_EVENTS or (events and size + cost > BATCH_BYTES):
                break
            events.append(
                {"stream": line.stream, "message": line.message, "timestamp": line.timestamp}
            )
            size += cost
            last_seq = line.seq
        return events, last_seq, noted

    def positions(self) -> dict[str, int]:
        with self.lock:
            return dict(self.shipped)

    @property
    def idle(self) -> bool:
        with self.lock:
            return not self.pending and not self.dropped


Send = Callable[[str, str, list[dict[str, Any]]], None]  # (lease id, lease token, events)


@dataclass
class _Job:
    shipper: LogShipper
    token: str
    finished: bool = False  # the job ended: forget it once everything is shipped


class LogPump:
    """Ships every job's pending lines from a thread of its own, so a slow or unreachable
    service never holds up the worker's heartbeats and fencing (its loop only reads files).
    `on_refused` hears of a lease that refused its logs (an answer, not an outage)."""

    def __init__(
        self,
        send: Send,
        every: float,
        on_refused: Callable[[str, Exception], None],
        refusals: tuple[type[Exception], ...],
        unreachable: tuple[type[Exception], ...],
    ) -> None:
        self.send = send
        self.every = every
        self.on_refused = on_refused
        self.refusals = refusals
        self.unreachable = unreachable
        self.jobs: dict[str, _Job] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tenure-log-pump", daemon=True)
        self.thread.start()

    def track(self, lease_id: str, shipper: LogShipper, token: str, finished: bool) -> None:
        with self.lock:
            job = self.jobs.setdefault(lease_id, _Job(shipper, token))
            job.finished = job.finished or finished
        # Woken right after the loop's heartbeat was answered: a batch follows the beat
        # instead of competing with it (a single-process front door serves them in turn).
        self.wake.set()

    def drain(self, timeout: float) -> bool:
        """Wait (bounded) until every tracked job's lines are shipped; True when they are."""
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            with self.lock:
                busy = [j for j in self.jobs.values() if j.shipper.enabled and not j.shipper.idle]
            if not busy:
                return True
            self.wake.set()
            time.sleep(0.05)
        return False

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.wake.wait(self.every)
            self.wake.clear()
            with self.lock:
                jobs = list(self.jobs.items())
            for lease_id, job in jobs:
                try:
                    self._ship(lease_id, job)
                except Exception as err:  # said out loud; the lines stay for the next round
                    self.on_refused(lease_id, err)

    def _ship(self, lease_id: str, job: _Job) -> None:
        if job.shipper.enabled:
            try:
                job.shipper.ship(lambda events: self.send(lease_id, job.token, events), 8)
            except self.unreachable:
                return  # kept for the next round
            except self.refusals as refused:  # an answer: this lease takes no logs
                job.shipper.enabled = False
                self.on_refused(lease_id, refused)
        if job.finished and (job.shipper.idle or not job.shipper.enabled):
            with self.lock:
                self.jobs.pop(lease_id, None)


def _now() -> int:
    return time.time_ns() // 1_000_000
