"""MkDocs hooks (``hooks:`` in mkdocs.yml): the docs site is built only from figures that
match their sources, and its API reference is the service's own OpenAPI document.

- Every page's result blocks must equal their files in ``benchmarks/results/`` and every
  figure of its prose must match its reference (`benchmarks.figures`); otherwise the build
  fails, naming the page, the line and the source.
- A page holding ``<!-- openapi -->`` gets, in its place, the routes, the statuses each
  declares and the request and response schemas, rendered from ``create_app().openapi()``
  at build time, so the reference cannot lag the service.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

# MkDocs loads this file by its path: the repository root must be importable for the
# `benchmarks` package it checks the figures with.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import figures, readme

OPENAPI_MARKER = "<!-- openapi -->"
RESULTS = Path(__file__).resolve().parent / "results"


def on_files(files: Files, config: Any) -> Files:
    """Serve the result plots (``benchmarks/results/*.png``) at ``results/NAME.png``, so a
    page shows the committed plot and not a copy."""
    for plot in sorted(RESULTS.glob("*.png")):
        files.append(File(f"results/{plot.name}", src_dir=str(RESULTS.parent),
                          dest_dir=config["site_dir"], use_directory_urls=False))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Check the page's blocks and figures; expand the OpenAPI marker."""
    name = f"docs/{page.file.src_uri}"
    bad = [f"{name} line {b.line}: the block results/{b.name} differs from its file (run "
           "`python -m benchmarks.readme`)" for b in readme.stale(markdown)]
    bad += [str(p) for p in figures.problems(markdown, name)]
    if bad:
        raise PluginError("figures not tied to their source:\n" + "\n".join(bad))
    if OPENAPI_MARKER in markdown:
        markdown = markdown.replace(OPENAPI_MARKER, openapi_markdown())
    return markdown


def openapi_markdown(document: dict[str, Any] | None = None) -> str:
    """Markdown for every route of an OpenAPI document (the service's by default)."""
    if document is None:
        from ppsched.api.service.main import create_app

        document = create_app().openapi()
    out = [f"Generated from the OpenAPI document of ppsched {document['info']['version']} "
           "when this site was built.", ""]
    for path, methods in sorted(document["paths"].items()):
        for method, operation in methods.items():
            out += [f"### `{method.upper()} {path}`", ""]
            if summary := operation.get("summary"):
                out += [summary, ""]
            if description := operation.get("description"):
                out += [description.strip(), ""]
            params = operation.get("parameters", [])
            if params:
                out += ["| parameter | in | required | description |", "|---|---|---|---|"]
                out += [f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'}"
                        f" | {_one_line(p.get('description', ''))} |" for p in params]
                out.append("")
            if body := operation.get("requestBody"):
                out += [f"Request body: {_schemas(body.get('content', {}))}", ""]
            out += ["| status | meaning | body |", "|---|---|---|"]
            for status, response in sorted(operation.get("responses", {}).items()):
                out.append(f"| {status} | {_one_line(response.get('description', ''))} | "
                           f"{_schemas(response.get('content', {}))} |")
            out.append("")
    out += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        out += [f"### {name}", ""]
        if description := schema.get("description"):
            out += [description.strip(), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            out += [f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | "
                    f"{_one_line(spec.get('description', ''))} |"
                    for field, spec in props.items()]
            out.append("")
    return "\n".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return f"[{_ref_name(spec['$ref'])}](#{_ref_name(spec['$ref']).lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in spec:
            return " or ".join(_type(s) for s in spec[key])
    if spec.get("type") == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if "enum" in spec:
        return " / ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    return str(spec.get("type", "any"))


def _schemas(content: dict[str, Any]) -> str:
    kinds = []
    for media, spec in content.items():
        schema = spec.get("schema", {})
        kinds.append(f"{_type(schema)} (`{media}`)" if schema else f"`{media}`")
    return ", ".join(kinds) or "none"
