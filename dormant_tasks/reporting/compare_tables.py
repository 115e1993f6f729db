"""The comparison's tables: the findings of each series side by side (`FINDINGS_COLUMNS`: one line per field,
rendered by `cell_text` / `cell_fields`), the settings of each series, and the whole table for the terminal
(`comparison_table`, markdown or csv) and `summary.md` (`comparison_markdown`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dormant_tasks.errors import ConfigError
from dormant_tasks.findings import MIN_RATE_TOKENS, QUANTITIES, Findings, quantity
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting.compare import COMPARISON_FORMATS, POINTS, Comparison, differences, series_tau_source
from dormant_tasks.reporting.texts import few_units, no_interval
from dormant_tasks.text import md


def _stage_rates(f: Findings) -> str:
    parts = [
        f"stage {r.stage}: {cell_text(r.per_billion)}"
        if r.tokens >= MIN_RATE_TOKENS
        else f"stage {r.stage}: withheld ({fg.format_tokens(r.tokens)} tokens, under {fg.format_tokens(MIN_RATE_TOKENS)})"
        if r.tokens > 0
        else f"stage {r.stage}: no token span"
        for r in f.transitions.stages
    ]
    return "; ".join(parts) or "a single checkpoint"


def _measured(f: Findings, id: str, otherwise: str) -> Any:
    return quantity(f, id) if f.input_dependence.measured else otherwise


def _by_id(id: str, get: Callable[[Findings], Any] | None = None) -> tuple[str, Callable[[Findings], Any]]:
    """A column of one findings quantity: its label and its value (`findings/table.py`)."""
    return QUANTITIES[id], get or (lambda f: quantity(f, id))


# The findings columns: (header, the value from a series' Findings), one quantity of the findings table by its id or
# a few shown together. `cell_text` / `cell_fields` render every value, one with an interval (a Share, an Estimate,
# any object with `value`, `low` and `high`) as such.
FINDINGS_COLUMNS: list[tuple[str, Callable[[Findings], Any]]] = [
    ("calibration set", lambda f: f.calibration_id),
    ("tau", lambda f: f"score {f.direction} {f.tau:g}"),
    ("checkpoints", lambda f: f.n_checkpoints),
    ("% dormant first → last", lambda f: f"{f.emergence.pct_dormant_first:.1f} → {f.emergence.pct_dormant_last:.1f}"),
    (
        "first dormant head",
        lambda f: (
            f"{f.emergence.first_dormant_revision} ({fg.format_tokens(f.emergence.first_dormant_tokens or 0)} tokens)"
            if f.emergence.first_dormant_revision
            else "never"
        ),
    ),
    _by_id("emergence.early"),
    _by_id("emergence.first_fraction"),
    _by_id("emergence.settled_fraction"),
    (
        "transitions (fell / woke)",
        lambda f: f"{f.transitions.n_transitions} ({f.transitions.fell_dormant} / {f.transitions.woke})",
    ),
    _by_id("transitions.n_confident"),
    _by_id("transitions.n_blips"),
    ("confident transitions per billion tokens", _stage_rates),
    _by_id("transitions.ever_changed"),
    _by_id("transitions.more_than_once"),
    _by_id(
        "input_dependence.last", lambda f: _measured(f, "input_dependence.last", "not measured (one calibration set)")
    ),
    _by_id("input_dependence.all_of_any", lambda f: _measured(f, "input_dependence.all_of_any", "")),
    _by_id(
        "input_dependence.noise_floor.difference",
        lambda f: (
            quantity(f, "input_dependence.noise_floor.difference")
            or f.input_dependence.noise_floor_note
            or "not measured"
        ),
    ),
]


def _interval(v: Any) -> bool:
    """A value with a 95% interval: a Share, an Estimate, or any findings field with `value`, `low` and `high`."""
    return all(hasattr(v, a) for a in ("value", "low", "high"))


def cell_text(v: Any) -> str:
    """One findings value as text: a share (k, n) as "k of n (p%, 95% CI a–b%)", another value with an interval
    as "v (95% CI a to b)" (a difference in points with one decimal and its sign, else three significant digits).
    No unit: the column's header names it once (a cell carries numbers). An interval that fewer than
    MIN_UNITS units back is marked as such, with their number (`few_units`)."""
    if v is None:
        return ""
    if _interval(v) and hasattr(v, "n"):
        if not v.n:
            return f"undefined ({v.k} of {v.n})"
        if v.low != v.low:  # NaN: no interval (too few units)
            return f"{v.k} of {v.n} ({100 * v.value:.1f}%, {no_interval(v)})"
        return f"{v.k} of {v.n} ({100 * v.value:.1f}%, 95% CI {100 * v.low:.1f}–{100 * v.high:.1f}%{few_units(v)})"
    if _interval(v):
        if v.value != v.value:  # NaN
            return "undefined"
        sign, fmt = ("+", ".1f") if getattr(v, "unit", "") == POINTS else ("", ".3g")  # a difference shows its sign
        if v.low != v.low:
            return f"{v.value:{sign}{fmt}} ({no_interval(v)})".replace("-", "−")
        ci = f"95% CI {v.low:{fmt}} to {v.high:{fmt}}{few_units(v)}"
        return f"{v.value:{sign}{fmt}} ({ci})".replace("-", "−")
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def cell_fields(v: Any) -> list[str]:
    """One findings value as CSV fields: a value with an interval as value, low, high (numbers); else one field."""
    if _interval(v):
        if hasattr(v, "n") and not v.n:
            return ["", "", ""]
        return [f"{v.value:.6g}", f"{v.low:.6g}", f"{v.high:.6g}"]
    return [cell_text(v)]


def _has_interval(header: str, c: Comparison) -> bool:
    """Whether a column holds a Share or an Estimate for some series (CSV: three fields)."""
    getter = dict(FINDINGS_COLUMNS)[header]
    return any(_interval(getter(m.findings[fn])) for m in c.members for fn in c.score_fns)


def findings_rows(c: Comparison, fn: str) -> list[tuple[str, list[Any]]]:
    """Per series, its findings values under `fn`, in FINDINGS_COLUMNS' order."""
    return [(m.model_id, [get(m.findings[fn]) for _, get in FINDINGS_COLUMNS]) for m in c.members]


def settings_rows(c: Comparison) -> list[list[str]]:
    """Per series: shape, checkpoints, tokens, the token gaps between checkpoints, calibration sets, taus."""
    rows = []
    for m in c.members:
        s = m.series
        gaps = np.diff(m.tokens)
        taus = "; ".join(
            f"{fn}: score {s.taus[fn][1]} {s.taus[fn][0]:g} ({_tau_label(series_tau_source(s, fn))})"
            for fn in c.score_fns
        )
        rows.append(
            [
                m.model_id,
                f"{s.n_layers} × {s.n_heads}",
                str(len(m.tokens)),
                f"{fg.format_tokens(m.tokens[0])} – {fg.format_tokens(m.tokens[-1])}",
                _gaps(gaps),
                ", ".join(m.calibration_ids),
                taus,
            ]
        )
    return rows


DIFFERENCE_HEADER = "difference (percentage points)"  # cells carry the numbers (`cell_text`)

SETTINGS_HEADER = [
    "series",
    "layers × heads",
    "checkpoints",
    "tokens",
    "tokens between checkpoints",
    "calibration sets (primary first)",
    "taus",
]


def _gaps(gaps: np.ndarray) -> str:
    """The cadence: "every 20K" when the gaps are equal, else their range."""
    if not gaps.size:
        return "one checkpoint"
    low, high = fg.format_tokens(gaps.min()), fg.format_tokens(gaps.max())
    return f"every {low}" if low == high else f"{low} to {high}"


def _tau_label(row: dict) -> str:
    if row["source"] == "quantile":
        return f"quantile {row['quantile']:g} of {row['reference_revision']}"
    return str(row["source"])


def comparison_table(c: Comparison, fmt: str = "markdown") -> str:
    """The findings of every series under every compared function, one row each (stdout of `dormant compare`)."""
    if fmt not in COMPARISON_FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(COMPARISON_FORMATS)}")
    headers = [h for h, _ in FINDINGS_COLUMNS]
    if fmt == "csv":
        import csv
        import io

        wide = {h: _has_interval(h, c) for h in headers}
        head = ["score_fn", "series", "layers", "heads"]
        for h in headers:
            head += [h, f"{h} low", f"{h} high"] if wide[h] else [h]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for fn in c.score_fns:
            for m, (_, values) in zip(c.members, findings_rows(c, fn)):
                row = [fn, m.model_id, str(m.series.n_layers), str(m.series.n_heads)]
                for h, v in zip(headers, values):
                    fields = cell_fields(v)
                    row += fields + [""] * ((3 if wide[h] else 1) - len(fields))
                w.writerow(row)
        return buf.getvalue().rstrip("\n")
    lines = [
        "| score function | series | layers × heads | " + " | ".join(headers) + " |",
        "|---|---|---|" + "---|" * len(headers),
    ]
    for fn in c.score_fns:
        for m, (_, values) in zip(c.members, findings_rows(c, fn)):
            cells = [fn, m.model_id, f"{m.series.n_layers} × {m.series.n_heads}", *map(cell_text, values)]
            lines.append("| " + " | ".join(map(md, cells)) + " |")  # a cell may name a series or calibration set
    return "\n".join(lines)


def comparison_markdown(c: Comparison) -> str:
    """summary.md of a comparison: the settings, the lines that limit it, the findings and the differences."""
    lines = [f"# Dormant heads compared: {' vs '.join(md(m.model_id) for m in c.members)}", ""]
    lines += ["| " + " | ".join(SETTINGS_HEADER) + " |", "|" + "---|" * len(SETTINGS_HEADER)]
    lines += ["| " + " | ".join(map(md, r)) + " |" for r in settings_rows(c)]  # every cell may name a series or set
    if c.notes:
        lines += ["", "What limits the comparison:", ""] + [f"- {md(n)}" for n in c.notes]
    lines += ["", "## Findings", "", comparison_table(c)]
    for fn in c.score_fns:
        lines += ["", f"## Differences under {fn} (against {md(c.members[0].model_id)})", ""]
        lines += [f"| finding | series | {DIFFERENCE_HEADER} | test |", "|---|---|---:|---|"]
        for d in differences(c, fn):
            lines.append(f"| {md(d.finding)} | {md(d.model_id)} | {cell_text(d.estimate)} | {md(d.test)} |")
    return "\n".join(lines) + "\n"
