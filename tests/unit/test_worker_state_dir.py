"""The worker's state directory is its own: a directory another user owns (or a link) is
refused, files in it are never written through a link, a re-attached pid is signalled only when
its process is this user's, a second worker on it is refused, a full disk stops the jobs rather
than the worker dying with them unwatched, and a job's output takes bounded room on disk."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tenure_worker import jobs
from tenure_worker.jobs import DiskFull, Held, StateDirRefused
from tenure_worker.runner import Worker, WorkerOptions

from tests.unit.test_worker_client import FakeTransport, client, worker
from tests.unit.worker_support import held_record

NOBODY = 65534
root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a directory another user owns takes root"
)


def _opts(state_dir: Path) -> WorkerOptions:
    return WorkerOptions(
        api="http://tenure.test",
        token="tnr_w_x",
        pool="p",
        command=["true"],
        worker_id="w1",
        state_dir=state_dir,
        kill_grace=2.0,
    )


def _held(w: Worker, pid: int, started: str, lease_id: str = "L1") -> Held:
    fence_file = f"{w.state_dir / lease_id}.fence"
    return held_record(
        w.state_dir, lease_id, pid=pid, started=started, fence_file=fence_file, acked_at=time.time()
    )


@pytest.fixture
def neighbours() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of another user, in a session of its own."""
    if os.geteuid() != 0:
        pytest.skip("starting a process as another user takes root")
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sleep", "60"],
        start_new_session=True,
    )
    for _ in range(100):  # until setpriv has become the other user
        if not jobs.owned_by_us(proc.pid):
            break
        time.sleep(0.02)
    yield proc
    proc.kill()
    proc.wait()


# ------------------------------------------------------------- whose directory


@root_only
def test_a_state_dir_another_user_owns_is_refused_and_nothing_is_written_in_it(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("root config line\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, NOBODY, NOBODY)
    (shared / "L1.payload.json").symlink_to(victim)
    (shared / "L1.out").symlink_to(victim)
    before = sorted(p.name for p in shared.iterdir())
    with pytest.raises(StateDirRefused, match=f"uid {NOBODY}"):
        Worker(_opts(shared), client(FakeTransport(), [], retries=0))
    assert victim.read_text() == "root config line\n"
    assert sorted(p.name for p in shared.iterdir()) == before, "no lock, no worker-id"
    seen = shared.stat()
    assert (seen.st_uid, seen.st_mode & 0o777) == (NOBODY, 0o777), "left as it was"


@root_only
@pytest.mark.parametrize("parent_is", ["another user's", "open to all without the sticky bit"])
def test_a_state_dir_under_a_directory_another_user_can_change_is_refused(
    tmp_path: Path, parent_is: str
) -> None:
    # Whoever may rename entries of a directory above the state dir can swap the state dir
    # for one of their own once the worker has checked it, and the worker's later writes and
    # signals follow the path into it.
    parent = tmp_path / "parent"
    parent.mkdir()
    if parent_is == "another user's":
        os.chown(parent, NOBODY, NOBODY)
    else:
        parent.chmod(0o777)
    state = parent / "state"
    with pytest.raises(StateDirRefused, match=f"{parent}"):
        Worker(_opts(state), client(FakeTransport(), [], retries=0))
    assert not state.exists(), "nothing made under it"
    state.mkdir(mode=0o700)
    with pytest.raises(StateDirRefused, match=f"{parent}"):
        Worker(_opts(state), client(FakeTransport(), [], retries=0))
    assert list(state.iterdir()) == [], "no lock, no worker-id"


def test_a_state_dir_under_a_shared_directory_with_the_sticky_bit_is_taken(
    tmp_path: Path,
) -> None:
    # As under /tmp: with the sticky bit, only an entry's owner may rename or remove it.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    Worker(_opts(shared / "state"), client(FakeTransport(), [], retries=0))
    assert (shared / "state").stat().st_mode & 0o777 == 0o700


def test_a_state_dir_reached_through_a_link_in_a_directory_above_is_judged_where_it_lands(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    real.chmod(0o777)
    (tmp_path / "via").symlink_to(real)
    with pytest.raises(StateDirRefused, match=f"{real}"):
        Worker(_opts(tmp_path / "via" / "state"), client(FakeTransport(), [], retries=0))


def test_a_state_dir_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StateDirRefused, match="symbolic link"):
        Worker(_opts(tmp_path / "link"), client(FakeTransport(), [], retries=0))


def test_a_state_dir_of_ours_open_to_others_is_closed_to_them(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    mine.chmod(0o777)
    Worker(_opts(mine), client(FakeTransport(), [], retries=0))
    assert mine.stat().st_mode & 0o777 == 0o700


def test_state_files_are_never_written_through_a_link(tmp_path: Path) -> None:
    w = worker(tmp_path, FakeTransport())
    victim = tmp_path / "victim.conf"
    victim.write_text("keep\n")
    held = _held(w, 0, "")
    for name in ("L1.payload.json", "L1.fence", "L1.json", "L1.fence.tmp", "L1.json.tmp"):
        (w.state_dir / name).symlink_to(victim)
    jobs.write_private(held.payload_file, "{}")
    w._write_fence(held)  # the fence and the state file
    assert victim.read_text() == "keep\n"
    for name in ("L1.payload.json", "L1.fence", "L1.json"):
        assert not (w.state_dir / name).is_symlink()
    (w.state_dir / "L1.out").symlink_to(victim)
    with pytest.raises(OSError):
        jobs.open_output(str(w.state_dir / "L1.out"))
    os.link(victim, w.state_dir / "L1.err")  # a second name for a file elsewhere
    with pytest.raises(StateDirRefused):
        jobs.open_output(str(w.state_dir / "L1.err"))
    assert victim.read_text() == "keep\n"


# ------------------------------------------------------------------ whose pid


def test_a_restarted_worker_never_takes_another_users_process_for_its_job(
    tmp_path: Path, neighbours: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append((pid, sig)))
    w = worker(tmp_path, FakeTransport())
    held = _held(w, neighbours.pid, jobs.start_time(neighbours.pid))
    (w.state_dir / "L1.json").write_text(json.dumps(held.persisted()))
    w._reattach()
    assert "L1" not in w.held, "a process of another user is not the job"
    assert w.unreported["L1"][1:3] == ("fail", {"error": "worker_restarted"})
    assert sent == [] and neighbours.poll() is None


@root_only
def test_a_state_file_another_user_owns_is_left_alone(tmp_path: Path) -> None:
    w = worker(tmp_path, FakeTransport())
    planted = w.state_dir / "L1.json"
    planted.write_text(json.dumps(_held(w, os.getpid(), jobs.start_time(os.getpid())).persisted()))
    os.chown(planted, NOBODY, NOBODY)
    w._reattach()
    assert "L1" not in w.held and "L1" not in w.unreported


# --------------------------------------------------------------- one worker


def test_a_second_worker_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    first = worker(tmp_path, FakeTransport())
    with pytest.raises(StateDirRefused, match=f"pid {os.getpid()}"):
        worker(tmp_path, FakeTransport())
    assert first.state_dir.is_dir()


def test_the_hold_ends_with_the_worker_process(tmp_path: Path) -> None:
    state = tmp_path / "state"
    code = (
        "import sys; from pathlib import Path; from tenure_worker import jobs; "
        "jobs.hold_state_dir(Path(sys.argv[1])); print('held', flush=True); "
        "sys.stdin.readline()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(StateDirRefused, match=rf"another tenure worker \(pid {holder.pid}\)"):
            jobs.hold_state_dir(state)
    finally:
        holder.kill()
        holder.wait()
    os.close(jobs.hold_state_dir(state))  # killed, it holds nothing


# ----------------------------------------------------------------- full disk


def test_a_full_disk_stops_the_jobs_and_ends_the_worker_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Worker(_opts(tmp_path / "state"), client(FakeTransport(), [], retries=0))
    job = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        held = _held(w, job.pid, jobs.start_time(job.pid))
        held.proc = job
        held.last_ok = time.monotonic()
        w.held["L1"] = held

        def full(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(jobs, "_write", full)
        # An answered heartbeat, whose fence cannot be written.
        monkeypatch.setattr(w, "_heartbeat", lambda: w._take_beats([{"id": "L1"}], 0.0))
        reports: list[tuple[str, dict[str, object]]] = []

        def fail(lease_id: str, token: str, body: dict[str, object], **_: object) -> object:
            reports.append((lease_id, body))
            return {"lease": {"state": "failed"}}

        monkeypatch.setattr(w.client, "fail", fail)
        with pytest.raises(DiskFull, match=r"disk .*is full") as ended:
            w.run()
        assert job.wait(timeout=5) == -signal.SIGTERM
        assert "every job was stopped" in str(ended.value)
        assert [r[0] for r in reports] == ["L1"] and "disk" in str(reports[0][1]["error"])
    finally:
        job.kill()
        job.wait()


def test_the_cli_ends_a_worker_whose_disk_is_full_with_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenure_cli.commands import worker as cli_worker
    from tenure_cli.main import main

    class Full:
        def __init__(self, *_: object) -> None:
            pass

        def run(self) -> int:
            raise DiskFull("the disk of the state dir /x is full")

    monkeypatch.setattr(cli_worker, "Worker", Full)
    monkeypatch.setenv("TENURE_TOKEN", "tnr_w_x")
    code = main(["worker", "run", "--api", "https://t.test", "--pool", "p", "--", "true"])
    err = capsys.readouterr().err
    assert code == 1 and err == "error: the disk of the state dir /x is full\n", err


def test_the_cli_refuses_an_unsafe_state_dir_as_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenure_cli.main import main

    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.setenv("TENURE_TOKEN", "tnr_w_x")
    run = ["worker", "run", "--api", "https://t.test", "--pool", "p"]
    code = main([*run, "--state-dir", str(tmp_path / "link"), "--", "true"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: the state dir") and err.count("\n") == 1, err


# ---------------------------------------------------------------- output cap


def test_a_jobs_output_keeps_only_its_last_bytes_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs, "OUTPUT_KEEP_BYTES", 256 * 1024)
    monkeypatch.setattr(jobs, "OUTPUT_SLACK_BYTES", 256 * 1024)
    out = tmp_path / "L1.out"
    fd = jobs.open_output(str(out))
    line = b"x" * 1023 + b"\n"
    try:
        for _ in range(4096):  # 4 MiB, as a job writes it
            os.write(fd, line)
        jobs.free_read_output(str(out))
        os.write(fd, b"last line\n")  # the job goes on appending where it was
    finally:
        os.close(fd)
    seen = out.stat()
    if seen.st_blocks * 512 > 4 * 1024 * 1024:
        pytest.skip("this file system cannot free a file's head")
    assert seen.st_size == 4 * 1024 * 1024 + 10, "offsets are kept"
    assert seen.st_blocks * 512 <= 512 * 1024 + 64 * 1024
    with open(out, "rb") as f:
        f.seek(-(10 + 1024), os.SEEK_END)
        assert f.read() == line + b"last line\n"
