"""pyproject.toml lists every package under the name it installs as (ppsched.*)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_installed_under_ppsched() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder_of = config["package-dir"]
    assert folder_of == {"ppsched.solver": "solver", "ppsched.api": "api",
                         "ppsched.runtime_adapter": "runtime_adapter"}
    found = {".".join([name, *init.parent.relative_to(ROOT / folder).parts])
             for name, folder in folder_of.items()
             for init in (ROOT / folder).rglob("__init__.py")}
    assert set(config["packages"]) == found, set(config["packages"]) ^ found


def test_the_installed_package_is_the_checkout() -> None:
    import ppsched.solver

    assert Path(ppsched.solver.__file__).resolve() == ROOT / "solver" / "__init__.py"
