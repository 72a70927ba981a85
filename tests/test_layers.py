"""DESIGN.md section 5: `solver` imports neither torch nor fastapi; `api` and
`runtime_adapter` do not import each other."""

from __future__ import annotations

import subprocess
import sys


def imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return {name.split(".")[0] for name in out.split()}


def test_solver_is_pure() -> None:
    modules = imported_after("import solver, ppsched.solver.solving.entry, ppsched.solver.render.svg, "
                             "ppsched.solver.render.trace, ppsched.solver.render.torch_csv, ppsched.solver.model.bounds")
    assert not modules & {"torch", "fastapi", "uvicorn", "api", "runtime_adapter"}


def test_cli_does_not_pull_runtime_or_torch() -> None:
    modules = imported_after("import ppsched.api.cli")
    assert not modules & {"torch", "runtime_adapter"}
