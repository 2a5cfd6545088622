"""The Lambda layer ships the service and its runtime dependencies, nothing else: no CLI, no
local stack, no benches or load generator, no test hooks, no packaging leftovers."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from samtranslator.yaml_helper import yaml_parse

from tests.infra.imports import STDLIB, all_imports

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "core"
# What SAM's pip builder (aws-lambda-builders, PythonPipWorkflow.EXCLUDED_FILES) leaves out
# when it copies a layer's folder, by name at any depth: an editable install's
# tenure.egg-info, caches and virtual environments never reach the layer.
SAM_EXCLUDES = (
    ".aws-sam",
    ".chalice",
    ".git",
    ".gitignore",
    "*.pyc",
    "__pycache__",
    "*.so",
    ".Python",
    "*.egg-info",
    "*.egg",
    "pip-log.txt",
    "pip-delete-this-directory.txt",
    "htmlcov",
    ".tox",
    ".nox",
    ".coverage",
    ".cache",
    ".pytest_cache",
    ".python-version",
    ".mypy_cache",
    ".dmypy.json",
    ".pyre",
    ".env",
    ".venv",
    "venv",
    "venv.bak",
    "env.bak",
    "ENV",
    "env",
    ".vscode",
    ".idea",
)
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
    "boto3": None,
    "botocore": None,
}


def _copied() -> list[Path]:
    """Every file SAM would copy from the layer's folder, relative to it."""
    ignore = shutil.ignore_patterns(*SAM_EXCLUDES)
    found: list[Path] = []

    def walk(folder: Path) -> None:
        entries = sorted(p.name for p in folder.iterdir())
        for name in sorted(set(entries) - ignore(str(folder), entries)):
            path = folder / name
            if path.is_dir():
                walk(path)
            else:
                found.append(path.relative_to(LAYER))

    walk(LAYER)
    return found


def _requirements() -> list[Requirement]:
    lines = (LAYER / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml_parse((ROOT / "infra" / "template.yaml").read_text()))


def test_the_template_builds_the_core_layer_from_its_folder_with_pip(
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
    # The python builder: pip installs requirements.txt, then the folder is copied as above.
    assert layer["Metadata"]["BuildMethod"].startswith("python3.")


def test_the_layer_holds_the_tenure_package_and_its_requirements_only() -> None:
    files = _copied()
    assert {path.parts[0] for path in files} == {"tenure", "requirements.txt"}, files
    python = [path for path in files if path.suffix == ".py"]
    assert all(path.parts[0] == "tenure" for path in python)
    # The board's static files are the only other files the service reads.
    others = {path.parent.as_posix() for path in files if path.suffix not in (".py", ".txt")}
    assert others <= {"tenure/api/board"}, others


def test_no_module_of_the_layer_belongs_to_the_cli_the_local_stack_or_the_tests() -> None:
    named = [
        path.as_posix()
        for path in _copied()
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
