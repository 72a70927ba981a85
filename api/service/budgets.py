"""The time budget of a call in the worker pool: a call that runs past it has its worker
killed and replaced (a pack of 100,000 samples ran 11 minutes in the main process, for a
client long gone), and the client gets a 422 that names the budget and its setting."""

from __future__ import annotations

from ppsched.api.service.errors import LimitExceeded


class TimeBudgetExceeded(LimitExceeded):
    """A call ran past its time budget (PPSCHED_CALL_TIME_BUDGET_S): 422 naming it."""

    def __init__(self, budget_s: float) -> None:
        super().__init__("time", f"over {budget_s:g} s of work", budget_s,
                         "call_time_budget_s")
        self.budget_s = budget_s

    def __str__(self) -> str:
        return (f"the request needed more than its time budget of {self.budget_s:g} s "
                "(PPSCHED_CALL_TIME_BUDGET_S); its worker was stopped. Send less work, "
                "or use the CLI, which has no budget")
