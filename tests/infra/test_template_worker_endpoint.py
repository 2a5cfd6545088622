"""The WorkerEndpoint parameter: with FunctionUrl a worker function on a public function URL (its
address an output), with HttpApi none of it; the HTTP API serves every route either way."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def _holds(expr: Any, params: dict[str, Any], conditions: dict[str, Any]) -> Any:
    """A condition's value for these parameters (the functions the template's conditions use)."""
    if isinstance(expr, dict) and len(expr) == 1:
        ((fn, arg),) = expr.items()
        if fn == "Ref":
            return params[arg]
        if fn == "Fn::Equals":
            return _holds(arg[0], params, conditions) == _holds(arg[1], params, conditions)
        if fn == "Fn::Not":
            return not _holds(arg[0], params, conditions)
        if fn == "Condition":
            return _holds(conditions[arg], params, conditions)
        raise AssertionError(f"a condition function this test does not know: {fn}")
    return expr


def deployed(template: dict[str, Any], worker_endpoint: str | None) -> dict[str, Any]:
    """The template through the SAM translator, then what CloudFormation would create with
    these parameters: resources and outputs whose condition is false dropped."""
    packaged = copy.deepcopy(template)
    for res in packaged["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://bucket/{Path(props[key]).name}.zip"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    given = {} if worker_endpoint is None else {"WorkerEndpoint": worker_endpoint}
    out = transform(packaged, given, NoManagedPolicies())
    params = {name: p.get("Default") for name, p in template["Parameters"].items()} | given
    conditions = out.get("Conditions", {})

    def kept(section: dict[str, Any]) -> dict[str, Any]:
        return {
            name: body
            for name, body in section.items()
            if "Condition" not in body or _holds(conditions[body["Condition"]], params, conditions)
        }

    return {"Resources": kept(out["Resources"]), "Outputs": kept(out.get("Outputs", {}))}


def _of_type(stack: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in stack["Resources"].items() if r["Type"] == kind}


def test_the_parameter_is_function_url_or_http_api_and_defaults_to_function_url(
    template: dict[str, Any],
) -> None:
    param = template["Parameters"]["WorkerEndpoint"]
    assert param["Type"] == "String"
    assert set(param["AllowedValues"]) == {"FunctionUrl", "HttpApi"}
    assert param["Default"] == "FunctionUrl"


@pytest.mark.parametrize("value", [None, "FunctionUrl"], ids=["default", "FunctionUrl"])
def test_with_function_url_the_worker_function_has_a_public_url_and_an_output(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    stack = deployed(template, value)
    urls = _of_type(stack, "AWS::Lambda::Url")
    assert sorted(urls) == ["ClaimFunctionUrl", "WorkerFunctionUrl"]
    for name, function in (
        ("WorkerFunctionUrl", "WorkerFunction"),
        ("ClaimFunctionUrl", "ClaimFunction"),
    ):
        url = urls[name]["Properties"]
        assert url["AuthType"] == "NONE"  # the function checks the bearer itself
        assert url["TargetFunctionArn"] == {"Ref": function}
    permissions = [p["Properties"] for p in _of_type(stack, "AWS::Lambda::Permission").values()]
    public = [p for p in permissions if p.get("FunctionUrlAuthType") == "NONE"]
    assert sorted(p["FunctionName"]["Ref"] for p in public) == ["ClaimFunction", "WorkerFunction"]
    for p in public:
        assert p["Principal"] == "*" and p["Action"] == "lambda:InvokeFunctionUrl"
    # Invoking a function through its URL needs lambda:InvokeFunction too, for URL calls only.
    via_url = [p for p in permissions if p.get("InvokedViaFunctionUrl")]
    assert sorted(p["FunctionName"]["Ref"] for p in via_url) == ["ClaimFunction", "WorkerFunction"]
    assert all(p["Action"] == "lambda:InvokeFunction" for p in via_url)
    worker = stack["Resources"]["WorkerFunction"]["Properties"]
    assert worker["Handler"] == "app.handler"
    output = stack["Outputs"]["WorkerApiUrl"]["Value"]
    assert output == {"Fn::Sub": "${WorkerFunctionUrl.FunctionUrl}api/v1"}
    claim_url = {"Fn::Sub": "${ClaimFunctionUrl.FunctionUrl}api/v1"}
    assert stack["Outputs"]["WorkerClaimUrl"]["Value"] == claim_url
    # The worker function names the claim URL on its claim answers.
    assert worker["Environment"]["Variables"]["TENURE_CLAIM_URL"] == claim_url


def test_with_http_api_there_is_no_worker_function_url_or_output(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    stack = deployed(template, "HttpApi")
    assert _of_type(stack, "AWS::Lambda::Url") == {}
    assert "WorkerFunction" not in stack["Resources"]
    assert "WorkerFunctionRole" not in stack["Resources"]
    assert not any(
        p["Properties"].get("FunctionUrlAuthType") or p["Properties"].get("InvokedViaFunctionUrl")
        for p in _of_type(stack, "AWS::Lambda::Permission").values()
    )
    assert "WorkerApiUrl" not in stack["Outputs"] and "WorkerClaimUrl" not in stack["Outputs"]
    assert "ApiUrl" in stack["Outputs"]
    assert "ClaimFunction" in stack["Resources"]  # the HTTP API's claims wait there


@pytest.mark.parametrize("value", ["FunctionUrl", "HttpApi"])
def test_the_http_api_serves_every_route_with_either_endpoint(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    stack = deployed(template, value)
    (api,) = _of_type(stack, "AWS::ApiGatewayV2::Api").values()
    paths = api["Properties"]["Body"]["paths"]
    proxy = paths["/api/v1/{proxy+}"]["x-amazon-apigateway-any-method"]
    assert "ApiFunction" in str(proxy["x-amazon-apigateway-integration"]["uri"])
    # Claims wait on the claim function, behind the authorizer, never on the API function.
    claim = paths["/api/v1/pools/{pool}/claim"]["post"]
    assert "ClaimFunction" in str(claim["x-amazon-apigateway-integration"]["uri"])
    assert claim["security"] == [{"TokenAuthorizer": []}]
    assert list(paths["/api/v1/pools/{pool}/claim"]) == ["post"]


def test_each_function_where_requests_wait_or_must_not_has_its_own_reserved_concurrency(
    template: dict[str, Any],
) -> None:
    for function, param, condition in (
        ("ApiFunction", "ApiReservedConcurrency", "ApiConcurrencyReserved"),
        ("WorkerFunction", "WorkerReservedConcurrency", "WorkerConcurrencyReserved"),
        ("ClaimFunction", "ClaimReservedConcurrency", "ClaimConcurrencyReserved"),
    ):
        reserved = template["Resources"][function]["Properties"]["ReservedConcurrentExecutions"]
        assert reserved == {"Fn::If": [condition, {"Ref": param}, {"Ref": "AWS::NoValue"}]}
        assert template["Conditions"][condition] == {
            "Fn::Not": [{"Fn::Equals": [{"Ref": param}, 0]}]
        }
    # 8 waiting claims per token: the default holds a dozen polling tokens.
    assert template["Parameters"]["ClaimReservedConcurrency"]["Default"] >= 8 * 12


def test_the_unauthenticated_routes_have_smaller_throttle_buckets_of_their_own(
    template: dict[str, Any],
) -> None:
    from tenure.api.routes import PUBLIC_ROUTES

    api = template["Resources"]["HttpApi"]["Properties"]
    settings = api["RouteSettings"]
    assert set(settings) == {f"{method} {path}" for method, path in PUBLIC_ROUTES}
    for each in settings.values():
        assert each == {
            "ThrottlingRateLimit": {"Ref": "PublicRouteThrottleRate"},
            "ThrottlingBurstLimit": {"Ref": "PublicRouteThrottleBurst"},
        }
    params = template["Parameters"]
    assert params["PublicRouteThrottleRate"]["Default"] < params["ApiThrottleRate"]["Default"]
    assert params["PublicRouteThrottleBurst"]["Default"] < params["ApiThrottleBurst"]["Default"]


def test_the_claim_function_may_do_only_what_the_worker_function_does_on_the_table(
    template: dict[str, Any],
) -> None:
    claim = _statements(template, "ClaimFunction")
    assert _actions(claim) <= _actions(_statements(template, "WorkerFunction"))
    assert {a.split(":")[0] for a in _actions(claim)} == {"dynamodb"}
    assert "dynamodb:DeleteItem" not in _actions(claim) and "dynamodb:Scan" not in _actions(claim)


def _statements(template: dict[str, Any], function: str) -> list[dict[str, Any]]:
    policies = template["Resources"][function]["Properties"]["Policies"]
    return [s for p in policies if "Statement" in p for s in p["Statement"]]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for s in statements:
        acts = s["Action"]
        found |= {acts} if isinstance(acts, str) else set(acts)
    return found


def test_the_worker_function_may_do_only_what_the_worker_routes_do(
    template: dict[str, Any],
) -> None:
    worker = _statements(template, "WorkerFunction")
    granted = _actions(worker)
    assert granted <= _actions(_statements(template, "ApiFunction"))
    assert not {a for a in granted if a.startswith(("scheduler:", "iam:", "events:"))}
    assert "dynamodb:DeleteItem" not in granted and "dynamodb:Scan" not in granted
    assert not {"s3:GetObject", "logs:GetLogEvents"} & granted  # reads are operators' routes,
    # on the HTTP API
    for s in worker:
        for resource in [s["Resource"]] if not isinstance(s["Resource"], list) else s["Resource"]:
            assert resource != "*"
    # Inline bytes are written to leases/; an upload URL, signed with this role, writes to
    # uploads/leases/ (a presigned PUT runs with the signer's permissions).
    s3 = next(s for s in worker if s["Action"] == ["s3:PutObject"])
    assert s3["Resource"] == [
        {"Fn::Sub": "${AttachmentsBucket.Arn}/leases/*"},
        {"Fn::Sub": "${AttachmentsBucket.Arn}/uploads/leases/*"},
    ]
    # Inline bytes the pool's quota then refuses are deleted again: leases/ only.
    delete = next(s for s in worker if s["Action"] == ["s3:DeleteObject"])
    assert delete["Resource"] == {"Fn::Sub": "${AttachmentsBucket.Arn}/leases/*"}


def test_the_worker_function_and_its_logs_exist_only_with_function_url(
    template: dict[str, Any],
) -> None:
    for name in ("WorkerFunction", "WorkerFunctionLogs"):
        assert template["Resources"][name]["Condition"] == "WorkerOnFunctionUrl"
    assert template["Outputs"]["WorkerApiUrl"]["Condition"] == "WorkerOnFunctionUrl"
    assert template["Conditions"]["WorkerOnFunctionUrl"] == {
        "Fn::Equals": [{"Ref": "WorkerEndpoint"}, "FunctionUrl"]
    }
