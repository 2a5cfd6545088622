"""The local stack is local: every listener `tenure local` starts binds loopback alone, and
its data directory and DynamoDB Local's file are its owner's alone.

DynamoDB Local accepts any credentials and any signature, so a table reachable from the
network is a table anyone there can read, or write a token row into and become admin.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tenure.config import local_settings
from tenure_cli.local.engines import (
    DynamoDBLocal,
    EngineUnavailable,
    install_dynamodb_local,
    java_available,
)

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.e2e.support import descendants, reap

LISTEN = "0A"  # TCP_LISTEN as /proc/net/tcp writes the state
DB_FILE = "shared-local-instance.db"  # DynamoDB Local's file with -sharedDb


@dataclass(frozen=True)
class Listener:
    pid: int
    address: str
    port: int

    @property
    def loopback(self) -> bool:
        ip = ipaddress.ip_address(self.address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # Java's sockets are IPv6 ones, 127.0.0.1 among them mapped
        return ip.is_loopback


def _address(hex_address: str) -> str:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in the machine's byte order."""
    words = [int(hex_address[i : i + 8], 16) for i in range(0, len(hex_address), 8)]
    raw = b"".join(struct.pack("=I", word) for word in words)
    return str(ipaddress.ip_address(raw))


def _listening_inodes() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket on this machine."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN:
                address, port = local.split(":")
                found[inode] = (_address(address), int(port, 16))
    return found


def listeners(pids: set[int]) -> list[Listener]:
    """The listening TCP sockets that the processes `pids` hold open."""
    listening = _listening_inodes()
    found = []
    for pid in sorted(pids):
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # ended since
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[len("socket:[") : -1])
                if inode in listening:
                    found.append(Listener(pid, *listening[inode]))
    return found


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def _engines_here() -> None:
    try:
        if not java_available():
            raise EngineUnavailable("java is not installed")
        install_dynamodb_local(Path(local_settings().cache_dir))
    except EngineUnavailable as why:
        if local_settings().require_engines:
            pytest.fail(f"engine unavailable: {why}")
        pytest.skip(f"engine unavailable: {why}")


@pytest.mark.parametrize(
    ("written", "address"),
    [
        ("0100007F", "127.0.0.1"),
        ("00000000", "0.0.0.0"),
        ("00000000000000000000000001000000", "::1"),
        ("00000000000000000000000000000000", "::"),
        ("0000000000000000FFFF00000100007F", "::ffff:127.0.0.1"),
    ],
)
def test_the_socket_tables_are_read_as_the_kernel_writes_them(written: str, address: str) -> None:
    if struct.pack("=I", 1) != b"\x01\0\0\0":
        pytest.skip("the literals above are as a little-endian machine writes them")
    assert ipaddress.ip_address(_address(written)) == ipaddress.ip_address(address)
    assert Listener(0, _address(written), 1).loopback == (address not in ("0.0.0.0", "::"))


def test_dynamodb_local_listens_on_loopback_alone(tmp_path: Path) -> None:
    _engines_here()
    with DynamoDBLocal(Path(local_settings().cache_dir), tmp_path / "dynamodb") as engine:
        assert engine.proc is not None
        found = listeners({engine.proc.pid})
        assert engine.port in {listener.port for listener in found}, found
        exposed = [listener for listener in found if not listener.loopback]
        assert exposed == [], f"DynamoDB Local listens beyond loopback: {exposed}"
        assert _mode(tmp_path / "dynamodb") == "0o700"
        assert _mode(tmp_path / "dynamodb" / DB_FILE) == "0o600"


@dataclass
class Started:
    """A stack started on a fresh data directory."""

    stack: LocalStack
    info: dict[str, object]
    pids: set[int]
    listening: list[Listener]


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    _engines_here()
    data_dir = tmp_path_factory.mktemp("local") / "data"
    stack = start_stack(data_dir, "tnr_o_local-" + os.urandom(8).hex())
    children: dict[int, str] = {}
    try:
        children = descendants(stack.proc.pid)
        pids = {stack.proc.pid, *children}
        info = json.loads((data_dir / "stack.json").read_text())
        yield Started(stack, info, pids, listeners(pids))
    finally:
        stop_stack(stack)
        reap(children)


def test_every_listener_of_the_stack_is_on_loopback(started: Started) -> None:
    dynamodb = started.info["dynamodb"]
    aws = started.info["aws"]
    assert isinstance(dynamodb, dict) and isinstance(aws, dict)
    assert dynamodb["engine"] == "dynamodb-local"
    expected = {
        str(started.info["api"]),
        str(started.info["worker_api"]),
        str(dynamodb["endpoint"]),
        str(aws["endpoint"]),
    }
    ports = {int(url.split(":")[2].split("/")[0]) for url in expected}
    found = {listener.port for listener in started.listening}
    assert ports <= found, f"{expected} not all among the stack's listeners {started.listening}"
    exposed = [listener for listener in started.listening if not listener.loopback]
    assert exposed == [], f"listening beyond loopback: {exposed}"


def test_the_data_dir_and_the_table_are_the_owners_alone(started: Started) -> None:
    data_dir = started.stack.data_dir
    assert _mode(data_dir) == "0o700"
    assert _mode(data_dir / "dynamodb") == "0o700"
    assert _mode(data_dir / "dynamodb" / DB_FILE) == "0o600"


def test_a_start_tightens_a_data_dir_left_open(tmp_path: Path) -> None:
    """A data dir from an earlier release (or a copy) may be open to all: the start closes it."""
    _engines_here()
    data_dir = tmp_path / "data"
    (data_dir / "dynamodb").mkdir(parents=True)
    (data_dir / "dynamodb" / DB_FILE).touch()  # SQLite takes an empty file as an empty database
    for path, mode in [
        (data_dir, 0o755),
        (data_dir / "dynamodb", 0o755),
        (data_dir / "dynamodb" / DB_FILE, 0o644),
    ]:
        path.chmod(mode)
    stack = start_stack(data_dir, "tnr_o_local-" + os.urandom(8).hex())
    children: dict[int, str] = {}
    try:
        children = descendants(stack.proc.pid)
        assert _mode(data_dir) == "0o700"
        assert _mode(data_dir / "dynamodb") == "0o700"
        assert _mode(data_dir / "dynamodb" / DB_FILE) == "0o600"
    finally:
        stop_stack(stack)
        reap(children)
