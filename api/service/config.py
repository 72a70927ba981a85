"""Service settings, read from ``PPSCHED_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

_PACKAGE_DIR = Path(__file__).resolve().parent


def _default_profiles_dir() -> Path:
    # An editable install or a source checkout: the repository's profiles/ folder.
    return _PACKAGE_DIR.parents[1] / "profiles"


class Settings(BaseSettings):
    """Everything an operator can set; each field is ``PPSCHED_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="PPSCHED_", extra="forbid")

    host: str = Field("127.0.0.1", description="Address `ppsched serve` listens on.")
    port: int = Field(8000, ge=0, le=65535, description="Port `ppsched serve` listens on.")
    db_path: Path = Field(Path("ppsched.sqlite3"),
                          description="SQLite file keeping results and jobs across restarts.")
    database_url: str | None = Field(
        None, description="A postgresql://user@host:port/dbname URL: results and jobs in "
        "that PostgreSQL database (replicas share it) instead of the SQLite db_path.")
    profiles_dir: Path = Field(default_factory=_default_profiles_dir,
                               description="Folder of example profiles (GET /v1/examples).")
    static_dir: Path = Field(_PACKAGE_DIR / "static",
                             description="Folder of the web page (GET / and /static/...).")
    workers: int = Field(2, ge=1, le=64,
                         description="Worker processes answering synchronous solves.")
    queue_size: int = Field(8, ge=0,
                            description="Synchronous solves that may wait for a worker; "
                            "beyond, 503 with Retry-After.")
    job_workers: int = Field(1, ge=1, le=64, description="Jobs that run at once.")
    job_start_method: Literal["forkserver", "spawn"] = Field(
        "forkserver", description="How a job's process starts: `forkserver` forks it from "
        "a warm server that has imported the solver (milliseconds); `spawn` starts a "
        "fresh interpreter per job (a second or more), for a platform without fork.")
    max_queued_jobs: int = Field(16, ge=0,
                                 description="Jobs that may wait; beyond, 429 with Retry-After.")
    sync_time_limit_s: float = Field(
        10.0, gt=0, description="An ilp request with a longer time limit becomes a job.")
    max_time_limit_s: float = Field(600.0, gt=0, description="Largest time_limit_s accepted.")
    max_ranks: int = Field(64, ge=1, description="Largest num_ranks (p) accepted.")
    max_microbatches: int = Field(512, ge=1, description="Largest num_microbatches (m).")
    max_chunks: int = Field(4, ge=1, description="Largest num_chunks (v) accepted.")
    max_ops: int = Field(393_216, ge=1,
                         description="Most ops (3 * p * v * m, summed over the layouts "
                         "tried) one request may ask for; the default is the product of "
                         "the p, m and v limits.")
    max_sync_ops: int = Field(
        24_576, ge=0, description="A request with more ops (3 * p * v * m over its "
        "layouts) is solved as a job (202) instead of holding its connection.")
    max_body_bytes: int = Field(2_000_000, ge=1024, description="Largest request body.")
    max_violations: int = Field(
        100, ge=1, description="Violations listed in a /v1/validate or /v1/simulate "
        "answer; the total count is always given (violations_total).")
    header_timeout_s: float = Field(
        10.0, gt=0, description="A connection that does not send a request's headers "
        "within this time (after opening or after its last response) is closed.")
    keep_alive_s: int = Field(5, ge=1, description="An idle keep-alive connection is "
                              "closed after this many seconds.")
    retry_after_s: int = Field(5, ge=1, description="Retry-After sent with 429 and 503.")
    job_lease_s: float = Field(
        15.0, gt=0, description="A running job's lease: its replica renews it every third "
        "of this; a job whose lease expires (its replica died) is queued again, resuming "
        "from its best schedule so far (PPSCHED_JOB_MAX_ATTEMPTS).")
    cancel_grace_s: float = Field(
        5.0, gt=0, description="After a cancel, how long a job may take to hand back its best "
        "schedule before its worker is killed.")
    retention_age_s: float = Field(
        7 * 24 * 3600.0, gt=0, description="Stored schedules, views and finished jobs "
        "older than this are deleted by the cleanup task.")
    retention_max_bytes: int = Field(
        1 << 30, ge=0, description="Stored schedules and views beyond this total size "
        "are deleted, oldest first, by the cleanup task.")
    retention_interval_s: float = Field(300.0, gt=0, description="How often the cleanup "
                                        "task runs.")
    cpsat_workers: int = Field(1, ge=1, le=64, description="CP-SAT threads per ilp solve.")

    # Eyes on the service (issue 29): logs.
    log_format: Literal["text", "json"] = Field(
        "text", description="`text`: one readable line per record (for a laptop); "
        "`json`: one JSON object per line (time, level, logger, message, request_id, "
        "job_id and extra fields) for a log collector.")
    # Tenants and quotas (issue 29, tenants: api/service/tenants.py, gate.py, quotas.py).
    api_keys: SecretStr | None = Field(
        None, description="API keys as tenant=key,... (keys of at least 16 characters): "
        "each request then needs 'Authorization: Bearer KEY' (else 401) and each job "
        "belongs to its tenant. Unset (and no keys file): open mode, as on a laptop.")
    api_keys_file: Path | None = Field(
        None, description="A file of hashed API keys, one 'tenant:sha256-hex-of-key' per "
        "line ('#' comments); `ppsched keys hash TENANT` makes a line from a key on stdin.")
    metrics_open: bool = Field(
        False, description="Whether /metrics answers without a key when keys are "
        "configured (for a scraper without one); /healthz and /readyz always do.")
    quota_queued_jobs: int | None = Field(
        None, ge=1, description="Jobs one tenant (open mode: one client address) may have "
        "queued; beyond, 429 with Retry-After. Unset: half of max_queued_jobs (at least 1).")
    quota_concurrent_solves: int = Field(
        0, ge=0, description="Solving requests (schedules, pack, advise, simulate, "
        "validate) one tenant or client may have in progress on a replica; beyond, 429 "
        "with Retry-After. 0: no limit of its own (the pool's admission still applies).")
    quota_rate_per_s: float = Field(
        0.0, ge=0, description="Requests per second one tenant or client may send to a "
        "replica (a token bucket of quota_burst); beyond, 429 with Retry-After. 0: no limit.")
    quota_burst: int = Field(20, ge=1, description="Requests a tenant or client may send "
                             "at once before quota_rate_per_s paces it.")
    # Jobs that survive and database outages (issue 29).
    store_pool_size: int = Field(
        4, ge=1, le=64, description="PostgreSQL connections this replica may hold (its "
        "pool); unused with SQLite.")
    store_connect_timeout_s: float = Field(
        5.0, gt=0, description="How long opening a PostgreSQL connection may take; at "
        "startup, the service refuses to start after it.")
    store_checkout_timeout_s: float = Field(
        2.0, gt=0, description="How long a call waits for a pooled PostgreSQL connection "
        "before answering 503 with Retry-After (the database is down or the pool busy).")
    job_max_attempts: int = Field(
        3, ge=1, le=100, description="Times a job may lose its replica (killed, its lease "
        "expired) before it is failed; until then it is queued again, resuming from its "
        "best schedule so far.")
    job_retry_backoff_s: float = Field(
        1.0, ge=0, description="A job whose replica was lost waits this long before it "
        "runs again, doubled at each further loss.")
    checkpoint_interval_s: float = Field(
        3.0, gt=0, description="A running ilp job's best schedule so far is saved at most "
        "this often (and at its end), so a re-run resumes from it.")
    shutdown_grace_s: float = Field(
        10.0, gt=0, description="On SIGTERM the service stops taking work, hands its "
        "running jobs back to the queue with their best schedules so far, and exits within "
        "this many seconds.")
    # Issue 29, bounded calls: every CPU-heavy call runs in the worker pool within a size
    # and a time budget, and a request body must arrive within a time limit.
    max_pack_samples: int = Field(100_000, ge=1, description="Most samples (lengths) one "
                                  "POST /v1/pack may pack.")
    max_pack_replicas: int = Field(64, ge=1, description="Most replicas one POST /v1/pack "
                                   "may ask for.")
    max_pack_stages: int = Field(64, ge=1, description="Largest num_ranks * num_chunks of "
                                 "a POST /v1/pack base profile.")
    max_pack_ops: int = Field(393_216, ge=1, description="Most ops (3 * stages * "
                              "microbatches, over both packings' replicas) one POST "
                              "/v1/pack may solve.")
    max_advise_gpus: int = Field(64, ge=1, description="Largest cluster.num_gpus of a POST "
                                 "/v1/advise.")
    max_advise_microbatches: int = Field(256, ge=1, description="Largest num_microbatches "
                                         "of a POST /v1/advise.")
    max_advise_layers: int = Field(1024, ge=1, description="Largest model.layers of a POST "
                                   "/v1/advise.")
    max_partition_layers: int = Field(1024, ge=1, description="Most layers in the per-layer "
                                      "profile of a POST /v1/partition.")
    max_advise_sensitivity_runs: int = Field(
        24, ge=1, le=256, description="Advisor reruns one POST /v1/advise?sensitivity=true "
        "may make (each reruns the advisor, or the strategies an assumption moves); past "
        "them the answer's sensitivity says it is incomplete.")
    max_check_ops: int = Field(
        393_216, ge=1, description="Most ops one POST /v1/simulate or /v1/validate "
        "schedule may hold (counted before it is parsed into objects).")
    call_time_budget_s: float = Field(
        60.0, gt=0, description="Longest a pack, advise, simulate, validate or view may "
        "run in its worker (a synchronous solve: this plus its time limit); past it the "
        "worker is killed and replaced, and the answer (422) names this budget.")
    body_timeout_s: float = Field(
        30.0, gt=0, description="A request body must arrive whole within this many "
        "seconds of its headers; a slower one is answered 408 and its connection closed.")
