"""The leaderboard as text (`dormant leaderboard --format`): markdown, CSV or LaTeX, with its cells' marks and their
footnotes.
"""

from __future__ import annotations

import csv
import html
import io
import math

from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.evaluation.leaderboard_rows import AVERAGE_MODEL, BEST, OURS, LeaderboardRow, row_order
from dormant_tasks.evaluation.metric import AUC_UNIT, WARNED, within_text

LEADERBOARD_FORMATS = ("markdown", "csv", "latex")
HEADER = ("score function", "model", "task", "% zeroed within 1 point", f"AUC ({AUC_UNIT})", "base accuracy")
INTERVAL_HEADER = ("95% interval", "items")  # after the value, when any row has an interval
CSV_COLUMNS = (
    *("score_fn", "best_fn", "model", "revision", "task", "shots", "metric", "chat_template", "bos"),
    *("rendering", "precision", "threshold_source"),
    *("within_1pt", "auc", "base_accuracy", "n_models", "warnings"),
    *("never_within", "within_throughout", "low", "high", "n_items", "interval", "chosen_on", "reported_on"),
)
NO_CROSSING = "—"  # the interval of a curve that never crossed: its 0 is no crossing, so it has no interval
ZEROS_IN = "‡"  # after a mean or difference that holds the authors' 0 of a curve that never crossed
NO_CROSSING_NOTE = (
    f"{NO_CROSSING}: no interval, the curve never crossed base − 1 point (its value is no crossing, not 0 heads)"
)
ZEROS_IN_NOTE = f"{ZEROS_IN}: a mean or difference that counts a never-crossing curve as the authors' 0"


def number_text(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def interval_text(low: float | None, high: float | None, never: str | None) -> str:
    """ "12.30 to 18.75"; NO_CROSSING for a curve that never crossed (`never`: its words; its redraws give "0.00
    to 0.00", which reads as a measured 0); "" when there is no interval."""
    if low is None or math.isnan(low):
        return ""
    if never:
        return NO_CROSSING
    return f"{low:.2f} to {high:.2f}"


def _interval(r: LeaderboardRow) -> str:
    return interval_text(r.low, r.high, r.never)


def value_text(r: LeaderboardRow) -> str:
    """A row's "% zeroed within 1 point" as every table shows it: the never-crossing words (`within_text`), else
    the value, marked ZEROS_IN when it holds a never-crossing curve's authors' 0 (a mean over models, a
    difference), and WARNED when its curve has a warning."""
    marked = ZEROS_IN if not r.never and r.zeros_counted else ""
    return within_text(r.within_1pt, r.never) + marked + (WARNED if r.warnings else "")


def table_notes(rows: list[LeaderboardRow]) -> list[str]:
    """The footnotes of the marks the rows' cells carry (`interval_text`, `value_text`)."""
    notes = [NO_CROSSING_NOTE] if any(_interval(r) == NO_CROSSING for r in rows) else []
    return notes + ([ZEROS_IN_NOTE] if any(ZEROS_IN in value_text(r) for r in rows) else [])


def _function_label(r: LeaderboardRow) -> str:
    fn = r.score_fn
    if fn == BEST:  # named as such on every row, its Average too
        fn = "best of all functions"
    if fn in ("best of all functions", OURS) and r.best_fn:
        where = f", chosen on {r.chosen_on}, reported on {r.reported_on}" if r.chosen_on else ""
        fn = f"{fn} ({r.best_fn}{where})"
    return fn


def _labels(rows: list[LeaderboardRow], intervals: bool = False) -> list[tuple[str, ...]]:
    """HEADER's cells of each row, as shown (markdown and LaTeX), with INTERVAL_HEADER's after the value."""
    n_total = len({r.model for r in rows if r.model != AVERAGE_MODEL})
    out: list[tuple[str, ...]] = []
    for r in rows:
        model = r.model
        if model == AVERAGE_MODEL and r.n_models is not None and r.n_models < n_total:
            model = f"{AVERAGE_MODEL} ({r.n_models} of {n_total} models)"
        extra = (_interval(r), "" if r.n_items is None else str(r.n_items)) if intervals else ()
        out.append(
            (_function_label(r), model, r.task, value_text(r), *extra, number_text(r.auc), number_text(r.base_accuracy))
        )
    return out


def _header(intervals: bool) -> tuple[str, ...]:
    return (*HEADER[:4], *(INTERVAL_HEADER if intervals else ()), *HEADER[4:])


_LATEX_SPECIAL = {c: f"\\{c}" for c in "&%$#_{}"} | {"~": r"\textasciitilde{}", "^": r"\^{}", "\\": r"\textbackslash{}"}


def _latex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _csv(rows: list[LeaderboardRow]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if (v := getattr(r, k)) is None else v for k in CSV_COLUMNS} for r in rows)
    return buffer.getvalue().rstrip("\n")


def _markdown(header: tuple[str, ...], labels: list[tuple[str, ...]], caption: str | None, notes: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|" + "---:|" * (len(header) - 3)]
    # html.escape: a model or task name is the user's, and a Markdown viewer renders raw HTML
    lines += ["| " + " | ".join(html.escape(c, quote=False).replace("|", "\\|") for c in row) + " |" for row in labels]
    return "\n".join(lines + (["", caption] if caption else []) + [line for n in notes for line in ("", n)])


def _latex_table(
    rows: list[LeaderboardRow],
    header: tuple[str, ...],
    labels: list[tuple[str, ...]],
    caption: str | None,
    notes: list[str],
) -> str:
    columns = "lll" + "r" * (len(header) - 3)
    lines = [rf"\begin{{tabular}}{{{columns}}}", r"\hline", " & ".join(_latex(h) for h in header) + r" \\", r"\hline"]
    for i, (r, row) in enumerate(zip(rows, labels)):
        if i and r.score_fn != rows[i - 1].score_fn:
            lines.append(r"\hline")
        lines.append(" & ".join(_latex(cell) for cell in row) + r" \\")
    lines.append(r"\hline")
    lines += [rf"\multicolumn{{{len(header)}}}{{l}}{{\footnotesize {_latex(n)}}} \\" for n in notes]  # the marks'
    lines.append(r"\end{tabular}")
    return "\n".join(lines + ([f"% {caption}"] if caption else []))


def format_leaderboard_table(rows: list[LeaderboardRow], fmt: str = "markdown") -> str:
    """The rows (of `Leaderboard.rows`) as a markdown table, CSV (every column, full precision, the fields of
    `CSV_COLUMNS`) or a LaTeX tabular; sorted by function, then model, then task."""
    if fmt not in LEADERBOARD_FORMATS:
        raise ConfigError(
            f"--format {fmt}: unknown{did_you_mean(fmt, LEADERBOARD_FORMATS)}; choose one of {', '.join(LEADERBOARD_FORMATS)}"
        )
    rows = sorted(rows, key=row_order)
    if fmt == "csv":
        return _csv(rows)
    intervals = any(_interval(r) for r in rows)
    labels = _labels(rows, intervals)
    header = _header(intervals)
    method = sorted({r.interval for r in rows if r.interval})
    caption = f"95% intervals: {'; '.join(method)} (docs/SCORES.md §6)" if method else None
    if fmt == "markdown":
        return _markdown(header, labels, caption, table_notes(rows))
    return _latex_table(rows, header, labels, caption, table_notes(rows))
