"""infra/template.yaml is the one source of truth: it must lint, transform, and match the code."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse
from tenure.config import ENVIRONMENT, Settings
from tenure.store import keys

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res["Properties"]
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::Serverless::Function"
    }


def test_cfn_lint_reports_nothing() -> None:
    lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent))
    assert lint, "cfn-lint is a dev dependency"
    done = subprocess.run([lint, str(TEMPLATE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_template_transforms_with_the_sam_translator(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    packaged = copy.deepcopy(template)
    # `sam package` swaps local folders for S3 URIs; do the same so the translator accepts it.
    for res in packaged["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://bucket/{Path(props[key]).name}.zip"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    out = transform(packaged, {}, NoManagedPolicies())
    kinds = [r["Type"] for r in out["Resources"].values()]
    assert kinds.count("AWS::Lambda::Function") == len(_functions(template))
    api = next(r for r in out["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Api")
    scheme = api["Properties"]["Body"]["components"]["securitySchemes"]["TokenAuthorizer"]
    authorizer = scheme["x-amazon-apigateway-authorizer"]
    assert authorizer["authorizerPayloadFormatVersion"] == "2.0"
    assert authorizer["enableSimpleResponses"] is True
    assert authorizer["authorizerResultTtlInSeconds"] > 0, "authorizer results are cached"
    assert "AWS::Scheduler::Schedule" in kinds
    assert "AWS::Lambda::EventSourceMapping" in kinds
    lambda_roles = [
        r
        for r in out["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and "lambda.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    assert len(lambda_roles) == len(_functions(template)), "one role per function"


def test_every_function_handler_imports(template: dict[str, Any]) -> None:
    for name, props in _functions(template).items():
        code = (TEMPLATE.parent / props["CodeUri"]).resolve()
        module, _, attr = props["Handler"].rpartition(".")
        spec = importlib.util.spec_from_file_location(f"fn_{name}", code / f"{module}.py")
        assert spec and spec.loader, f"{name}: {code}/{module}.py is missing"
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        assert callable(getattr(loaded, attr)), f"{name}: {props['Handler']} is not callable"


def test_every_function_environment_covers_its_settings(template: dict[str, Any]) -> None:
    assert set(ENVIRONMENT) == {f.name for f in fields(Settings)}, "each setting names its variable"
    shared = template["Globals"]["Function"]["Environment"]["Variables"]
    needed = {var for var, source in ENVIRONMENT.values() if source == "template"}
    for name, props in _functions(template).items():
        env = {**shared, **props.get("Environment", {}).get("Variables", {})}
        assert needed <= set(env), f"{name} lacks {sorted(needed - set(env))}"


def test_table_keys_and_indexes_are_exactly_what_the_store_uses(template: dict[str, Any]) -> None:
    table = template["Resources"]["LeaseTable"]["Properties"]
    code = keys.table_definition("ignored")
    assert sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        code["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    assert table["KeySchema"] == code["KeySchema"]
    # Capacity is the BillingMode parameter's (tests/infra/test_template_operations.py).
    shapes = {
        g["IndexName"]: {k: v for k, v in g.items() if k != "ProvisionedThroughput"}
        for g in table["GlobalSecondaryIndexes"]
    }
    assert shapes == {g["IndexName"]: g for g in code["GlobalSecondaryIndexes"]}
    assert table["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    billing = template["Parameters"]["BillingMode"]
    assert (table["BillingMode"], billing["Default"]) == (
        {"Ref": "BillingMode"},
        code["BillingMode"],
    )
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    # The store's TTL attribute is the one the table expires rows by.
    assert table["TimeToLiveSpecification"] == keys.TTL_SPECIFICATION


def test_inbound_queue_redrives_to_its_dead_letter_queue(template: dict[str, Any]) -> None:
    queue = template["Resources"]["InboundQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["InboundDeadLetterQueue", "Arn"]
    }
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 1


def test_attachments_bucket_is_private_and_encrypted(template: dict[str, Any]) -> None:
    bucket = template["Resources"]["AttachmentsBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert bucket["LifecycleConfiguration"]["Rules"]


def test_functions_log_json_without_lambdas_own_lines_and_trace_only_when_asked(
    template: dict[str, Any],
) -> None:
    functions = {
        name: r["Properties"]
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    assert functions
    for name, props in functions.items():
        config = props["LoggingConfig"]
        assert (config["LogFormat"], config["SystemLogLevel"]) == ("JSON", "WARN"), name
        # Powertools' level and Lambda's application level agree (else it warns, and filters).
        assert config["ApplicationLogLevel"] == "INFO", name
    tracing = template["Parameters"]["Tracing"]
    assert tracing["Default"] == "PassThrough" and set(tracing["AllowedValues"]) == {
        "Active",
        "PassThrough",
    }
    glob = template["Globals"]["Function"]
    assert glob["Tracing"] == {"Ref": "Tracing"}
    assert glob["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == "INFO"


def test_the_local_door_answers_preflights_by_the_buckets_cors_rule(
    template: dict[str, Any],
) -> None:
    """The local stack's engine door answers CORS preflights itself (moto would run them as
    calls): it must grant what the attachments bucket's rule grants, and no more."""
    from tenure_cli.local.engine_key import CORS_MAX_AGE, CORS_METHODS

    bucket = template["Resources"]["AttachmentsBucket"]["Properties"]
    (rule,) = bucket["CorsConfiguration"]["CorsRules"]
    assert tuple(rule["AllowedMethods"]) == CORS_METHODS
    assert rule["AllowedOrigins"] == ["*"] and str(rule["MaxAge"]) == CORS_MAX_AGE
    assert "AllowedHeaders" not in rule
