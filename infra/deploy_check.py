"""What can be checked of a deploy without an AWS account (`make deploy-check`).

cfn-lint on the template; the SAM transform with packaged code locations; the layer built as
Lambda runs it (arm64, Python 3.13) with the functions beside it, held to Lambda's 250 MB
unzipped limit and to the service's own modules. Exits non-zero on the first failing check.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "infra" / "template.yaml"
LAYER = ROOT / "layers" / "core"
FUNCTIONS = ROOT / "functions"
# Lambda's limit on a function's code and all its layers, unzipped.
UNZIPPED_LIMIT = 250 * 1024 * 1024
# Top-level names in the layer's python/ that would mean more than the service shipped.
NOT_THE_SERVICE = ("tenure_cli", "tenure_worker", "tests", "samplesources")


def lint() -> None:
    lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent)) or "cfn-lint"
    subprocess.run([lint, str(TEMPLATE)], check=True)
    print("cfn-lint: clean")


def transform() -> None:
    from samtranslator.translator.transform import transform as sam_transform
    from samtranslator.yaml_helper import yaml_parse

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    packaged: dict[str, Any] = copy.deepcopy(dict(yaml_parse(TEMPLATE.read_text())))
    # `sam package` replaces local folders with the S3 objects it uploaded.
    for res in packaged["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://deploy-check/{Path(props[key]).name}.zip"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    out = sam_transform(packaged, {}, NoManagedPolicies())
    print(f"SAM transform: {len(out['Resources'])} CloudFormation resources")


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def builder() -> Any:
    """layers/core/build_layer.py, the layer's build (it is no package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("build_layer", LAYER / "build_layer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def layer() -> None:
    """The layer exactly as `sam build` makes it (layers/core/build_layer.py)."""
    with tempfile.TemporaryDirectory(prefix="tenure-layer-") as tmp:
        target = Path(tmp) / "python"
        compiled = builder().build(Path(tmp))
        print(f"layer bytecode: {compiled}")
        found = sorted(name for name in NOT_THE_SERVICE if (target / name).exists())
        if found:
            raise SystemExit(f"the layer carries more than the service: {', '.join(found)}")
        layer_bytes = _size(target)
        functions = {fn.name: _size(fn) for fn in sorted(FUNCTIONS.iterdir()) if fn.is_dir()}
        largest = max(functions.values(), default=0)
        total = layer_bytes + largest
        mb = 1024 * 1024
        print(
            f"layer (arm64, Python 3.13): {layer_bytes / mb:.1f} MB unzipped; largest function "
            f"{largest / 1024:.1f} KB; total {total / mb:.1f} MB of {UNZIPPED_LIMIT / mb:.0f} MB"
        )
        if total > UNZIPPED_LIMIT:
            raise SystemExit("the layer and a function pass Lambda's 250 MB unzipped limit")


def main() -> None:
    lint()
    transform()
    layer()


if __name__ == "__main__":
    main()
