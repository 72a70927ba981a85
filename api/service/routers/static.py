"""GET / (the web page, api/service/static/index.html) and GET /static/... (its files)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from ppsched.api.service.deps import State
from ppsched.api.service.errors import NotFound
from ppsched.api.service.schemas import ErrorBody

router = APIRouter(tags=["web page"])


@router.get("/", summary="The web page", response_class=FileResponse,
            responses={200: {"content": {"text/html": {}}}, 404: {"model": ErrorBody}})
def index(state: State) -> FileResponse:
    """The page that edits a profile and draws its schedule."""
    return FileResponse(_file(state.settings.static_dir, "index.html"))


# Three staggered bars, a pipeline's stages (the F/B colours of the Gantt chart): what a
# browser's tab shows instead of logging a 404 for /favicon.ico on every visit.
FAVICON_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
               '<rect x="1" y="2" width="8" height="3" fill="#3b75af"/>'
               '<rect x="4" y="6.5" width="8" height="3" fill="#2a9d8f"/>'
               '<rect x="7" y="11" width="8" height="3" fill="#e69b2d"/></svg>')


@router.get("/favicon.ico", summary="The page's icon (SVG)", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}}})
def favicon() -> Response:
    """A small SVG icon (browsers ask for /favicon.ico whatever the page links)."""
    return Response(FAVICON_SVG, media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=86400"})


@router.get("/static/{path:path}", summary="A file of the web page",
            response_class=FileResponse, responses={404: {"model": ErrorBody}})
def static_file(path: str, state: State) -> FileResponse:
    """Scripts, styles and pictures of the page."""
    return FileResponse(_file(state.settings.static_dir, path))


def _file(folder: Path, relative: str) -> Path:
    missing = NotFound("static file", relative[:100],
                       "a file of the web page (its static folder)")
    # A NUL byte (`%00`) makes the OS calls raise ValueError, a name over NAME_MAX or
    # PATH_MAX raises OSError: both are a file that is not there, never a 500 (whose
    # text would carry the install path).
    if "\x00" in relative or len(relative) > 255:
        raise missing
    root = folder.resolve()
    try:
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            raise missing
    except (OSError, ValueError):
        raise missing from None
    return target
