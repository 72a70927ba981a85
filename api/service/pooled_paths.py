"""The POST paths whose answer takes a worker of the pool: every CPU-heavy call (issue
29). One list, so that admission guards, the quotas count as solves and the contract
declares the refusals of the same routes."""

POOLED_POSTS = ("/v1/schedules", "/v1/pack", "/v1/advise", "/v1/partition", "/v1/simulate",
                "/v1/validate")
