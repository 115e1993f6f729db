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
from dormant_tasks.reporting.texts import findings_lines
from dormant_tasks.text import md

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def findings_plots(f: Findings) -> list[tuple[str, str, Callable[[], Figure]]]:
    """(kind, file name, draw) of the findings' figures: emergence, transitions and, when measured, the
    calibration sets' agreement through training."""
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


def findings_record(f) -> dict:
    """The findings as plain JSON-ready data (`dormant findings --format json`): every number with its 95%
    interval, the method that gave it, its unit and the number of units behind it; censored values (+inf) and
    undefined ones (NaN) as null, with `value_not_reached` / `high_not_reached` or `undefined` saying which
    (`n_units` only where units were resampled). Works for any findings
    dataclass (a series' `Findings`, a seed group's `ReplicatedFindings`)."""
    import dataclasses
    import math

    import numpy as np

    from dormant_tasks.statistics import Estimate, Share

    def number(x: float) -> float | None:
        return None if math.isnan(x) or math.isinf(x) else float(x)

    def plain(x):
        if isinstance(x, Estimate | Share):
            out = {
                "value": number(x.value),
                "low": number(x.low),
                "high": number(x.high),
                "method": x.method,
                "unit": x.unit,
            }
            if x.n_units:  # a count or a min-max has no units of resampling behind it
                out["n_units"] = int(x.n_units)
            if isinstance(x, Share):
                out |= {"k": int(x.k), "n": int(x.n)}
            if math.isinf(x.value):  # right-censored: the series ends before it is reached
                out["value_not_reached"] = True
            elif math.isinf(x.high):
                out["high_not_reached"] = True
            if math.isnan(x.value):
                out["undefined"] = True
            elif math.isnan(x.low):
                out["interval"] = "none: fewer units than the method needs" if x.n_units else "none"
            return out
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {field.name: plain(getattr(x, field.name)) for field in dataclasses.fields(x)}
        if isinstance(x, dict):
            return {(" vs ".join(k) if isinstance(k, tuple) else str(k)): plain(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        if isinstance(x, np.ndarray):
            return [plain(v) for v in x.tolist()]
        if isinstance(x, np.generic):
            return plain(x.item())
        if isinstance(x, float):
            return number(x)
        return x

    return plain(f)
