"""The Lambda layer ships the service and its runtime dependencies, nothing else: no CLI, no
local stack, no benches or load generator, no test hooks, no packaging leftovers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from samtranslator.yaml_helper import yaml_parse

from infra.deploy_check import builder
from tests.infra.imports import STDLIB, all_imports

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "core"
# Names that would mean a module of the CLI, the local stack, a bench, the load generator or a
# test hook had landed in the service.
NOT_THE_SERVICE = re.compile(
    r"(^|_)(cli|local|bench|benches|load|loadgen|faults?|moto|fixtures?|conftest|fake|tests?)"
    r"(_|$)|^test_"
)
# Third-party modules the service imports -> the requirement that installs them in the layer
# (None: the Lambda Python runtime provides it).
PROVIDED_BY: dict[str, str | None] = {
    "aws_lambda_powertools": "aws-lambda-powertools",
    "pydantic": "pydantic",
    "jmespath": "jmespath",
    "mcp": "mcp",
    "mcp_types": "mcp",  # installed with mcp
    "anyio": "mcp",  # installed with mcp
    # installed with pydantic, which needs its TypedDict on Python before 3.12 (the answers' shapes)
    "typing_extensions": "pydantic",
    "boto3": None,
    "botocore": None,
}


BUILDER = builder()


def _copied(tmp: Path) -> list[Path]:
    """Every file of the service the layer's build puts beside its dependencies, relative to
    the layer's python/ (the dependencies come from PyPI, so `make deploy-check` builds them)."""
    BUILDER.copy_service(tmp)
    return sorted(path.relative_to(tmp) for path in tmp.rglob("*") if path.is_file())


def _requirements() -> list[Requirement]:
    lines = (LAYER / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse((ROOT / "infra" / "template.yaml").read_text()))


def test_the_template_builds_the_core_layer_with_its_own_build(
    template: dict[str, Any],
) -> None:
    layers = {
        name: res
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::Serverless::LayerVersion"
    }
    assert set(layers) == {"CoreLayer"}
    layer = layers["CoreLayer"]
    assert (ROOT / "infra" / layer["Properties"]["ContentUri"]).resolve() == LAYER
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    # SAM runs the target named after the resource, from the ContentUri folder's Makefile.
    makefile = (LAYER / "Makefile").read_text()
    assert re.search(
        r"^build-CoreLayer:\n\tpython3 build_layer\.py \"\$\(ARTIFACTS_DIR\)\"$", makefile, re.M
    )
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert BUILDER.RUNTIME == (3, 13) and "3.13" in BUILDER.PLATFORM


def test_the_layer_holds_the_tenure_package_and_its_requirements_only(tmp_path: Path) -> None:
    files = _copied(tmp_path)
    assert {path.parts[0] for path in files} == {"tenure"}, files
    assert not [path for path in files if path.suffix == ".pyc" or "__pycache__" in path.parts]
    python = [path for path in files if path.suffix == ".py"]
    assert all(path.parts[0] == "tenure" for path in python)
    # The board's static files are the only other files the service reads.
    others = {path.parent.as_posix() for path in files if path.suffix not in (".py", ".txt")}
    assert others <= {"tenure/api/board"}, others


def test_no_module_of_the_layer_belongs_to_the_cli_the_local_stack_or_the_tests(
    tmp_path: Path,
) -> None:
    named = [
        path.as_posix()
        for path in _copied(tmp_path)
        if path.suffix == ".py"
        and any(NOT_THE_SERVICE.search(part.removesuffix(".py")) for part in path.parts[1:])
    ]
    assert not named, named


def test_the_layer_requirements_are_what_the_service_imports_and_lambda_lacks() -> None:
    imported = {
        imp.top
        for imp in all_imports()
        if imp.source.split(".")[0] == "tenure" and imp.top not in STDLIB and imp.top != "tenure"
    }
    undeclared = imported - set(PROVIDED_BY)
    assert not undeclared, f"imported by the service but not in PROVIDED_BY: {undeclared}"
    unused = set(PROVIDED_BY) - imported
    assert not unused, f"in PROVIDED_BY but no longer imported: {unused}"
    wanted = {dist for dist in PROVIDED_BY.values() if dist}
    assert {req.name for req in _requirements()} == wanted


def test_the_layer_requirements_match_the_package_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(line).name: Requirement(line) for line in project["dependencies"]}
    for req in _requirements():
        assert req.name in declared, f"{req.name} is in the layer but not a dependency"
        assert str(req) == str(declared[req.name]), (str(req), str(declared[req.name]))


def test_the_layers_bytecode_is_used_even_when_every_file_is_dated_1980(tmp_path: Path) -> None:
    """SAM zips every file with the same 1980 date, and Lambda's /opt is read-only: bytecode
    that trusted timestamps would be compiled afresh at every cold start. The build's
    hash-checked bytecode is read as it is; and a source changed after the build is compiled
    anew, never run stale."""
    BUILDER.copy_service(tmp_path)
    assert BUILDER.precompile(tmp_path, mounted_at=None)
    dated_1980 = 315532800
    for path in tmp_path.rglob("*"):
        os.utime(path, (dated_1980, dated_1980))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")

    def loaded(code: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-v", "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return [line for line in out.stderr.splitlines() if str(tmp_path) in line]

    lines = loaded("import tenure.domain.model, tenure.store.keys")
    from_bytecode = [
        line for line in lines if line.startswith("# code object from") and ".pyc" in line
    ]
    assert len(from_bytecode) >= 2, lines
    assert not [line for line in lines if "bytecode is stale" in line or "bad" in line], lines

    keys = tmp_path / "tenure" / "store" / "keys.py"
    keys.write_text(keys.read_text() + "\nCHANGED_AFTER_THE_BUILD = True\n")
    os.utime(keys, (dated_1980, dated_1980))
    out = subprocess.run(
        [sys.executable, "-c", "import tenure.store.keys as k; print(k.CHANGED_AFTER_THE_BUILD)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"
