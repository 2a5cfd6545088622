"""`tenure admin bootstrap` against moto: the first admin token written straight into the
table with the caller's AWS credentials, found by table name or by the stack's resources."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from tenure import wiring
from tenure_cli.main import main

from tests.aws.mocked import mocked_aws
from tests.aws.test_function_handlers import export

TABLE = "bootstrap-table"
STACK_TEMPLATE = """{
  "Resources": {
    "LeaseTable": {
      "Type": "AWS::DynamoDB::Table",
      "Properties": {
        "TableName": "%s",
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
          {"AttributeName": "PK", "AttributeType": "S"},
          {"AttributeName": "SK", "AttributeType": "S"}
        ],
        "KeySchema": [
          {"AttributeName": "PK", "KeyType": "HASH"},
          {"AttributeName": "SK", "KeyType": "RANGE"}
        ]
      }
    }
  }
}"""


@pytest.fixture
def aws() -> Iterator[None]:
    with mocked_aws():
        export("TENURE_DYNAMODB_ENDPOINT", "")
        wiring.service.cache_clear()
        yield
        wiring.service.cache_clear()


def _admin_of(table: str, raw: str) -> str | None:
    store = wiring.build_store(None, table)
    return wiring.build_service(store).tokens.authenticate(raw).role


def test_bootstrap_by_table_prints_a_working_admin_token_once(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    wiring.build_store(None, TABLE).create_table()
    assert main(["admin", "bootstrap", "--table", TABLE, "--name", "first"]) == 0
    raw = capsys.readouterr().out.strip()
    assert raw.startswith("tnr_o_")
    assert _admin_of(TABLE, raw) == "admin"
    assert raw not in str(boto3.client("dynamodb", region_name="us-east-1").scan(TableName=TABLE))


def test_bootstrap_refuses_a_name_that_exists(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    wiring.build_store(None, TABLE).create_table()
    assert main(["admin", "bootstrap", "--table", TABLE]) == 0
    capsys.readouterr()
    assert main(["admin", "bootstrap", "--table", TABLE]) == 1
    assert "already_exists" in capsys.readouterr().err


def test_bootstrap_by_stack_finds_the_table_among_its_resources(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    cfn.create_stack(StackName="tenure", TemplateBody=STACK_TEMPLATE % TABLE)
    assert main(["admin", "bootstrap", "--stack", "tenure", "--region", "us-east-1"]) == 0
    raw = capsys.readouterr().out.strip()
    assert _admin_of(TABLE, raw) == "admin"
