"""The findings of a series as files (`dormant findings --reports-dir`): findings.md and the findings' figures,
which the series' report shows too (`findings_plots`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dormant_tasks.findings import Findings
from dormant_tasks.outputs import Owner, check_folder, staged
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting import set_figures as sf
from dormant_tasks.reporting.figure_data import role_share_data
from dormant_tasks.reporting.texts import findings_lines
from dormant_tasks.text import md

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def findings_plots(f: Findings) -> list[tuple[str, str, Callable[[], Figure]]]:
    """(kind, file name, draw) of the findings' figures: emergence, transitions and, when measured, the
    calibration sets' agreement through training and the head roles' shares."""
    plots: list[tuple[str, str, Callable[[], Figure]]] = [
        ("findings_emergence", "findings_emergence", lambda: fg.draw_emergence(f.emergence)),
        (
            "findings_transitions",
            "findings_transitions",
            lambda: fg.draw_confident_transitions(f.transitions, f.score_fn),
        ),
    ]
    d = f.input_dependence
    if d.measured:  # the report's one set_agreement figure (the same data: `calibration_sets`), drawn once
        plots.append(
            (
                "set_agreement",
                "set_agreement",
                lambda: sf.draw_set_agreement(d.tokens, d.pairs, f.score_fn, floor=d.noise_floor),
            )
        )
    if f.role_shares is not None:  # the series holds the head-role functions (findings/roles.py)
        rs = f.role_shares
        plots.append(("findings_roles", "findings_roles", lambda: fg.draw_role_shares(role_share_data(rs))))
    return plots


@dataclass(frozen=True)
class FindingsResult:
    out_dir: Path
    summary_md: Path  # findings.md
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)


def write_findings(f: Findings, out_dir, store) -> FindingsResult:
    """findings.md and the findings' figures into `out_dir`, replaced only when complete, and only a folder that
    is new, empty or this store's findings of this series (`outputs.check_folder`, as a report)."""
    out = Path(out_dir)
    owner = Owner.of("findings", store, f.model_id)
    check_folder(out, owner)
    with staged(out, owner) as tmp:  # published whole, or the old folder kept
        (tmp / "figures").mkdir()
        drawn = {name: fg.save_figure(draw(), tmp / "figures", name) for _, name, draw in findings_plots(f)}
        text = "\n".join([f"# Findings: {md(f.model_id)}", "", *findings_lines(f)]) + "\n"
        (tmp / "findings.md").write_text(text, encoding="utf-8")
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return FindingsResult(out, out / "findings.md", figures)
