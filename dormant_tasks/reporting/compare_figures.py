"""Drawing only: the comparison's figures (`dormant compare`; their data: `compare.py`): each series' dormant
share against training tokens or the fraction of its training, and the dormant share by relative depth at matched
fractions of training. Built on `figures.py`'s tokens axis, like every figure (no pyplot)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dormant_tasks.reporting.figures import set_tokens_axis


def _percent_of_training(x: float) -> str:
    return f"{100 * x:.3g}%"


def compare_x(curves, by_fraction: bool = False) -> np.ndarray:
    """Every x of `draw_compare_percent`'s curves (tokens, or fractions of each series' training): its axis'."""
    return np.concatenate([c.fraction if by_fraction else c.tokens for c in curves]) if curves else np.zeros(1)


def draw_compare_percent(curves, score_fn: str, by_fraction: bool = False) -> Figure:
    """curves: compare.Curve per series (its measured checkpoints only); x: training tokens or, `by_fraction`,
    the fraction of each series' own tokens. One colour and marker per series, every point a checkpoint."""
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for k, c in enumerate(curves):
        x = c.fraction if by_fraction else c.tokens
        ax.plot(
            x,
            c.pct,
            marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
            markersize=4,
            linewidth=1.4,
            color=f"C{k % 10}",
            label=f"{c.model_id} ({len(x)} checkpoints)",
        )
    values = compare_x(curves, by_fraction)
    if by_fraction:
        set_tokens_axis(ax, values, _percent_of_training, "fraction of the series' training tokens")
    else:
        set_tokens_axis(ax, values)
    ax.set_ylabel("% of heads dormant")
    high = max(ax.get_ylim()[1], 1.0)
    ax.set_ylim(-0.03 * high, high)  # below 0 a little: a point at 0% stays whole
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    what = "the fraction of each series' training" if by_fraction else "training tokens"
    ax.set_title(f"Dormant heads under {score_fn} against {what}")
    return fig


SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def draw_depth_profiles(panels, score_fn: str) -> Figure:
    """panels: [(target fraction, [compare.DepthProfile per series])]: one panel per fraction, x relative depth
    (the middle of each layer's span, (layer + 1/2) / number of layers), y % of the layer's heads dormant; under
    each panel, the checkpoint each series is shown at, with its own fraction of training."""
    fig = Figure(figsize=(min(3.4 * len(panels) + 1.5, 15), 5.2), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    top = max([5.0] + [float(np.nanmax(p.pct)) for _, profiles in panels for p in profiles if p.pct.size])
    n_series = max([len(profiles) for _, profiles in panels] + [1])
    spacing = min([1.0] + [float(np.diff(p.depth).min()) for _, ps in panels for p in ps if p.depth.size > 1])
    for ax, (target, profiles) in zip(axes, panels):
        for k, p in enumerate(profiles):
            # series k shifted sideways by its own small step: two series' equal values at the same depth (a
            # 4-layer model's middles are 1/8, 3/8, ...) sit side by side instead of on one another
            shift = (k - (n_series - 1) / 2) * 0.5 * spacing / n_series
            ax.plot(
                p.depth + shift,
                p.pct,
                marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                markersize=5,
                markeredgecolor="white",
                markeredgewidth=0.6,
                linewidth=1.2,
                alpha=0.85,
                color=f"C{k % 10}",
                label=f"{p.revision} ({_percent_of_training(p.fraction)})",
            )
        ax.set_xlim(0, 1)
        high = min(100.0, top * 1.15) if top < 100 else 103.0
        ax.set_ylim(-0.03 * high, high)  # below 0 a little: markers at 0 stay whole
        ax.set_xlabel("relative depth ((layer + ½) / layers)")
        ax.set_title(f"at {_percent_of_training(target)} of training", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(
            fontsize=6.5,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            frameon=False,
            title="shown at (its fraction of training)",
            title_fontsize=6.5,
        )
    axes[0].set_ylabel("% of the layer's heads dormant")
    names = [p.model_id for p in panels[0][1]] if panels else []
    handles = [
        Line2D([], [], color=f"C{k % 10}", marker=SERIES_MARKERS[k % len(SERIES_MARKERS)], label=n)
        for k, n in enumerate(names)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(names), 4), fontsize=8, frameon=False)
    fig.suptitle(f"Dormant heads by relative depth under {score_fn}, at matched fractions of training")
    return fig
