"""Build steps pyproject.toml cannot declare: the wheel carries a copy of infra/template.yaml
as tenure_cli/local/template.yaml, so that `tenure local` provisions from an installed package
as it does from a checkout (package data must live inside a package, and infra/ is not one)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TEMPLATE = Path("infra") / "template.yaml"


class BuildWithTemplate(build_py):
    def run(self) -> None:
        super().run()
        # An editable install runs from the checkout, where infra/template.yaml is read itself.
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / "tenure_cli" / "local" / "template.yaml"
            self.mkpath(str(target.parent))
            self.copy_file(str(TEMPLATE), str(target))


setup(cmdclass={"build_py": BuildWithTemplate})
