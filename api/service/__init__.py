"""The ppsched HTTP service: FastAPI app, worker pool, job queue and result store."""
