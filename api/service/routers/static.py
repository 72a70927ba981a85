"""GET / (the web page, api/service/static/index.html) and GET /static/... (its files)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from ppsched.api.service.deps import State
from ppsched.api.service.errors import NotFound
from ppsched.api.service.schemas import ErrorBody

router = APIRouter(tags=["web page"])


@router.get("/", summary="The web page", response_class=FileResponse,
            responses={200: {"content": {"text/html": {}}}, 404: {"model": ErrorBody}})
def index(state: State) -> FileResponse:
    """The page that edits a profile and draws its schedule."""
    return FileResponse(_file(state.settings.static_dir, "index.html"))


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
