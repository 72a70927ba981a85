"""The import rules of STYLE.md choice 1, read from the source (not from `sys.modules`).

Every import statement counts, the ones inside functions too; only imports under
``if TYPE_CHECKING:`` are left out (they never run). Checked:

- inside `ppsched.solver`, sub-packages import only sub-packages on a lower floor
  (`FLOORS`), never a sibling on their own floor;
- `ppsched.solver` imports neither torch nor the web stack, nor `ppsched.api` or
  `ppsched.runtime_adapter`; those two do not import each other; none of the three
  imports `benchmarks` or `tests`;
- `ppsched.solver` has no dynamic import (``importlib.import_module``, ``__import__``),
  which this reading of the source could not see;
- no import circle anywhere in `solver/`, `api/` and `runtime_adapter/`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The folders and the names they install as (pyproject.toml, [tool.setuptools.package-dir]).
FOLDERS = {"solver": "ppsched.solver", "api": "ppsched.api",
           "runtime_adapter": "ppsched.runtime_adapter"}
# solver's sub-packages, lowest floor first; a module of the solver package's own root
# (its __init__) stands above them all.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("model",),
    ("sim", "generators", "render", "integrations"),
    ("heuristic", "policies", "exact", "weipipe"),
    ("solving",),
    ("packing", "partition"),
    ("advisor",),  # ranks FSDP/ODC/pipeline with the packing (solver.advisor.data_parallel)
)
SUBPACKAGE_FLOOR = {name: floor for floor, names in enumerate(FLOORS) for name in names}
NOT_IN_SOLVER = ("torch", "fastapi", "starlette", "uvicorn", "ppsched.api",
                 "ppsched.runtime_adapter")
# The product never imports its benchmarks or its tests (they are not installed).
NOT_IN_PRODUCT = ("benchmarks", "tests")
FORBIDDEN = {"solver": (*NOT_IN_SOLVER, *NOT_IN_PRODUCT),
             "api": ("ppsched.runtime_adapter", "torch", *NOT_IN_PRODUCT),
             "runtime_adapter": ("ppsched.api", "fastapi", "uvicorn", *NOT_IN_PRODUCT)}


def _module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [FOLDERS[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(path): path for folder in FOLDERS
            for path in sorted((ROOT / folder).rglob("*.py"))}


def _type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests exactly ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``):
    ``if not TYPE_CHECKING:`` and the like run, so they count."""
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node.test):
            yield from (n for orelse in node.orelse for n in [orelse, *_runtime_nodes(orelse)])
            continue
        yield node
        yield from _runtime_nodes(node)


@cache
def imports_of(module: str) -> frozenset[str]:
    """The names `module` imports: modules, and ``package.name`` for ``from package import
    name`` (a submodule or an attribute: `_ours` tells which)."""
    tree = ast.parse(modules()[module].read_text())
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import (the project uses absolute)"
            assert node.module is not None
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def _ours(name: str) -> str | None:
    """The project module `name` is, or lies in (``package.attribute`` -> package)."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in modules():
        targets = {_ours(name) for name in imports_of(module)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["ppsched", "solver"] and len(parts) > 2 else None


def test_the_rules_see_every_module() -> None:
    found = modules()
    assert len(found) > 140
    assert {"ppsched.solver", "ppsched.solver.model.ops", "ppsched.api.service.main",
            "ppsched.runtime_adapter.executor"} <= set(found)
    subpackages = {_subpackage(m) for m in found} - {None}
    assert subpackages == set(SUBPACKAGE_FLOOR), subpackages ^ set(SUBPACKAGE_FLOOR)


def test_solver_subpackages_import_only_downward() -> None:
    wrong = []
    for module, targets in edges().items():
        here = _subpackage(module)
        if here is None:
            continue
        for target in targets:
            there = _subpackage(target)
            if target == "ppsched.solver" or (
                    there is not None and there != here
                    and SUBPACKAGE_FLOOR[there] >= SUBPACKAGE_FLOOR[here]):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that do not point down:\n" + "\n".join(sorted(wrong))


def _forbidden(imports: dict[str, frozenset[str]], forbidden: tuple[str, ...]) -> list[str]:
    """``module imports name`` for each name of `imports` in or under `forbidden`."""
    return sorted(f"{module} imports {name}" for module, names in imports.items()
                  for name in names
                  if any(name == bad or name.startswith(bad + ".") for bad in forbidden))


@pytest.mark.parametrize("folder", ["solver", "api", "runtime_adapter"])
def test_layers_stay_pure(folder: str) -> None:
    wrong = _forbidden({module: imports_of(module) for module in modules()
                        if module.startswith(FOLDERS[folder])}, FORBIDDEN[folder])
    assert not wrong, "\n".join(wrong)


def test_the_purity_rule_finds_a_forbidden_import() -> None:
    # The rule can fail: torch inside a function of a solver module, api in the runtime.
    source = ("def f():\n    import torch.distributed\n"
              "if not TYPE_CHECKING:\n    import ppsched.api.cli\n")
    names = frozenset(alias.name for node in _runtime_nodes(ast.parse(source))
                      if isinstance(node, ast.Import) for alias in node.names)
    assert _forbidden({"m": names}, FORBIDDEN["solver"]) == [
        "m imports ppsched.api.cli", "m imports torch.distributed"]
    assert _forbidden({"m": frozenset({"ppsched.api"})}, FORBIDDEN["runtime_adapter"])
    assert _forbidden({"m": frozenset({"benchmarks.readme"})}, FORBIDDEN["api"])
    assert not _forbidden({"m": frozenset({"torchvision_like", "ppsched.apix"})},
                          FORBIDDEN["solver"])


def _dynamic_imports(tree: ast.AST) -> list[str]:
    """Calls that import a module by a name computed at run time."""
    return [ast.unparse(node.func) for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__")]


def test_the_solver_has_no_dynamic_import() -> None:
    # This test reads import statements; an import by computed name would slip past it.
    found = [f"{module}: {call}" for module, path in modules().items()
             if module.startswith("ppsched.solver")
             for call in _dynamic_imports(ast.parse(path.read_text()))]
    assert not found, "\n".join(found)
    assert _dynamic_imports(ast.parse("importlib.import_module('torch')\n__import__('x')"))


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path: list[str] = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step):], step]
            elif step not in state:
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph.get(step, ()))))
    return None


def test_no_import_circle_in_the_repository() -> None:
    circle = _a_circle(edges())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_circle_finder_finds_one() -> None:
    assert _a_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_imports_inside_functions_count(tmp_path: Path) -> None:
    tree = ast.parse("def f():\n    import torch\nif TYPE_CHECKING:\n    import fastapi\n")
    names = {alias.name for node in _runtime_nodes(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    assert names == {"torch"}


@pytest.mark.parametrize("folder", ["api", "runtime_adapter"])
def test_api_and_runtime_use_the_solvers_public_surface(folder: str) -> None:
    """`ppsched.solver` and its sub-packages' `__init__`s, never a module inside them."""
    surface = {"ppsched.solver"} | {f"ppsched.solver.{name}" for name in SUBPACKAGE_FLOOR}
    wrong = [f"{module} imports {_ours(name)}" for module in modules()
             if module.startswith(FOLDERS[folder])
             for name in imports_of(module)
             if name.startswith("ppsched.solver") and _ours(name) not in surface]
    assert not wrong, "\n".join(sorted(set(wrong)))
