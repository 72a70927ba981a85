"""The advisor: ranks parallel strategies (pipeline schedules, FSDP, WeiPipe) for a model and
a cluster by a closed-form cost of each.
"""

from ppsched.solver.advisor.rank import (
    STRATEGIES,
    AdvisorConfig,
    advise,
    format_table,
    parse_advisor_config,
)

__all__ = [
    "STRATEGIES",
    "AdvisorConfig",
    "advise",
    "format_table",
    "parse_advisor_config",
]
