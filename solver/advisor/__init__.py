"""The advisor: ranks parallel strategies (pipeline schedules, FSDP, WeiPipe) for a model and
a cluster by a closed-form cost of each; with a length distribution, FSDP, ODC and the
pipeline with packing (`length_advice`).
"""

from ppsched.solver.advisor.assumptions import (
    Assumption,
    format_assumptions,
    list_assumptions,
    set_field,
)
from ppsched.solver.advisor.data_parallel import Assumptions as LengthAssumptions
from ppsched.solver.advisor.length_advice import advise_lengths, format_lengths_table
from ppsched.solver.advisor.lengths import LengthSource, parse_length_source
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
    "LengthAssumptions",
    "LengthSource",
    "SensitivityReport",
    "advise",
    "advise_lengths",
    "format_assumptions",
    "format_lengths_table",
    "format_sensitivity",
    "format_table",
    "list_assumptions",
    "parse_advisor_config",
    "parse_length_source",
    "probe_sensitivity",
    "set_field",
    "summary_line",
    "winner",
]
