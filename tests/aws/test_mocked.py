"""The mocked AWS of the aws tier's fixtures (mocked.py): each mock starts empty, the mocks
share one session, and what is made outside a mock never sees it."""

from __future__ import annotations

import boto3

from tests.aws.mocked import mocked_aws


def test_each_mock_starts_empty_on_the_one_session_and_the_default_session_is_left_alone() -> None:
    outside = boto3.DEFAULT_SESSION
    with mocked_aws():
        first = boto3.DEFAULT_SESSION
        assert first is not None and first is not outside
        boto3.client("s3").create_bucket(Bucket="made-in-the-first-mock")
        assert [b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]] == [
            "made-in-the-first-mock"
        ]
    assert boto3.DEFAULT_SESSION is outside
    with mocked_aws():
        assert boto3.DEFAULT_SESSION is first
        assert boto3.client("s3").list_buckets()["Buckets"] == []
    assert boto3.DEFAULT_SESSION is outside
