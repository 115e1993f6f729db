"""Reports (layer 5, the top of the library's parts): a series' evolution report (`render_report`), its findings
(`write_findings`, `findings_lines`) and the comparison of series (`render_comparison`). It reads the store
through tracking and evaluation only.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.reporting.compare_page import render_comparison as render_comparison
    from dormant_tasks.reporting.compare_tables import comparison_table as comparison_table
    from dormant_tasks.reporting.figures import DPI as DPI, draw_auc_agreement as draw_auc_agreement
    from dormant_tasks.reporting.findings_report import write_findings as write_findings
    from dormant_tasks.reporting.report import ReportSettings as ReportSettings, render_report as render_report
    from dormant_tasks.reporting.series_data import resolve_model_id as resolve_model_id
    from dormant_tasks.reporting.texts import (
        findings_lines as findings_lines,
        seed_comparison_lines as seed_comparison_lines,
        seed_group_lines as seed_group_lines,
    )

__all__, __getattr__, __dir__ = attach(__name__)
