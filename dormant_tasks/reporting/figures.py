"""Drawing only: each function takes a figure's data (computed in `figure_data.py` and `sets.py`) and returns a
matplotlib Figure. The page that lays them out is a Jinja2 template (`page.py`, `templates/report.html.j2`).
This module draws a series' figures and the evaluation's, and holds what every figure shares (the tokens axis,
`save_figure`); the calibration sets' figures are in `set_figures.py`, the comparison's in `compare_figures.py`.

Figures are built with `matplotlib.figure.Figure` (no pyplot): no global state, safe in worker threads.
The x axis is training tokens, on a log scale when the series spans two decades or more; a tokens = 0
checkpoint then sits in the linear part of a symlog axis (a log axis cannot show 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from dormant_tasks.checkpoints import format_tokens
from dormant_tasks.engine import get_score_function
from dormant_tasks.text import plural

DPI = 150
# Raster cell colours, indexed by raster_codes(): not scored, active, dormant, fell dormant here, woke here.
RASTER_COLOURS = ("#d9d9d9", "#cfe1f2", "#1f3b63", "#d62728", "#2ca02c")
RASTER_NAMES = ("not scored", "active", "dormant", "fell dormant here", "woke here")
FELL_COLOUR, WOKE_COLOUR = RASTER_COLOURS[3], RASTER_COLOURS[4]


def tokens_scale(tokens: np.ndarray) -> str:
    """The scale `set_tokens_axis` gives these values: "log" when they span two decades or more, "symlog" when
    they do and one is 0 (a log axis cannot show 0: a short linear stretch holds it), else "linear"."""
    tokens = np.asarray(tokens, dtype=np.float64)
    positive = tokens[tokens > 0]
    if positive.size and tokens.max() / positive.min() >= 100:
        return "symlog" if (tokens == 0).any() else "log"
    return "linear"


SCALE_WORDS = {
    "log": "log axis",
    "symlog": "log axis, with 0 in a short linear stretch at its left",
    "linear": "linear axis",
}


def set_tokens_axis(ax, tokens: np.ndarray, fmt=format_tokens, label: str = "training tokens") -> None:
    """A tokens axis (or, with `fmt` and `label`, any axis of non-negative values, e.g. fractions of training);
    its scale is `tokens_scale`'s, which the captions name (`SCALE_WORDS`)."""
    positive = tokens[tokens > 0]
    scale = tokens_scale(tokens)
    if scale != "linear":
        if scale == "symlog":
            ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.4)
            ax.set_xlim(-0.2 * positive.min(), tokens.max() * 1.3)  # symlog's auto margin mirrors the decades below 0
        else:
            ax.set_xscale("log")
        # Decades only (symlog would also tick inside its linear part, on top of the 0 tick).
        low, high = int(np.ceil(np.log10(positive.min()))), int(np.floor(np.log10(positive.max())))
        decades = 10.0 ** np.arange(low, high + 1, max(1, int(np.ceil((high - low + 1) / 10))))
        ax.xaxis.set_major_locator(FixedLocator(([0.0] if (tokens == 0).any() else []) + decades.tolist()))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt(x)))
    ax.set_xlabel(label)


def column_ticks(ax, tokens: np.ndarray, max_labels: int = 12) -> None:
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


def draw_dormant_percent(tokens: np.ndarray, pct: np.ndarray, score_fns, raw_quantile=()) -> Figure:
    """pct: [fn, checkpoint] % of heads dormant. The functions of `raw_quantile` (raw-unit scores whose tau is a
    quantile of the reference checkpoint's own scores: near that quantile there by construction) get a panel of
    their own below the others, so they do not set the scale of the rest. A line at 0 is drawn above the axis."""
    groups = [[i for i, fn in enumerate(score_fns) if fn not in raw_quantile]]
    groups.append([i for i, fn in enumerate(score_fns) if fn in raw_quantile])
    groups = [g for g in groups if g]
    fig = Figure(figsize=(9, 3.2 + 2.6 * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    colours: dict[str, str] = {}
    marker = "o" if len(tokens) <= 40 else None
    for ax, group in zip(axes, groups):
        raw = score_fns[group[0]] in raw_quantile
        top = max(float(np.nanmax(pct[group])) if np.isfinite(pct[group]).any() else 0.0, 1.0)
        # the legend lists the lines as they end, highest first, each with its last value: lines that sit on one
        # another (several functions at 0% throughout) are told apart by their entries
        last = [pct[i][np.isfinite(pct[i])][-1] if np.isfinite(pct[i]).any() else np.nan for i in range(len(pct))]
        for i in sorted(group, key=lambda i: (-np.nan_to_num(last[i], nan=-1.0), i)):
            flat = np.isfinite(pct[i]).any() and np.nanmax(pct[i]) == 0
            ax.plot(
                tokens,
                pct[i],
                label=f"{score_fns[i]}: 0% throughout" if flat else f"{score_fns[i]}: {last[i]:.3g}% at the end",
                marker=marker,
                markersize=3,
                linewidth=1.4,
                **_fn_style(score_fns[i], colours),
            )
        ax.set_ylim(-0.04 * top, 1.08 * top)  # a function at 0 everywhere stays visible above the axis
        ax.set_ylabel(
            "% dormant (tau: a quantile of the\nreference checkpoint's own scores)" if raw else "% of heads dormant"
        )
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        ax.set_title(
            "raw-unit functions, quantile tau (pinned near its quantile at the reference checkpoint)"
            if raw
            else "functions with a fixed tau or normalised scores",
            fontsize=9,
        )
    set_tokens_axis(axes[-1], tokens)
    fig.suptitle("Dormant heads through training, per score function")
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
    """raster: figure_data.RasterData; rows grouped by layer (layer 0 on top); `hide_blips`: its states have the
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
    column_ticks(ax, tokens)
    fn = get_score_function(score_fn)
    undone = ", blips undone" if hide_blips else ""
    ax.set_title(f"{score_fn} head states (dormant: score {fn.direction} {tau:g} on >= half the inputs{undone})")
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
    column_ticks(ax, tokens)
    ax.set_title(f"Dormant heads per layer under {score_fn}")
    return fig


def draw_transition_bars(counts, tokens: np.ndarray, score_fn: str) -> Figure:
    """counts: figure_data.TransitionCounts over the intervals ending at checkpoints 1..n-1 (tokens of those)."""
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
    column_ticks(ax, tokens)
    ax.set_xlabel("interval ending at checkpoint (training tokens)")
    fig.legend(
        *ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8, frameon=False
    )  # outside the bars
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{score_fn} transitions between consecutive checkpoints")
    return fig


def draw_score_bands(tokens: np.ndarray, bands: np.ndarray, tau: float, score_fn: str, traces=None) -> Figure:
    """bands: [3, checkpoint] = 10th percentile, median, 90th percentile of the per-head scores; traces
    (figure_data.DormantTraces): the heads ever dormant, each its own thin line over the band with a filled marker
    where it is dormant (the band alone hides them: they are the tail it cuts off)."""
    fn = get_score_function(score_fn)
    fig = Figure(figsize=(9, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(tokens, bands[0], bands[2], color="C0", alpha=0.2, linewidth=0, label="10–90% of heads")
    ax.plot(tokens, bands[1], color="C0", marker="o" if len(tokens) <= 40 else None, markersize=3, label="median")
    if traces is not None and len(traces.labels):
        for h in range(len(traces.labels)):
            ax.plot(tokens, traces.scores[h], color="C3", linewidth=0.8, alpha=0.55, zorder=3)
            on = traces.dormant[h]
            ax.plot(tokens[on], traces.scores[h][on], "o", color="C3", markersize=3.5, zorder=4)
        shown = len(traces.labels)
        ax.plot(
            [],
            [],
            color="C3",
            marker="o",
            markersize=3.5,
            linewidth=0.8,
            label=f"heads ever dormant ({shown} of {traces.n_ever} shown; dot: dormant there)"
            if shown < traces.n_ever
            else f"the {shown} head(s) ever dormant (dot: dormant there)",
        )
    elif traces is not None:
        ax.plot([], [], " ", label="no head is dormant at any checkpoint")
    ax.axhline(
        tau,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"tau = {tau:g} (inactive on an input if score {fn.direction} tau)",
    )
    set_tokens_axis(ax, tokens)
    ax.set_ylabel(f"{score_fn} score (per-head mean over inputs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"Distribution of {score_fn} scores over heads, with the dormant heads")
    return fig


def draw_rate_intervals(tokens: np.ndarray, r, score_fn: str) -> Figure:
    """r (figure_data.RateIntervals): one panel per head, its dormant rate through training (line), the 95% interval
    stored with each checkpoint's rate (band; the confident states' rule and clusters), the 0.5 that makes a head
    dormant, and a star where a confident transition lands."""
    n = len(r.labels)
    cols = min(3, max(n, 1))
    rows = max(1, -(-n // cols))
    fig = Figure(figsize=(3.4 * cols + 0.6, 2.5 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_axis_off()
            continue
        ax.fill_between(tokens, r.low[k], r.high[k], color="C0", alpha=0.25, linewidth=0, step=None)
        ax.plot(tokens, r.rate[k], color="C0", marker="o" if len(tokens) <= 40 else None, markersize=3, linewidth=1)
        ax.axhline(0.5, color="black", linestyle="--", linewidth=0.8)
        at = r.confident[k]
        ax.plot(tokens[at], r.rate[k][at], "*", color="C3", markersize=9, zorder=4)
        ax.set_title(r.labels[k], fontsize=9)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        set_tokens_axis(ax, tokens)
        if k < n - cols:  # a panel below holds the label
            ax.set_xlabel("")
    fig.supylabel("dormant rate", fontsize=10)
    if n == 0:
        axes[0, 0].text(0.5, 0.5, f"no head's mask changed under {score_fn}", ha="center", va="center")
    handles = [
        Patch(color="C0", alpha=0.25, label="95% interval of the rate (the confident states' rule)"),
        axes[0, 0].plot([], [], color="C0", marker="o", markersize=3, label="dormant rate")[0],
        axes[0, 0].plot([], [], "--", color="black", linewidth=0.8, label="0.5: dormant at or above")[0],
        axes[0, 0].plot([], [], "*", color="C3", markersize=9, label="confident transition into it")[0],
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    shown = (
        f"the {n} of {r.n_changed} heads whose mask changed, those that changed most"
        if n < r.n_changed
        else (f"the {plural(n, 'head')} whose mask changed")
    )
    fig.suptitle(f"Dormant rate with its interval under {score_fn}: {shown}", fontsize=10)
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


def draw_emergence(e) -> Figure:
    """findings.dynamics.Emergence: the share of the heads that settle dormant that have settled by each token
    count (dormant at >= e.stable of the checkpoints from then on; a step curve), with the EARLY line and the
    share there (its interval when enough layers back it); the censored heads are counted in the label."""
    from dormant_tasks.reporting.texts import few_units  # the findings' words for an interval of few units

    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    settled = np.sort(e.settled_tokens)  # [emerged head]
    if settled.size:
        share = np.arange(1, settled.size + 1) / settled.size
        x = np.concatenate([[min(0, settled[0])], settled, [max(e.final_tokens, settled[-1])]])
        y = np.concatenate([[0.0], share, [1.0]])
        ax.step(
            x,
            100 * y,
            where="post",
            color="C0",
            linewidth=1.6,
            label=f"settled by then (dormant at >= {100 * e.stable:.0f}% of later checkpoints)",
        )
        sure = not np.isnan(e.early.low)
        ax.errorbar(
            [e.early_tokens],
            [100 * e.early.value],
            # max(0, ...): at k = 0 or k = n the interval's end meets the value up to rounding
            yerr=[[100 * max(0.0, e.early.value - e.early.low)], [100 * max(0.0, e.early.high - e.early.value)]]
            if sure
            else None,
            fmt="o",
            color="C3",
            capsize=4,
            label=f"at {format_tokens(e.early_tokens)} tokens: {100 * e.early.value:.0f}%"
            + (
                f" (95% CI{few_units(e.early)})"  # "; only 3 heads: few" when few back it
                if sure
                else f" (no interval: {e.early.n_units} layer{'' if e.early.n_units == 1 else 's'})"
            ),
        )
    else:  # nothing settled: 0% throughout, drawn over the series' own tokens (the axis does not collapse)
        ax.step([0, e.final_tokens], [0, 0], where="post", color="C0", linewidth=1.6)
    ax.axvline(e.early_tokens, color="C3", linestyle="--", linewidth=1)
    start = [] if settled.size else [0]  # the flat line's start: training's
    set_tokens_axis(ax, np.unique(np.concatenate([start, settled, [e.early_tokens, e.final_tokens]])))
    ax.set_ylim(-2, 102)
    ax.set_ylabel(f"% of the {len(e.heads)} heads that settled\n({e.n_censored} more right-censored)")
    ax.grid(alpha=0.3)
    if settled.size:
        fig.legend(
            *ax.get_legend_handles_labels(), loc="outside lower center", ncols=1, fontsize=8, frameon=False
        )  # outside the curve
    else:
        ax.text(0.5, 0.5, no_settled_text(e), transform=ax.transAxes, ha="center")
    ax.set_title("Emergence: when heads settled into dormancy")
    return fig


def no_settled_text(e) -> str:
    """The emergence panel's words when no head settled: what holds at the last checkpoint, which may well hold
    dormant heads that have not settled (dormant at >= e.stable of the later checkpoints) yet."""
    k = round(e.pct_dormant_last * e.n_heads / 100)
    return f"no head settled dormant; {k} of {e.n_heads} dormant at the last checkpoint"


def draw_confident_transitions(t, score_fn: str) -> Figure:
    """findings.dynamics.Transitions: per interval, the confident transitions and the others (stacked bars)."""
    x = np.arange(len(t.interval_tokens))
    fig = Figure(figsize=(min(max(7.5, 5 + 0.08 * len(x)), 14), 4), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(
        x,
        t.interval_confident,
        color="#1f3b63",
        label=f"confident: between opposite confident states ({t.method.upper()} q <= {t.fdr:g} over heads)",
    )
    ax.bar(x, t.interval_other, bottom=t.interval_confident, color="#cfe1f2", label="other mask changes")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("mask changes into the checkpoint")
    if len(x):
        column_ticks(ax, t.interval_tokens)
    ax.set_xlabel("interval ending at checkpoint (training tokens)")
    fig.legend(
        *ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8, frameon=False
    )  # outside the bars
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Transitions under {score_fn}: {t.n_confident} of {t.n_transitions} mask changes confident")
    return fig


def draw_role_shares(d) -> Figure:
    """Head roles through training (`figure_data.RoleShareData`): the % of heads in each role at each checkpoint,
    and the % of each layer's heads in each role at the last checkpoint."""
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    over, layers = fig.subplots(1, 2, width_ratios=[2.2, 1])
    marker = "o" if len(d.tokens) <= 40 else None
    for role, share in zip(d.roles, d.shares):
        style = {"color": "0.55", "linestyle": "--"} if role == "unclassified" else {}
        over.plot(d.tokens, share, marker=marker, markersize=3, linewidth=1.4, label=role, **style)
    over.set_ylim(-2, 102)
    over.set_ylabel("% of heads")
    over.grid(alpha=0.3)
    over.legend(loc="upper left", fontsize=8, frameon=False)
    set_tokens_axis(over, d.tokens)
    bottom = np.zeros(d.last_layers.shape[1])
    for role, share in zip(d.roles, d.last_layers):
        colour = {"color": "0.8"} if role == "unclassified" else {}
        layers.bar(np.arange(len(bottom)), share, bottom=bottom, label=role, **colour)
        bottom += share
    layers.set_xlabel(f"layer (at {d.last_revision})")
    layers.set_ylabel("% of the layer's heads")
    layers.xaxis.set_major_locator(MaxNLocator(integer=True))
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
