"""The paper's training-dynamics findings measured on a tracked series (layer 4, above tracking): when dormant
heads emerge, how often they switch, and whether they depend on the input text (against a noise floor), each
number with its interval, its method and its unit (`series_findings`, `Findings`); and over a group of seeds of
one recipe, with an interval over the seeds (`seed_group_findings`, `compare_seed_groups`).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "EARLY",
    "Findings",
    "GroupDifference",
    "InputDependence",
    "NoiseFloor",
    "ReplicatedFindings",
    "T_SEEDS",
    "WELCH",
    "compare_seed_groups",
    "path_tokens",
    "seed_group_findings",
    "series_findings",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.findings.dependence import InputDependence, NoiseFloor
    from dormant_tasks.findings.dynamics import EARLY, Findings, path_tokens, series_findings
    from dormant_tasks.findings.replication import (
        T_SEEDS,
        WELCH,
        GroupDifference,
        ReplicatedFindings,
        compare_seed_groups,
        seed_group_findings,
    )

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "dependence": ["InputDependence", "NoiseFloor"],
        "dynamics": ["EARLY", "Findings", "path_tokens", "series_findings"],
        "replication": [
            "GroupDifference",
            "ReplicatedFindings",
            "T_SEEDS",
            "WELCH",
            "compare_seed_groups",
            "seed_group_findings",
        ],
    },
)
