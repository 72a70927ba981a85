"""GET / (the web page, api/service/static/index.html) and GET /static/... (its files)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from api.service.deps import State
from api.service.errors import NotFound
from api.service.schemas import ErrorBody

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
    root = folder.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise NotFound("static file", relative, "a file of the web page (its static folder)")
    return target
