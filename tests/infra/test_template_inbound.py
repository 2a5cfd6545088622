"""The inbound function knows the bucket SES stores mail in, deployed and on the local stack,
so that a notification naming another bucket (the attachments bucket holds other mails' files)
is refused rather than filed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse
from tenure.config import ENVIRONMENT
from tenure_cli.local.provision import Provisioner

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))["Resources"]


def test_the_inbound_function_is_told_the_bucket_its_receipt_rule_stores_mail_in(
    resources: dict[str, Any],
) -> None:
    variable, source = ENVIRONMENT["inbound_bucket"]
    assert (variable, source) == ("TENURE_INBOUND_BUCKET", "template:InboundFunction")
    env = resources["InboundFunction"]["Properties"]["Environment"]["Variables"]
    stored_in = [
        action["S3Action"]["BucketName"]
        for resource in resources.values()
        if resource["Type"] == "AWS::SES::ReceiptRule"
        for action in resource["Properties"]["Rule"]["Actions"]
        if "S3Action" in action
    ]
    assert stored_in == [env[variable]] == [{"Ref": "InboundBucket"}]


def test_the_local_stack_tells_the_inbound_function_its_own_inbound_bucket() -> None:
    nowhere = "http://127.0.0.1:1"  # no call is made: only the template is resolved
    made = Provisioner(nowhere, nowhere, "t", "p")
    made.names = {"InboundBucket": "p-inboundbucket", "AttachmentsBucket": "p-attachments"}
    env = made.function_environment("InboundFunction")
    assert env["TENURE_INBOUND_BUCKET"] == "p-inboundbucket"
