"""deploy/grafana-dashboard.json reads only metrics the service exports, under the
names Prometheus gives their samples (a renamed metric would leave a panel empty)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ppsched.api.service.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana-dashboard.json"
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count", "_created")}


def _exported() -> set[str]:
    names = set()
    for family in Metrics().registry.collect():
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
    return names


def _queries(dashboard: dict[str, Any]) -> list[str]:
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["query"] for v in dashboard["templating"]["list"]]
    return queries


def test_every_metric_the_dashboard_reads_is_exported() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used = {name for q in _queries(dashboard) for name in re.findall(r"ppsched_\w+", q)}
    assert used, "no ppsched metric in the dashboard"
    missing = used - _exported()
    assert not missing, f"the dashboard reads metrics the service does not export: {missing}"


def test_the_dashboard_shows_every_eye_and_its_panels_are_well_formed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    text = " ".join(_queries(dashboard))
    for family in ("event_loop_lag_seconds", "http_main_cpu_seconds", "pool_wait_seconds",
                   "job_wait_seconds", "job_run_seconds", "job_runner_alive",
                   "store_errors", "http_request_duration_seconds", "queue_depth",
                   "tenant_requests", "tenant_main_cpu_seconds"):
        assert f"ppsched_{family}" in text, family
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel.get("targets", []):
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            # By route template and tenant only: a raw path label does not exist.
            assert "path" not in re.findall(r"by \(([^)]*)\)", target["expr"])
