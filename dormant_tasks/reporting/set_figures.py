"""Drawing only: the calibration sets' figures of a report (their data: `sets.py`): how the sets' dormant head
sets agree, which heads each set marks, and how the heads' scores depend on input length per set.
Built on `figures.py`'s tokens axis, like every figure (no pyplot)."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from dormant_tasks.reporting.figures import column_ticks, set_tokens_axis

# Calibration-set raster colours, indexed by state + 1 (sets.CalibrationSets.states): fewer than 2 sets
# scored it, dormant on no set, on some, on every set.
SET_COLOURS = ("#d9d9d9", "#cfe1f2", "#f0a04b", "#1f3b63")
SET_LABELS = ("fewer than 2 sets scored", "dormant on no set", "dormant on some sets", "dormant on every set")


def draw_set_agreement(tokens: np.ndarray, jaccard: dict, score_fn: str, union=None, floor=None) -> Figure:
    """jaccard: (set a, set b) -> float64 [checkpoint] Jaccard index of the two sets' masks (NaN: not both);
    union: the same pairs -> int64 [checkpoint] heads dormant on either set (-1: not both scored), drawn in a panel
    below (a Jaccard of 1 head reads like one of 20); floor: findings.dependence.NoiseFloor, its same-kind
    agreement (the Jaccard that two samples of one kind of text reach) marked at its checkpoint with its 95%
    interval; None: no floor measured (said in the legend)."""
    counts = union is not None and any((u >= 0).any() for u in union.values())
    fig = Figure(figsize=(9, 7.0 if counts else 5.2), layout="constrained")
    if counts:
        ax, below = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1.6))
    else:
        ax, below = fig.add_subplot(), None
    for k, ((a, b), values) in enumerate(jaccard.items()):
        ok = ~np.isnan(values)
        if ok.any():
            # NaN (undefined: neither set marks a head) breaks the line: a gap, never a line across it; the
            # markers keep a defined point between two gaps visible
            ax.plot(tokens, values, marker="o", markersize=3, linewidth=1.4, color=f"C{k % 10}", label=f"{a} vs {b}")
        if below is not None and (a, b) in union:
            n = union[(a, b)].astype(np.float64)
            n[n < 0] = np.nan
            below.plot(tokens, n, marker="o", markersize=3, linewidth=1.2, color=f"C{k % 10}")
    if floor is not None and floor.revision and np.isfinite(floor.within.value):
        w = floor.within
        at = tokens[-1] if len(tokens) else 0
        yerr = None if np.isnan(w.low) else [[max(0.0, w.value - w.low)], [max(0.0, w.high - w.value)]]
        ax.errorbar(
            [at],
            [w.value],
            yerr=yerr,
            fmt="D",
            color="black",
            markersize=6,
            capsize=4,
            zorder=5,
            label=f"noise floor at {floor.revision}: same-kind agreement {w.value:.2f}"
            + ("" if yerr is None else f" (95% CI {w.low:.2f}–{w.high:.2f})"),
        )
    else:
        ax.plot([], [], " ", label="noise floor: not measured")
    set_tokens_axis(below if below is not None else ax, tokens)
    if below is not None:
        ax.set_xlabel("")
        below.set_ylabel("heads dormant\non either set")
        below.yaxis.set_major_locator(MaxNLocator(integer=True))
        below.set_ylim(bottom=0)
        below.grid(alpha=0.3)
    ax.set_ylim(-0.02, 1.05)
    ax.set_ylabel("Jaccard index of the dormant head sets")
    ax.grid(alpha=0.3)
    # under the figure, outside the data: the sets' names are long, a legend beside the axes would squeeze them
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=1, fontsize=8, frameon=False)
    fig.suptitle(f"Calibration sets' agreement under {score_fn}, per pair of sets (1: the same heads; gap: undefined)")
    return fig


def draw_set_length(ld) -> Figure:
    """sets.LengthDependence: grouped bars, per head (most different between sets first) one bar per set.

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
    """states: int8 [head, checkpoint] (sets.CalibrationSets.states); rows grouped by layer, layer 0 on top."""
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
    column_ticks(ax, tokens)
    ax.set_title(f"{score_fn} head states across {n_sets} calibration sets")
    used = sorted(set(np.unique(codes).tolist()) | {1, 3})
    handles = [Patch(facecolor=SET_COLOURS[c], edgecolor="#888888", label=SET_LABELS[c]) for c in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig
