"""The paper's training-dynamics findings measured on a tracked series (layer 4, above tracking): when dormant
heads emerge, how often they switch, and whether they depend on the input text (against a noise floor), each
number with its interval, its method and its unit (`series_findings`, `Findings`); and over a group of seeds of
one recipe, with an interval over the seeds (`seed_group_findings`, `compare_seed_groups`); all of it as one tidy
table, each quantity named once (`findings_table`, `QUANTITIES`).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.findings.dynamics import (
        EARLY as EARLY,
        MIN_RATE_TOKENS as MIN_RATE_TOKENS,
        Findings as Findings,
        path_tokens as path_tokens,
        series_findings as series_findings,
    )
    from dormant_tasks.findings.replication import (
        T_SEEDS as T_SEEDS,
        WELCH as WELCH,
        compare_seed_groups as compare_seed_groups,
        seed_group_findings as seed_group_findings,
    )
    from dormant_tasks.findings.roles import RoleShares as RoleShares, role_shares as role_shares
    from dormant_tasks.findings.table import (
        QUANTITIES as QUANTITIES,
        Quantities as Quantities,
        findings_json as findings_json,
        findings_record as findings_record,
        findings_table as findings_table,
        quantity as quantity,
    )
    from dormant_tasks.findings.xu2026 import (
        comparison as comparison,
        format_comparison as format_comparison,
        xu_model as xu_model,
    )

__all__, __getattr__, __dir__ = attach(__name__)
