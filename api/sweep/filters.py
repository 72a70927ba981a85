"""Grid filters: small Python expressions over a row's configuration, checked at load time.

Only comparisons, `and`/`or`/`not`, arithmetic, `in` over literal lists, numbers, strings
and the row's names are allowed (e.g. ``"m >= 2 * p"``, ``"method != 'ilp' or p <= 8"``);
anything else (calls, attributes, unknown names) is refused when the grid is read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
    ast.Is, ast.IsNot, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv,
    ast.Mod, ast.Pow, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
)


@dataclass(frozen=True)
class Filter:
    """A compiled filter: keeps the rows for which `text` is true."""

    text: str
    names: frozenset[str]
    code: CodeType = field(repr=False, compare=False)

    def keeps(self, row: Mapping[str, Any]) -> bool:
        """Evaluate on a row's names; a comparison that fails (None < 3) drops the row."""
        try:
            return bool(eval(self.code, {"__builtins__": {}}, dict(row)))  # checked AST only
        except TypeError:
            return False


def compile_filter(text: str, names: Iterable[str]) -> Filter:
    """Parse `text` and check it uses only allowed syntax and known names.

    Raises:
        ValueError: a syntax error, a construct that is not allowed, or an unknown name
            (the message lists the names).
    """
    known = set(names) | {"None", "True", "False"}
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an expression ({exc.msg})") from None
    used = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"{type(node).__name__} is not allowed; use comparisons, "
                             "and/or/not, arithmetic and `in [...]`")
        if isinstance(node, ast.Name):
            if node.id not in known:
                raise ValueError(f"unknown name {node.id!r}; the names are "
                                 + ", ".join(sorted(known - {'None', 'True', 'False'})))
            used.add(node.id)
    return Filter(text=text, names=frozenset(used), code=compile(tree, "<filter>", "eval"))
