"""Reports (layer 5, the top of the library's parts): a series' evolution report (`render_report`), its findings
(`write_findings`, `findings_lines`) and the comparison of series (`render_comparison`). It reads the store
through tracking and evaluation only.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
    from dormant_tasks.reporting.compare_page import render_comparison
    from dormant_tasks.reporting.compare_tables import comparison_table
    from dormant_tasks.reporting.figures import DPI, draw_auc_agreement
    from dormant_tasks.reporting.findings_report import write_findings
    from dormant_tasks.reporting.report import render_report
    from dormant_tasks.reporting.series_data import resolve_model_id
    from dormant_tasks.reporting.texts import findings_lines

__getattr__, __dir__, __all__ = lazy_face(__name__)
