"""`tenure leases download` writes an attachment under its own name in the working directory:
a name anyone could have given it (an inbound email's sender names its attachments), so it
never reaches outside that directory and never writes over a file already there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tenure_cli.commands import detail
from tenure_cli.common import OK, USAGE
from tenure_cli.main import main
from tenure_worker.client import Answer

BYTES = b"attachment bytes"


class _Service:
    base = "http://127.0.0.1:9/api/v1"
    token = "tnr_o_test"

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        assert (method, path) == ("GET", "/leases/L1/attachments")
        return 200, {"attachments": [{"id": "att_1", "filename": self.filename}]}


@pytest.fixture
def download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)

    def run(filename: str, *extra: str) -> int:
        monkeypatch.setattr(detail, "operator_client", lambda args: _Service(filename))
        monkeypatch.setattr(detail, "_get_no_redirect", lambda c, p: Answer(200, {}, BYTES))
        return main(["leases", "download", "L1", "att_1", "-o", "json", *extra])

    return run


def test_a_name_with_directories_is_written_in_the_working_directory(
    download: Any, tmp_path: Path
) -> None:
    assert download("../../escaped.txt") == OK
    assert (tmp_path / "escaped.txt").read_bytes() == BYTES
    assert not (tmp_path.parent.parent / "escaped.txt").exists()


@pytest.mark.parametrize("name", ["", ".", "..", "/", "a\x1b[2Jb"])
def test_a_name_that_names_no_file_is_written_as_the_attachment_id(
    download: Any, tmp_path: Path, name: str
) -> None:
    assert download(name) == OK
    assert (tmp_path / "att_1").read_bytes() == BYTES


def test_a_file_already_there_is_not_written_over(
    download: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".envrc").write_text("mine")
    assert download(".envrc") == USAGE
    assert (tmp_path / ".envrc").read_text() == "mine"
    assert "--to" in capsys.readouterr().err
    assert download(".envrc", "--to", ".envrc") == OK  # named by the caller: written
    assert (tmp_path / ".envrc").read_bytes() == BYTES
