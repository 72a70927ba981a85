"""`ppsched serve`: run the service under uvicorn with settings from the environment,
the command line overriding host, port and solver workers."""

from __future__ import annotations

import errno
import logging
import os
import socket
from typing import Any

from ppsched.solver.model import ProfileError, install_command

log = logging.getLogger(__name__)


def serve(host: str | None = None, port: int | None = None, workers: int | None = None,
          log_level: str = "info") -> None:
    """Start the service and block until it is stopped (Ctrl-C or SIGTERM).

    Raises:
        ProfileError: the service's extra is not installed, or a setting is invalid.
    """
    try:
        import uvicorn
        from ppsched.api.service.config import Settings
        from ppsched.api.service.http import protocol_with
        from ppsched.api.service.logs import logging_config
        from ppsched.api.service.main import create_app
        from pydantic import ValidationError
    except ImportError as exc:
        raise ProfileError("serve", f"missing module {exc.name!r}", "the service's "
                           f"dependencies: {install_command('service')}") from None
    overrides: dict[str, Any] = {k: v for k, v in
                                 (("host", host), ("port", port), ("workers", workers))
                                 if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else "settings"
        raise ProfileError(f"PPSCHED_{name.upper()}", error.get("input"),
                           str(error["msg"])) from None
    from ppsched.api.service.store import StoreSettingError

    # The port first: uvicorn binds only after the app's startup, which would open the
    # store, log "service ready" and start the solver workers before failing on a busy
    # port. The probe is closed again, uvicorn binds its own socket (a port taken in
    # between still fails, with uvicorn's message).
    check_address(settings.host, settings.port)
    try:
        app = create_app(settings)
    except StoreSettingError as exc:
        name, _, rest = str(exc).partition(": ")
        reason, _, accepted = rest.rpartition("; accepted: ")
        shown = (settings.database_url or "").split("@")[-1]  # never echo a password
        raise ProfileError(name, shown, f"{accepted} ({reason})") from None
    log.info("serving on http://%s:%d (pid %d)", settings.host, settings.port, os.getpid())
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level,
                timeout_graceful_shutdown=10, http=protocol_with(settings.header_timeout_s),
                timeout_keep_alive=settings.keep_alive_s,
                log_config=logging_config(settings.log_format, log_level))


def check_address(host: str, port: int) -> None:
    """Bind `host`:`port` as uvicorn binds it (SO_REUSEADDR) and let go again; a one-line
    error naming the option that picks another when that fails. (Handing uvicorn the
    bound socket instead made its 413 answers to large bodies end in connection resets.)

    Raises:
        ProfileError: the address is in use or cannot be bound here.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            error = exc
        else:
            return
    if error.errno == errno.EADDRINUSE:
        raise ProfileError("--port", port, f"a free port ({host}:{port} is in use): "
                           "pass --port N, or PORT=N to make run")
    raise ProfileError("--host", host, f"an address of this machine ({error.strerror}): "
                       "pass --host H, or HOST=H to make run")
