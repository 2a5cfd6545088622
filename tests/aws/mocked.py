"""AWS mocked in-process by moto, for a test's fixture: `with mocked_aws(): ...`.

moto's `mock_aws()` hides boto3's default session for its duration and lets the first client
made inside build a new one, which reads botocore's endpoint rules and service models from
their JSON files again: a third of test_store_contract_moto.py's CPU (53 s of CPU for the file
alone, 37 s with one session kept). Here the mocked clients share one default session of their
own instead, made inside the first mock of the process and handed to every later one, while
clients made outside any mock still see boto3's usual default session: the same isolation moto
gives, without the reloading. moto's stubber is on every session made after moto is imported,
so this one's clients are served by moto like any other while a mock is on, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest.mock import patch

import boto3
import boto3.session
from moto import mock_aws
from tenure_cli.local.engines import use_local_credentials

# Made inside the first mock: the credentials it resolves (and caches) are the mock's.
_session: list[boto3.session.Session] = []


@contextmanager
def mocked_aws() -> Iterator[None]:
    use_local_credentials()
    with mock_aws(config={"core": {"reset_boto3_session": False}}):
        if not _session:
            _session.append(boto3.session.Session())
        with patch("boto3.DEFAULT_SESSION", _session[0]):
            yield
