"""The service's log lines: text for a laptop (the default), or JSON, one object per
line (time, level, logger, message, request_id, job_id and any fields passed as
``extra=``) for a log collector. `logging_config` is the `logging.config.dictConfig`
that `ppsched serve` hands uvicorn, so uvicorn's own lines (its access log included) go
through the same handler, filter and format as the service's."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from ppsched.api.service.request_ids import ContextFilter

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
# A LogRecord's own attributes: whatever else a record carries came from ``extra=``.
_RECORD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime",
                                                             "request_id", "job_id",
                                                             "color_message", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        job = getattr(record, "job_id", "-")
        if job != "-":
            data["job_id"] = job
        for name, value in vars(record).items():
            if name not in _RECORD_ATTRS and not name.startswith("_"):
                data[name] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        # default=str: a field that is not JSON (a path, an exception) is still written.
        return json.dumps(data, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, with ``job=<id>`` after the request id while a job runs."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        job = getattr(record, "job_id", "-")
        if job != "-":
            head, _, tail = text.partition("] ")
            text = f"{head} job={job}] {tail}"
        return text


def formatter(kind: str) -> logging.Formatter:
    if kind == "json":
        return JsonFormatter()
    assert kind == "text", kind
    return TextFormatter()


def logging_config(kind: str, level: str = "info") -> dict[str, Any]:
    """A dictConfig: one stderr handler with the request-id filter and `kind`'s format,
    for the root logger (the service's loggers) and uvicorn's (which do not propagate)."""
    level = level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": kind,
               "filters": ["context"], "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": ContextFilter}},
        "formatters": {kind: {"()": formatter, "kind": kind}},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level},
        # As uvicorn's own config: "uvicorn.error" reaches the handler through "uvicorn".
        "loggers": {"uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
                    "uvicorn.error": {"level": level},
                    "uvicorn.access": {"handlers": ["default"], "level": level,
                                       "propagate": False}},
    }
