"""Drawing only: each function takes a figure's data (computed in `report.py`) and returns a matplotlib Figure;
`report_html` lays the figures and tables out as the report's index.html.

Figures are built with `matplotlib.figure.Figure` (no pyplot): no global state, safe in worker threads.
The x axis is training tokens, on a log scale when the series spans two decades or more; a tokens = 0
checkpoint then sits in the linear part of a symlog axis (a log axis cannot show 0).
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from dormant_tasks.engine.score_functions import get_score_function
from dormant_tasks.tracking.masks import QUANTILE_DEFAULTS

DPI = 150
# Raster cell colours, indexed by raster_codes(): not scored, active, dormant, fell dormant here, woke here.
RASTER_COLOURS = ("#d9d9d9", "#cfe1f2", "#1f3b63", "#d62728", "#2ca02c")
RASTER_NAMES = ("not scored", "active", "dormant", "fell dormant here", "woke here")
FELL_COLOUR, WOKE_COLOUR = RASTER_COLOURS[3], RASTER_COLOURS[4]


def format_tokens(t: float) -> str:
    """1234 -> '1.2K', 294e9 -> '294B', 0 -> '0'."""
    if t == 0:
        return "0"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(t) >= size:
            v = t / size
            return f"{v:.0f}{unit}" if v >= 100 or v == int(v) else f"{v:.3g}{unit}"
    return f"{t:.0f}"


def set_tokens_axis(ax, tokens: np.ndarray) -> None:
    positive = tokens[tokens > 0]
    if positive.size and tokens.max() / positive.min() >= 100:
        if (tokens == 0).any():
            ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.4)
            ax.set_xlim(-0.2 * positive.min(), tokens.max() * 1.3)  # symlog's auto margin mirrors the decades below 0
        else:
            ax.set_xscale("log")
        # Decades only (symlog would also tick inside its linear part, on top of the 0 tick).
        low, high = int(np.ceil(np.log10(positive.min()))), int(np.floor(np.log10(positive.max())))
        decades = 10.0 ** np.arange(low, high + 1, max(1, int(np.ceil((high - low + 1) / 10))))
        ax.xaxis.set_major_locator(FixedLocator(([0.0] if (tokens == 0).any() else []) + decades.tolist()))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_tokens(x)))
    ax.set_xlabel("training tokens")


def _column_ticks(ax, tokens: np.ndarray, max_labels: int = 12) -> None:
    """Equal-width checkpoint columns labelled with their tokens (a subset when there are many)."""
    every = max(1, int(np.ceil(len(tokens) / max_labels)))
    idx = np.arange(0, len(tokens), every)
    ax.set_xticks(idx)
    ax.set_xticklabels([format_tokens(tokens[i]) for i in idx], rotation=45, ha="right")
    ax.set_xlabel("checkpoint (training tokens)")


def _fn_style(fn: str, base_colours: dict[str, str]) -> dict:
    """Same colour for a function and its _ln/_hn variants; raw solid, _ln dashed, _hn dotted."""
    base = fn.split("_")[0]
    colour = base_colours.setdefault(base, f"C{len(base_colours) % 10}")
    style = "--" if fn.endswith("_ln") else ":" if fn.endswith("_hn") else "-"
    return {"color": colour, "linestyle": style}


def draw_dormant_percent(tokens: np.ndarray, pct: np.ndarray, score_fns) -> Figure:
    """pct: [fn, checkpoint] % of heads dormant."""
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax = fig.add_subplot()
    colours: dict[str, str] = {}
    marker = "o" if len(tokens) <= 40 else None
    for fn, row in zip(score_fns, pct):
        ax.plot(tokens, row, label=fn, marker=marker, markersize=3, linewidth=1.4, **_fn_style(fn, colours))
    set_tokens_axis(ax, tokens)
    ax.set_ylabel("% of heads dormant")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("Dormant heads through training, per score function")
    return fig


def raster_codes(states: np.ndarray, marks: np.ndarray) -> np.ndarray:
    """int8 [head, checkpoint] index into RASTER_COLOURS."""
    codes = np.where(states < 0, 0, states + 1).astype(np.int8)
    codes[marks == 1] = 3
    codes[marks == -1] = 4
    return codes


def draw_raster(
    raster, tokens: np.ndarray, n_layers: int, n_heads: int, score_fn: str, tau: float, hide_blips: bool = False
) -> Figure:
    """raster: report.RasterData; rows grouped by layer (layer 0 on top); `hide_blips`: its states have the
    blips undone (said in the title)."""
    n_rows, n_cols = raster.states.shape
    fig = Figure(
        figsize=(min(max(7.5, 4 + 0.12 * n_cols), 14), min(max(3.5, 0.13 * n_rows + 1.5), 13)), layout="constrained"
    )
    ax = fig.add_subplot()
    codes = raster_codes(raster.states, raster.marks)
    ax.imshow(codes, aspect="auto", interpolation="nearest", cmap=ListedColormap(RASTER_COLOURS), vmin=0, vmax=4)
    for boundary in range(1, n_layers):
        ax.axhline(boundary * n_heads - 0.5, color="white", linewidth=0.8 if n_layers <= 64 else 0.3)
    if n_rows <= 48:  # few heads: name each row
        ax.set_yticks(np.arange(n_rows), raster.row_labels, fontsize=7)
    else:
        layers = np.arange(0, n_layers, max(1, int(np.ceil(n_layers / 32))))
        ax.set_yticks(layers * n_heads + (n_heads - 1) / 2, [f"L{layer}" for layer in layers], fontsize=8)
    ax.set_ylabel(f"heads by layer ({n_heads} per layer)")
    _column_ticks(ax, tokens)
    fn = get_score_function(score_fn)
    undone = ", blips undone" if hide_blips else ""
    ax.set_title(f"{score_fn} head states (dormant if score {fn.direction} {tau:g}{undone})")
    used = sorted(set(np.unique(codes).tolist()) | {1, 2})
    handles = [Patch(facecolor=RASTER_COLOURS[c], edgecolor="#888888", label=RASTER_NAMES[c]) for c in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def draw_layer_counts(counts: np.ndarray, tokens: np.ndarray, n_heads: int, score_fn: str) -> Figure:
    """counts: [layer, checkpoint] dormant heads per layer."""
    n_layers, n_cols = counts.shape
    fig = Figure(figsize=(min(4 + 0.12 * n_cols, 14), min(max(2.5, 0.22 * n_layers + 1.5), 9)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(counts, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=n_heads)
    fig.colorbar(image, ax=ax, label=f"dormant heads (of {n_heads})")
    if counts.size <= 400:
        for (layer, col), value in np.ndenumerate(counts):
            colour = "white" if value < 0.6 * n_heads else "black"
            ax.text(col, layer, str(value), ha="center", va="center", fontsize=7, color=colour)
    every = max(1, int(np.ceil(n_layers / 32)))
    ax.set_yticks(np.arange(0, n_layers, every))
    ax.set_ylabel("layer")
    _column_ticks(ax, tokens)
    ax.set_title(f"Dormant heads per layer under {score_fn}")
    return fig


def draw_transition_bars(counts, tokens: np.ndarray, score_fn: str) -> Figure:
    """counts: report.TransitionCounts over the intervals ending at checkpoints 1..n-1 (tokens of those)."""
    x = np.arange(len(counts.fell))
    fig = Figure(figsize=(min(max(7.5, 5 + 0.08 * len(x)), 14), 4), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(x, counts.fell, color=FELL_COLOUR, label="fell dormant (active → dormant)")
    ax.bar(x, -counts.woke, color=WOKE_COLOUR, label="woke (dormant → active)")
    ax.axhline(0, color="black", linewidth=0.6)
    limit = max(1, int(max(counts.fell.max(initial=0), counts.woke.max(initial=0))))
    ax.set_ylim(-limit * 1.15, limit * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{abs(v):g}"))
    ax.set_ylabel("heads per interval")
    _column_ticks(ax, tokens)
    ax.set_xlabel("interval ending at checkpoint (training tokens)")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{score_fn} transitions between consecutive checkpoints")
    return fig


def draw_score_bands(tokens: np.ndarray, bands: np.ndarray, tau: float, score_fn: str) -> Figure:
    """bands: [3, checkpoint] = 10th percentile, median, 90th percentile of the per-head scores."""
    fn = get_score_function(score_fn)
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(tokens, bands[0], bands[2], color="C0", alpha=0.25, linewidth=0, label="10–90% of heads")
    ax.plot(tokens, bands[1], color="C0", marker="o" if len(tokens) <= 40 else None, markersize=3, label="median")
    ax.axhline(tau, color="C3", linestyle="--", label=f"tau = {tau:g} (dormant if score {fn.direction} tau)")
    set_tokens_axis(ax, tokens)
    ax.set_ylabel(f"{score_fn} score (per-head mean over inputs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(f"Distribution of {score_fn} scores over heads")
    return fig


def draw_agreement(iou: np.ndarray, score_fns, revision: str) -> Figure:
    """iou: [fn, fn] IoU of dormant sets (NaN where both sets are empty)."""
    n = len(score_fns)
    fig = Figure(figsize=(max(5.5, 2.5 + 0.5 * n), max(4.0, 1.8 + 0.45 * n)), layout="constrained")
    ax = fig.add_subplot()
    cmap = ListedColormap(np.linspace([1, 1, 1, 1], [0.12, 0.23, 0.39, 1], 256)).with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(iou), cmap=cmap, vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, label="IoU of dormant head sets", shrink=0.8)
    for (i, j), value in np.ndenumerate(iou):
        text = "–" if np.isnan(value) else f"{value:.2f}"
        colour = "white" if not np.isnan(value) and value > 0.55 else "black"
        ax.text(j, i, text, ha="center", va="center", fontsize=7 if n > 8 else 9, color=colour)
    ax.set_xticks(range(n), score_fns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(n), score_fns, fontsize=8)
    ax.set_title(f"Agreement of score functions at the last checkpoint\n{revision} (–: both sets empty)", fontsize=9)
    return fig


# Calibration-set raster colours, indexed by state + 1 (report.CalibrationSets.states): fewer than 2 sets
# scored it, dormant on no set, on some, on every set.
SET_COLOURS = ("#d9d9d9", "#cfe1f2", "#f0a04b", "#1f3b63")
SET_NAMES = ("fewer than 2 sets scored", "dormant on no set", "dormant on some sets", "dormant on every set")


def draw_set_agreement(tokens: np.ndarray, jaccard: dict, score_fn: str) -> Figure:
    """jaccard: (set a, set b) -> float64 [checkpoint] Jaccard index of the two sets' masks (NaN: not both)."""
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    marker = "o" if len(tokens) <= 40 else None
    for k, ((a, b), values) in enumerate(jaccard.items()):
        ok = ~np.isnan(values)
        if ok.any():
            ax.plot(
                tokens[ok],
                values[ok],
                marker=marker,
                markersize=3,
                linewidth=1.4,
                color=f"C{k % 10}",
                label=f"{a} vs {b}",
            )
    set_tokens_axis(ax, tokens)
    ax.set_ylim(-0.02, 1.05)
    ax.set_ylabel("Jaccard index of the dormant head sets")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    # over the whole figure: the legend beside the axes leaves them too narrow to hold the title
    fig.suptitle(f"Agreement of the calibration sets under {score_fn} (1: the same heads dormant)")
    return fig


def draw_set_length(ld) -> Figure:
    """report.LengthDependence: grouped bars, per head (most different between sets first) one bar per set.

    An undefined length_slope (NaN: the set's input lengths do not vary, or the result was re-aggregated from
    kept per-input scores, which keep no token counts) gets no bar, and a head undefined on every set is left
    out (counted in the title); when every head is, the figure says so instead of drawing bars.
    """
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    n_sets = ld.slope.shape[0]
    shown = np.flatnonzero(~np.isnan(ld.slope).all(axis=0))  # [head] heads with a slope on at least one set
    title = f"Length dependence of the most set-dependent heads, {ld.revision}"
    if shown.size == 0:
        ax.text(
            0.5,
            0.5,
            f"length_slope is undefined (NaN) for all {len(ld.heads)} heads on every set: the inputs' lengths do "
            "not vary,\nor the results were re-aggregated from kept per-input scores (which keep no token counts)",
            ha="center",
            va="center",
            fontsize=9,
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        return fig
    width = 0.8 / n_sets
    x = np.arange(shown.size)
    for k in range(n_sets):
        values = ld.slope[k, shown]  # [shown head]
        ok = ~np.isnan(values)
        ax.bar(x[ok] + (k - (n_sets - 1) / 2) * width, values[ok], width, color=f"C{k % 10}", label=ld.sets[k])
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_xticks(x, [ld.heads[i] for i in shown], fontsize=8)
    ax.set_ylabel(f"{ld.score_fn} change per doubling of input length")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    left_out = len(ld.heads) - shown.size
    if left_out or np.isnan(ld.slope[:, shown]).any():
        title += f"\n(no bar where length_slope is undefined; {left_out} head(s) undefined on every set left out)"
    ax.set_title(title, fontsize=10)
    return fig


def draw_set_raster(
    states: np.ndarray, tokens: np.ndarray, n_layers: int, n_heads: int, score_fn: str, n_sets: int
) -> Figure:
    """states: int8 [head, checkpoint] (report.CalibrationSets.states); rows grouped by layer, layer 0 on top."""
    n_rows, n_cols = states.shape
    fig = Figure(
        figsize=(min(max(7.5, 4 + 0.12 * n_cols), 14), min(max(3.5, 0.13 * n_rows + 1.5), 13)), layout="constrained"
    )
    ax = fig.add_subplot()
    codes = states.astype(np.int16) + 1
    ax.imshow(codes, aspect="auto", interpolation="nearest", cmap=ListedColormap(SET_COLOURS), vmin=0, vmax=3)
    for boundary in range(1, n_layers):
        ax.axhline(boundary * n_heads - 0.5, color="white", linewidth=0.8 if n_layers <= 64 else 0.3)
    if n_rows <= 48:
        labels = [f"L{layer}.H{head}" for layer in range(n_layers) for head in range(n_heads)]
        ax.set_yticks(np.arange(n_rows), labels[:n_rows], fontsize=7)
    else:
        layers = np.arange(0, n_layers, max(1, int(np.ceil(n_layers / 32))))
        ax.set_yticks(layers * n_heads + (n_heads - 1) / 2, [f"L{layer}" for layer in layers], fontsize=8)
    ax.set_ylabel(f"heads by layer ({n_heads} per layer)")
    _column_ticks(ax, tokens)
    ax.set_title(f"{score_fn} head states across {n_sets} calibration sets")
    used = sorted(set(np.unique(codes).tolist()) | {1, 3})
    handles = [Patch(facecolor=SET_COLOURS[c], edgecolor="#888888", label=SET_NAMES[c]) for c in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def draw_accuracy_vs_zeroed(curves: dict[str, np.ndarray], base_accuracy: float, title: str) -> Figure:
    """curves: score_fn -> [point, 2] (% of heads zeroed, accuracy %), sorted by % zeroed."""
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    colours: dict[str, str] = {}
    for fn, points in curves.items():
        ax.plot(points[:, 0], points[:, 1], marker="o", markersize=3, label=fn, **_fn_style(fn, colours))
    ax.axhline(base_accuracy, color="black", linewidth=0.8, label=f"base {base_accuracy:.2f}")
    ax.axhline(base_accuracy - 1.0, color="black", linestyle="--", linewidth=0.8, label="base − 1 point")
    ax.set_xlabel("% of heads zeroed (measured)")
    ax.set_ylabel("accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


def draw_auc_agreement(rho: np.ndarray, models, task: str) -> Figure:
    """rho: [model, model] Spearman correlation of the score functions' AUCs on `task` (NaN: < 2 shared)."""
    n = len(models)
    fig = Figure(figsize=(min(max(5.5, 3.5 + 0.5 * n), 14), min(max(4.0, 2.4 + 0.45 * n), 13)), layout="constrained")
    ax = fig.add_subplot()
    cmap = ListedColormap(
        np.vstack(
            [
                np.linspace([0.70, 0.09, 0.17, 1], [1, 1, 1, 1], 128),
                np.linspace([1, 1, 1, 1], [0.12, 0.23, 0.39, 1], 128),
            ]
        )
    ).with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(rho), cmap=cmap, vmin=-1, vmax=1)
    fig.colorbar(image, ax=ax, label="Spearman ρ of the functions' AUCs", shrink=0.8)
    if n <= 20:
        for (i, j), value in np.ndenumerate(rho):
            text = "–" if np.isnan(value) else f"{value:.2f}"
            colour = "white" if not np.isnan(value) and abs(value) > 0.55 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=7 if n > 8 else 9, color=colour)
    fontsize = 8 if n <= 24 else 5
    ax.set_xticks(range(n), models, rotation=45, ha="right", fontsize=fontsize)
    ax.set_yticks(range(n), models, fontsize=fontsize)
    ax.set_title(
        f"Agreement of models on the ranking of score functions\nby normalised AUC on {task} "
        "(–: fewer than 2 functions shared)",
        fontsize=9,
    )
    return fig


def save_figure(fig: Figure, folder: Path, name: str) -> tuple[Path, Path]:
    """Write name.png (slides) and name.svg (papers) into folder."""
    png, svg = folder / f"{name}.png", folder / f"{name}.svg"
    fig.savefig(png, dpi=DPI)
    fig.set_layout_engine("none")  # keep the layout just computed: the SVG needs no second pass
    fig.savefig(svg, metadata={"Date": None})
    return png, svg


# ---------------------------------------------------------------- the HTML page


CAPTIONS = {
    "dormant_percent": "Percentage of heads dormant at each checkpoint, one line per score function "
    "(raw scores solid, layer-normalised _ln dashed, head-normalised _hn dotted).",
    "raster": "Every head's state at every checkpoint under {fn}: rows are heads grouped by layer (layer 0 "
    "on top), columns are checkpoints in series order; red / green cells mark the checkpoint where "
    "a head fell dormant / woke.",
    "layers": "Number of dormant heads per layer at each checkpoint under {fn}.",
    "transitions": "Transitions under {fn} between consecutive checkpoints (from the store's transitions table): "
    "heads that fell dormant (up) and heads that woke (down) in each interval.",
    "scores": "Distribution over heads of the per-head {fn} score (each head's mean over the calibration "
    "inputs, from head_scores): median and 10–90% band, with the series' tau.",
    "agreement": "Agreement between score functions at the last checkpoint: intersection over union of "
    "their dormant head sets (– where both sets are empty).",
    "set_agreement": "Agreement of the calibration sets through training under {fn}: per pair of sets, the "
    "Jaccard index of their dormant head sets (heads dormant on both / heads dormant on either; 1 when neither "
    "has a dormant head), each set with its own taus, at the checkpoints both sets scored.",
    "set_raster": "Every head's state at every checkpoint scored on two or more calibration sets under {fn}: "
    "dormant on every set, on some of them, or on none; rows are heads grouped by layer (layer 0 on top).",
    "set_length": "The heads whose {fn} dormant rate differs most between the calibration sets at the last "
    "checkpoint they share, and for each set how the head's {fn} score changes per doubling of the input "
    "length (length_slope: least squares over the set's inputs). Where it is undefined (NaN: the set's input "
    "lengths do not vary, or the result was re-aggregated by --retau from kept per-input scores, which keep no "
    "token counts) no bar is drawn, and heads undefined on every set are left out.",
    "accuracy_vs_zeroed": "Accuracy against the measured % of heads zeroed (dynamic zeroing, thresholds at "
    "quantiles of the un-intervened scores), with the base accuracy and base − 1 point.",
}


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(kind: str, name: str, fn: str) -> str:
    caption = CAPTIONS[kind.rstrip("_0123456789") if kind.startswith("accuracy") else kind].format(fn=fn)
    return (
        f'<figure><img src="figures/{name}.png" alt="{escape(name)}"><figcaption>{escape(caption)} '
        f'<a href="figures/{name}.png">PNG</a> · <a href="figures/{name}.svg">SVG</a></figcaption></figure>'
    )


def failed_note(failed) -> str:
    """The heading of a series' failed checkpoints (`failed_checkpoints` rows), in the report and summary.md."""
    n = len(failed)
    return f"{n} checkpoint{'s' if n != 1 else ''} failed, not stored (a rerun of `dormant track` retries)"


def report_html(series, fn: str, fig: dict[str, str], rows: list[dict], groups, sets=None) -> str:
    """index.html: provenance, summary and figures of a `report.Series`; `fig` maps a figure kind to its file name;
    `sets` (report.CalibrationSets, several calibration sets only) adds the "Calibration sets" section."""
    c0, t = series.checkpoints, series.tokens
    distinct = lambda key: ", ".join(sorted({str(c.get(key)) for c in c0}))  # noqa: E731
    prov = _table(
        ["item", "value"],
        [
            ["calibration set", f"{c0[0]['calibration_id']} ({distinct('n_inputs')} inputs)"],
            ["taus id", c0[0]["taus_id"]],
            ["code version", distinct("code_version")],
            ["scoring version", distinct("scoring_version")],
            ["dtype / device", f"{distinct('dtype')} / {distinct('device')}"],
            *(
                [[failed_note(series.failed), "; ".join(f"{r['revision']}: {r['reason']}" for r in series.failed)]]
                if series.failed
                else []
            ),
        ],
    )
    sources = {r["score_fn"]: r for r in series.tau_sources}
    taus = _table(
        ["score function", "dormant if", "source"],
        [[f, f"score {d} {tau:g}", _tau_source(sources.get(f))] for f, (tau, d) in series.taus.items()],
    )
    summary = _table(
        [
            "score function",
            "first checkpoint with a dormant head",
            "final % dormant",
            "fell dormant",
            "woke",
            "confident",
            "blips",
            "heads that changed state",
        ],
        [
            [
                r["score_fn"],
                first_dormant_label(r),
                f"{r['final_pct_dormant']:.2f}",
                r["fell_dormant"],
                r["woke"],
                r["confident"],
                r["blips"],
                r["heads_ever_changed"],
            ]
            for r in rows
        ],
    )
    ckpts = _table(
        ["revision", "stage", "step", "tokens", "analysed at", "seconds"],
        [
            [
                c["revision"],
                c["stage"],
                c["step"],
                format_tokens(c["tokens"]),
                c["analyzed_at"],
                f"{c['seconds']:.1f}" if c["seconds"] is not None else "",
            ]
            for c in c0
        ],
    )
    figure = lambda kind: _figure(kind, fig[kind], fn)  # noqa: E731
    note = raw_quantile_note(series.tau_sources)
    parts = [
        f"<h1>Dormant heads through training: {escape(series.model_id)}</h1>",
        f"<p>{len(t)} checkpoint(s), {escape(series.revisions[0])} ({format_tokens(t[0])} tokens) to "
        f"{escape(series.revisions[-1])} ({format_tokens(t[-1])} tokens); {series.n_layers} layers × "
        f"{series.n_heads} heads; per-function figures for <b>{escape(fn)}</b>.</p>",
        "<h2>Provenance</h2>",
        prov,
        "<h3>Taus</h3>",
        taus,
        "<h2>Summary</h2>",
        summary,
        figure("dormant_percent"),
        *([f'<p class="note">{escape(note)}</p>'] if note else []),
        "<h2>Head states</h2>",
        figure("raster"),
        figure("layers"),
    ]
    if "transitions" in fig:
        parts += ["<h2>Transitions</h2>", figure("transitions")]
    else:
        parts += ["<p>A single checkpoint: no transitions yet.</p>"]
    parts += ["<h2>Scores</h2>", figure("scores"), "<h2>Agreement</h2>", figure("agreement")]
    if sets is not None:
        parts += _calibration_sets_html(sets, figure if "set_agreement" in fig else None, "set_length" in fig)
    if series.evaluations:
        parts += [
            "<h2>Interventions</h2>",
            "<p>Tasks, prompts, few-shot examples and metrics are lm-evaluation-harness's; each sweep names its "
            "protocol (shots, metric, chat template, BOS rule, data source, and the split its few-shot examples "
            "come from: when a task's few-shot split is not bundled they come from the scored split, never the "
            "item itself). The metric is the largest % of heads zeroed with accuracy within 1 point of the "
            "base (last crossing of base − 1, linearly interpolated; 0 if never crossed).</p>",
        ]
        for k, g in enumerate(groups):
            parts += [
                f"<h3>{escape(g.task)}, {g.shots}-shot, {escape(g.revision)}: base accuracy "
                f"{g.base_accuracy:.2f}% on {g.n_items} items</h3>",
                f'<p class="note">Protocol: {escape(g.protocol)}.</p>',
                _table(
                    ["score function", "% zeroed within 1 point", "normalised AUC"],
                    [[f, f"{g.within_1pt[f]:.2f}", f"{g.auc[f]:.2f}"] for f in g.curves],
                ),
                figure(f"accuracy_vs_zeroed_{k}"),
            ]
    static = [e for e in series.evaluations if e["mode"] == "static"]
    if static:
        parts += [
            "<h3>Static zeroing (a fixed head set, e.g. a tracker mask)</h3>",
            _table(
                ["revision", "task", "shots", "score function", "tau", "% zeroed", "accuracy", "base accuracy"],
                [
                    [
                        e["revision"],
                        e["task"],
                        e["shots"],
                        e["score_fn"],
                        e["tau"],
                        f"{100 * e['frac_zeroed']:.2f}",
                        f"{100 * e['accuracy']:.2f}",
                        f"{100 * e['base_accuracy']:.2f}",
                    ]
                    for e in static
                ],
            ),
        ]
    parts += ["<h2>Checkpoints</h2>", f"<details><summary>{len(c0)} checkpoints</summary>{ckpts}</details>"]
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Dormant heads: '
        f"{escape(series.model_id)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def _calibration_sets_html(sets, figure, with_length: bool = False) -> list[str]:
    """The "Calibration sets" section: a line per set (its own masks and transitions, with the confident ones and
    the blips), then the figures."""
    fn = sets.score_fn
    table = _table(
        [
            "calibration set",
            "checkpoints",
            "last checkpoint",
            f"% dormant there ({fn})",
            "fell dormant",
            "woke",
            "confident",
            "blips",
        ],
        [
            [
                r["calibration_id"],
                r["n_checkpoints"],
                r["last_revision"] or "",
                "not tracked" if r["final_pct_dormant"] is None else f"{r['final_pct_dormant']:.2f}",
                r["fell_dormant"],
                r["woke"],
                r["confident"],
                r["blips"],
            ]
            for r in sets.set_rows
        ],
    )
    parts = [
        "<h2>Calibration sets</h2>",
        f"<p>The series is tracked on {len(sets.calibration_ids)} calibration sets (the first is the primary one, "
        "which the rest of the report shows), each with its own taus. Do the dormant heads depend on the input "
        "text? The figures compare the sets' masks at the checkpoints they share.</p>",
        table,
    ]
    if sets.last_jaccard:
        parts.append(
            _table(
                ["pair of sets", "last shared checkpoint", "mean Jaccard there (over score functions)"],
                [[f"{a} vs {b}", rev, f"{j:.2f}"] for (a, b), (rev, j) in sets.last_jaccard.items()],
            )
        )
    if figure is None:
        parts.append(f"<p>No checkpoint is scored under {escape(fn)} on two sets.</p>")
    else:
        parts += [figure("set_agreement"), figure("set_raster")]
        if with_length:
            parts.append(figure("set_length"))
    return parts


def first_dormant_label(row: dict) -> str:
    """A summary row's first checkpoint with a dormant head, e.g. 'stage1-step10-tokens1000 (1K tokens)'."""
    if not row["first_dormant_revision"]:
        return "never"
    return f"{row['first_dormant_revision']} ({format_tokens(row['first_dormant_tokens'])} tokens)"


def raw_quantile_note(tau_sources: list[dict]) -> str | None:
    """Why the raw-unit functions with a quantile tau do not read like the _ln ones (HTML and summary.md).

    Their tau is the q-quantile of the reference checkpoint's own pooled scores, so their curve is pinned
    near q there whatever the heads do; elsewhere it follows the raw scale of the layers, which training
    grows and shrinks. None when no such function is in the series.
    """
    rows = [r for r in tau_sources if r["source"] == "quantile" and r["score_fn"] in QUANTILE_DEFAULTS]
    if not rows:
        return None
    fns = ", ".join(f"{r['score_fn']} (q = {r['quantile']:g})" for r in rows)
    refs = ", ".join(sorted({str(r["reference_revision"]) for r in rows}))
    return (
        f"Raw-unit functions with a quantile tau: {fns}. Each tau is the q-quantile of the pooled per-input "
        f"scores of the reference checkpoint {refs} (by default the series' last), so these functions mark "
        "about q of the (input, head) pairs inactive there and their % dormant ends near q by construction. "
        'Raw norms and entropies change scale as training proceeds, so their "dormant" heads at earlier '
        "checkpoints reflect the layer's scale rather than the head's behaviour: their curves are not "
        "comparable with those of the _ln functions."
    )


def _tau_source(row: dict | None) -> str:
    if row is None:
        return "not recorded"
    if row["source"] == "quantile":
        return f"quantile {row['quantile']:g} of {row['reference_revision']}'s per-input scores, pooled"
    return str(row["source"])


STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:90%}"
    "th{background:#f2f2f2}figure{margin:1.5em 0}img{max-width:100%;height:auto}"
    "figcaption{font-size:90%;color:#444}.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em}"
)
