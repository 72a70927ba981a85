"""The advisor: ranks parallel strategies (pipeline schedules, FSDP, WeiPipe) for a model and
a cluster by a closed-form cost of each.
"""

from ppsched.solver.advisor.assumptions import (
    Assumption,
    format_assumptions,
    list_assumptions,
    set_field,
)
from ppsched.solver.advisor.rank import (
    STRATEGIES,
    AdvisorConfig,
    advise,
    format_table,
    parse_advisor_config,
    winner,
)
from ppsched.solver.advisor.sensitivity import (
    DEFAULT_MAX_RUNS,
    SensitivityReport,
    format_sensitivity,
    probe_sensitivity,
    summary_line,
)

__all__ = [
    "DEFAULT_MAX_RUNS",
    "STRATEGIES",
    "AdvisorConfig",
    "Assumption",
    "SensitivityReport",
    "advise",
    "format_assumptions",
    "format_sensitivity",
    "format_table",
    "list_assumptions",
    "parse_advisor_config",
    "probe_sensitivity",
    "set_field",
    "summary_line",
    "winner",
]
