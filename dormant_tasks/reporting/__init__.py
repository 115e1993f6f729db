"""Reports (layer 5, the top of the library's parts): a series' evolution report (`render_report`), its findings
(`write_findings`, `findings_lines`) and the comparison of series (`render_comparison`). It reads the store
through tracking and evaluation only.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "DPI",
    "ReportSettings",
    "comparison_table",
    "draw_auc_agreement",
    "findings_lines",
    "findings_record",
    "render_comparison",
    "render_report",
    "resolve_model_id",
    "seed_comparison_lines",
    "seed_group_lines",
    "write_findings",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.reporting.compare_page import render_comparison
    from dormant_tasks.reporting.compare_tables import comparison_table
    from dormant_tasks.reporting.figures import DPI, draw_auc_agreement
    from dormant_tasks.reporting.findings_report import findings_record, write_findings
    from dormant_tasks.reporting.report import ReportSettings, render_report
    from dormant_tasks.reporting.series_data import resolve_model_id
    from dormant_tasks.reporting.texts import findings_lines, seed_comparison_lines, seed_group_lines

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "compare_page": ["render_comparison"],
        "compare_tables": ["comparison_table"],
        "figures": ["DPI", "draw_auc_agreement"],
        "findings_report": ["findings_record", "write_findings"],
        "report": ["ReportSettings", "render_report"],
        "series_data": ["resolve_model_id"],
        "texts": ["findings_lines", "seed_comparison_lines", "seed_group_lines"],
    },
)
