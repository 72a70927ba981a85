"""The field names a request body accepts at a place in it, read from the app's OpenAPI
document, so that a misspelt field gets a "did you mean" (errors.py) from the same
schema /docs shows, for whichever route the request reached."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Request


def body_fields(request: Request, parents: Sequence[str]) -> list[str]:
    """The properties of the request body's object at `parents` (field names from the
    top), or [] when the route, its body or that place is not an object in the schema."""
    path = getattr(request.scope.get("route"), "path_format", None)
    if path is None:
        return []
    document: dict[str, Any] = request.app.openapi()
    operation = document.get("paths", {}).get(path, {}).get(request.method.lower(), {})
    schema = (operation.get("requestBody", {}).get("content", {})
              .get("application/json", {}).get("schema", {}))
    for name in parents:
        schema = _object(schema, document).get("properties", {}).get(name, {})
    return list(_object(schema, document).get("properties", {}))


def _object(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its $ref followed, or its first anyOf/allOf/oneOf member that is an
    object (an optional model reads `anyOf: [{$ref}, {type: null}]`)."""
    for _ in range(16):  # a $ref chain is short; the bound keeps a cycle from spinning
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            break
        node: Any = document
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = node if isinstance(node, dict) else {}
    if "properties" in schema:
        return schema
    for key in ("anyOf", "allOf", "oneOf"):
        for member in schema.get(key, []):
            resolved = _object(member, document) if isinstance(member, dict) else {}
            if "properties" in resolved:
                return resolved
    return schema
