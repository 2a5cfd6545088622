"""The local stack is local: every listener `tenure local` starts binds loopback alone, and
its data directory, DynamoDB Local's file and the admin token are its owner's alone.

DynamoDB Local accepts any credentials and any signature, so a table reachable from the
network is a table anyone there can read, or write a token row into and become admin.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from tenure.config import local_settings
from tenure_cli.local.engine_key import EngineKey
from tenure_cli.local.engines import (
    DynamoDBLocal,
    EngineUnavailable,
    install_dynamodb_local,
    java_available,
)
from tenure_cli.local.stack import TABLE, Stack

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.e2e.support import descendants, reap

LISTEN = "0A"  # TCP_LISTEN as /proc/net/tcp writes the state
DB_FILE = "shared-local-instance.db"  # DynamoDB Local's file with -sharedDb


def _engine_key(data_dir: Path) -> EngineKey:
    key = EngineKey.loads((data_dir / "engine-key").read_text())
    assert key is not None, "the data dir keeps a whole engine key"
    return key


def _table_file(data_dir: Path) -> Path:
    """The stack's table file: DynamoDB Local's file of its engine key, in its one region."""
    return data_dir / "dynamodb" / f"{_engine_key(data_dir).access_key_id}_us-east-1.db"


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


def _kept_table(endpoint: str, key: str) -> None:
    old = _engine_client(endpoint, key)
    old.create_table(
        TableName="kept",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    old.put_item(TableName="kept", Item={"pk": {"S": "row"}})


def test_a_table_file_every_key_shared_becomes_the_engine_keys_own(tmp_path: Path) -> None:
    """A data dir kept from a release that ran DynamoDB Local with `-sharedDb` holds its
    tables in the shared file: with an engine key, the engine finds them under the key."""
    _engines_here()
    cache, place = Path(local_settings().cache_dir), tmp_path / "dynamodb"
    with DynamoDBLocal(cache, place) as shared:
        _kept_table(shared.endpoint, "tenure")
    key = EngineKey.new().access_key_id
    with DynamoDBLocal(cache, place, key=key) as keyed:
        mine = _engine_client(keyed.endpoint, key)
        assert mine.get_item(TableName="kept", Key={"pk": {"S": "row"}})["Item"]
        assert _engine_client(keyed.endpoint, "tenure").list_tables()["TableNames"] == []
    assert (place / f"{key}_us-east-1.db").is_file() and not (place / DB_FILE).exists()


def test_a_replaced_key_hands_its_tables_on_and_opens_nothing_after(tmp_path: Path) -> None:
    """An earlier release kept a bare access key id, which its presigned URLs named: the next
    start retires it for a whole key, and the tables move to the new id. A file some other
    key's client made in the engine's folder is not taken for the stack's."""
    _engines_here()
    cache, data_dir = Path(local_settings().cache_dir), tmp_path / "data"
    place = data_dir / "dynamodb"
    retired = EngineKey.new().access_key_id
    with DynamoDBLocal(cache, place, key=retired) as engine:
        _kept_table(engine.endpoint, retired)
        _kept_table(engine.endpoint, "neighbour")
    (data_dir / "engine-key").write_text(retired + "\n")
    (data_dir / "engine-key").chmod(0o600)
    key = Stack(port=0, data_dir=data_dir, sweep_interval=1.0)._engine_key()
    assert key.access_key_id != retired and _engine_key(data_dir) == key
    assert _mode(data_dir / "engine-key") == "0o600"
    with DynamoDBLocal(cache, place, key=key.access_key_id) as engine:
        mine = _engine_client(engine.endpoint, key.access_key_id)
        assert mine.get_item(TableName="kept", Key={"pk": {"S": "row"}})["Item"]
        assert _engine_client(engine.endpoint, retired).list_tables()["TableNames"] == []
    assert (place / "neighbour_us-east-1.db").is_file()
    again = Stack(port=0, data_dir=data_dir, sweep_interval=1.0)._engine_key()
    assert again == key, "a whole key is kept from start to start"


def _engine_client(endpoint: object, key: str, service: str = "dynamodb", secret: str = "") -> Any:
    """A client of one of the engines, signed (SigV4, presigned URLs too) with `key` and
    `secret`: DynamoDB Local checks no secret; moto's door does."""
    make: Any = boto3.client
    return make(
        service,
        endpoint_url=str(endpoint),
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret or "anything",
        config=Config(signature_version="s3v4") if service == "s3" else None,
    )


@dataclass
class Minted:
    """A stack started on a fresh data directory with no admin token given: it mints one."""

    stack: LocalStack
    info: dict[str, object]
    pids: set[int]
    listening: list[Listener]
    log: str


@pytest.fixture(scope="module")
def minted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Minted]:
    _engines_here()
    data_dir = tmp_path_factory.mktemp("local") / "data"
    # An empty TENURE_ADMIN_TOKEN is none given: the stack mints a token into its data dir.
    stack = start_stack(data_dir, "")
    children: dict[int, str] = {}
    try:
        children = descendants(stack.proc.pid)
        pids = {stack.proc.pid, *children}
        info = json.loads((data_dir / "stack.json").read_text())
        yield Minted(stack, info, pids, listeners(pids), stack.log.read_text(errors="replace"))
    finally:
        stop_stack(stack)
        reap(children)


def test_every_listener_of_the_stack_is_on_loopback(minted: Minted) -> None:
    dynamodb = minted.info["dynamodb"]
    aws = minted.info["aws"]
    assert isinstance(dynamodb, dict) and isinstance(aws, dict)
    assert dynamodb["engine"] == "dynamodb-local"
    expected = {
        str(minted.info["api"]),
        str(minted.info["worker_api"]),
        str(dynamodb["endpoint"]),
        str(aws["endpoint"]),
    }
    ports = {int(url.split(":")[2].split("/")[0]) for url in expected}
    found = {listener.port for listener in minted.listening}
    assert ports <= found, f"{expected} not all among the stack's listeners {minted.listening}"
    exposed = [listener for listener in minted.listening if not listener.loopback]
    assert exposed == [], f"listening beyond loopback: {exposed}"


def test_the_data_dir_the_table_and_the_token_are_the_owners_alone(minted: Minted) -> None:
    data_dir = minted.stack.data_dir
    assert _mode(data_dir) == "0o700"
    assert _mode(data_dir / "dynamodb") == "0o700"
    assert _mode(_table_file(data_dir)) == "0o600"
    assert _mode(data_dir / "admin-token") == "0o600"
    assert _mode(data_dir / "engine-key") == "0o600"
    assert _mode(data_dir / "stack.json") == "0o600"


def test_a_neighbour_on_the_machine_without_the_stacks_key_reads_and_writes_nothing(
    minted: Minted,
) -> None:
    """Loopback is every local user's: the engines answer the stack's own access key alone.
    Without it, DynamoDB Local shows an empty engine (no table to read, none to put a token
    row in) and moto refuses every call, signed or presigned, so nobody else reads the
    attachments or the logs or feeds the inbound queue."""
    dynamodb, aws = minted.info["dynamodb"], minted.info["aws"]
    assert isinstance(dynamodb, dict) and isinstance(aws, dict)
    resources = aws["resources"]

    for guess in ("tenure", "AKIAIOSFODNN7EXAMPLE"):
        ddb = _engine_client(dynamodb["endpoint"], guess)
        assert ddb.list_tables()["TableNames"] == [], guess
        with pytest.raises(ClientError, match="non-existent table"):
            ddb.put_item(TableName=TABLE, Item={"pk": {"S": "TOKEN#x"}, "sk": {"S": "TOKEN"}})
        s3, logs, sqs = (_engine_client(aws["endpoint"], guess, x) for x in ("s3", "logs", "sqs"))
        inbound = resources["inbound_queue_url"]
        for call in (
            s3.list_buckets,
            logs.describe_log_groups,
            functools.partial(sqs.send_message, QueueUrl=inbound, MessageBody="{}"),
        ):
            with pytest.raises(ClientError) as refused:
                call()
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        url = s3.generate_presigned_url(
            "list_objects_v2", Params={"Bucket": resources["attachments_bucket"]}
        )
        assert httpx.get(url).status_code == 403
    assert httpx.get(str(aws["endpoint"])).status_code == 403, "unsigned"

    kept = _engine_key(minted.stack.data_dir)
    key, secret = str(aws["access_key_id"]), str(aws["secret_access_key"])
    assert (key, secret) == (kept.access_key_id, kept.secret)
    assert _mode(minted.stack.data_dir / "engine-key") == "0o600"
    assert TABLE in _engine_client(dynamodb["endpoint"], key).list_tables()["TableNames"]
    assert _engine_client(dynamodb["endpoint"], kept.url_key_id).list_tables()["TableNames"] == []
    own_s3 = _engine_client(aws["endpoint"], key, "s3", secret)
    assert resources["attachments_bucket"] in {b["Name"] for b in own_s3.list_buckets()["Buckets"]}
    url = own_s3.generate_presigned_url(
        "list_objects_v2", Params={"Bucket": resources["attachments_bucket"]}
    )
    assert httpx.get(url).status_code == 200
    with pytest.raises(ClientError):  # the id without its secret
        _engine_client(aws["endpoint"], key, "s3").list_buckets()
    for shown in (key, kept.url_key_id, secret):
        assert shown not in minted.log, "the key is printed nowhere"


def test_the_minted_token_is_not_printed_but_where_it_is_kept(minted: Minted) -> None:
    token = (minted.stack.data_dir / "admin-token").read_text().strip()
    assert token.startswith("tnr_o_")
    assert token not in minted.log, "the admin token was printed (and so is in any CI log)"
    assert str(minted.stack.data_dir / "admin-token") in minted.log


def test_a_start_tightens_a_data_dir_left_open_and_shows_the_token_when_asked(
    tmp_path: Path,
) -> None:
    """A data dir from an earlier release (or a copy) may be open to all: the start closes it."""
    _engines_here()
    data_dir = tmp_path / "data"
    (data_dir / "dynamodb").mkdir(parents=True)
    token = "tnr_o_loose-" + os.urandom(8).hex()
    (data_dir / "admin-token").write_text(token + "\n")
    (data_dir / "dynamodb" / DB_FILE).touch()  # SQLite takes an empty file as an empty database
    for path, mode in [
        (data_dir, 0o755),
        (data_dir / "dynamodb", 0o755),
        (data_dir / "admin-token", 0o644),
        (data_dir / "dynamodb" / DB_FILE, 0o644),
    ]:
        path.chmod(mode)
    stack = start_stack(data_dir, "", extra=("--show-admin-token",))
    children: dict[int, str] = {}
    try:
        children = descendants(stack.proc.pid)
        assert _mode(data_dir) == "0o700"
        assert _mode(data_dir / "dynamodb") == "0o700"
        assert _mode(data_dir / "admin-token") == "0o600"
        assert not (data_dir / "dynamodb" / DB_FILE).exists(), "taken as the key's own file"
        assert _mode(_table_file(data_dir)) == "0o600"
        with stack.client(token) as admin:
            assert admin.get("/tokens").status_code == 200  # the kept token is the admin's
        assert token in stack.log.read_text(errors="replace")
    finally:
        stop_stack(stack)
        reap(children)


def test_the_token_file_is_never_open_to_others_while_it_holds_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Created owner-only, not chmod-ed afterwards: with every chmod a no-op, a file made with
    the umask's 0644 and tightened later stays 0644."""
    from tenure_cli.local.stack import Stack

    monkeypatch.delenv("TENURE_ADMIN_TOKEN", raising=False)
    for module, name in [(os, "chmod"), (os, "fchmod"), (Path, "chmod")]:
        monkeypatch.setattr(module, name, lambda *args, **kwargs: None)
    umask = os.umask(0o022)
    try:
        token, path = Stack(port=0, data_dir=tmp_path, sweep_interval=1.0)._admin_token()
    finally:
        os.umask(umask)
    assert path == tmp_path / "admin-token"
    assert path.read_text().strip() == token
    assert _mode(path) == "0o600"
    assert token not in capsys.readouterr().out
