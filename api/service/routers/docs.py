"""GET /docs (Swagger UI) and GET /redoc from local files, so the API's documentation
works offline: FastAPI's defaults load Swagger UI and ReDoc from a CDN, and a machine
without the internet (or with a strict content security policy) got a blank page.

The files come from the `fastapi-offline` package (it ships Swagger UI and ReDoc as
static files); only the files, not its app factory, are used here.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from ppsched.api.service.errors import NotFound

router = APIRouter(include_in_schema=False)

ASSETS = "/docs-assets"
# The only files served from the package: a fixed list, so no path reaches the disk.
_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
          "redoc.standalone.js": "text/javascript", "favicon.png": "image/png"}


def assets_dir() -> Path:
    """The folder of the Swagger UI and ReDoc files."""
    return Path(str(files("fastapi_offline") / "static"))


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="ppsched - API",
                               swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS}/favicon.png")


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title="ppsched - API",
                          redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                          redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False)


@router.get(ASSETS + "/{name}")
def asset(name: str) -> FileResponse:
    if name not in _FILES:
        raise NotFound("docs asset", name[:100], "one of " + ", ".join(sorted(_FILES)))
    return FileResponse(assets_dir() / name, media_type=_FILES[name],
                        headers={"Cache-Control": "public, max-age=86400"})
