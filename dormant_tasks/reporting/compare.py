"""Comparing series side by side (`dormant compare`): dormancy across model sizes and families, from the store.

Each series is read as its report reads it (`series_data.load_series`, through `SeriesView`) and its findings are its
own `dormant findings` (`findings.dynamics.series_findings`), so every number here equals the one the series'
own views give. What is compared, per score function:

- % of heads dormant against training tokens and against the fraction of each series' own tokens, one line
  per series, a point at every checkpoint measured (nothing resampled or interpolated);
- % of each layer's heads dormant against relative depth ((layer + 1/2) / number of layers: the middle of
  the layer's span, so that the first and last layers of a 3-layer and a 32-layer model sit alike), at matched
  fractions of training: per series its measured checkpoint nearest to each fraction (named in the figure);
- the findings of each series in one table, and differences between series only where a test means something
  (`differences`: Newcombe's interval for a difference of two proportions, heads as the trials, as the
  findings' Wilson intervals; no test for transition counts, which depend on the checkpoint cadence, nor for a
  function whose tau is a per-series quantile);
- the shapes, cadences, taus and calibration sets, with a line wherever they limit the comparison
  (`comparison_notes`). Series on different calibration sets are compared on a set they all share (the figures;
  the findings stay each series' own, on its primary set), and refused, with the fix, when they share none.

Token counts are counted along each checkpoint's path (`findings.path_tokens`, as the findings count them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.errors import ConfigError, ReportError
from dormant_tasks.findings import QUANTITIES, Findings, path_tokens, series_findings
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting.figure_data import dormant_percent, layer_counts
from dormant_tasks.reporting.series_data import ReportSeries, load_series, resolve_model_id
from dormant_tasks.statistics import Z95, Estimate, Share
from dormant_tasks.tracking import SeriesView, predecessors, stored_series

FRACTIONS = (0.1, 0.25, 0.5, 1.0)  # of each series' training tokens: the depth profile's matched points
COMPARISON_FORMATS = ("markdown", "csv")


@dataclass(frozen=True)
class Member:
    """One compared series."""

    series: ReportSeries  # on the compared calibration set
    tokens: np.ndarray  # int64 [checkpoint]: tokens along each checkpoint's path (`findings.path_tokens`)
    calibration_ids: list[str]  # every set of the series, its primary one first
    findings: dict[str, Findings]  # score_fn -> the series' own findings (its primary set, as `dormant findings`)

    @property
    def model_id(self) -> str:
        return self.series.model_id

    @property
    def fraction(self) -> np.ndarray:
        """float64 [checkpoint]: tokens as a fraction of the series' last checkpoint's (NaN: no token counts)."""
        last = float(self.tokens[-1])
        return self.tokens / last if last > 0 else np.full(len(self.tokens), np.nan)


@dataclass(frozen=True)
class Comparison:
    members: list[Member]
    score_fns: tuple[str, ...]
    calibration_id: str  # the set the figures compare (one every series has)
    notes: list[str]  # where the series differ in a way that limits the comparison


def load_comparison(store, model_ids: list[str], score_fns: list[str] | None = None) -> Comparison:
    """The compared series (two or more, as the store names them, or their sources' names), read from the store."""
    root = Path(store)
    stored_series(root)  # StoreError first when it is not a store, whatever the --model count
    ids = list(dict.fromkeys(resolve_model_id(root, m) for m in model_ids))
    if len(ids) < 2:
        raise ConfigError(
            f"--model: a comparison needs two series or more, got {len(ids)} ({', '.join(ids)}); "
            "repeat --model, e.g. --model A --model B"
        )
    sets = {m: SeriesView.calibration_ids(root, m) for m in ids}
    missing = [m for m in ids if not sets[m]]
    if missing:
        raise ReportError(
            f"{missing[0]} has no tracked checkpoints in the store; run `dormant track --model {missing[0]}` first"
        )
    cal = compared_set(sets)
    series = [load_series(root, m, calibration_id=cal) for m in ids]
    fns = _score_fns(series, score_fns)
    members = [
        Member(s, series_tokens(s), sets[s.model_id], {fn: series_findings(root, s.model_id, fn) for fn in fns})
        for s in series
    ]
    return Comparison(members, fns, cal, comparison_notes(members, fns, cal))


def compared_set(sets: dict[str, list[str]]) -> str:
    """The calibration set the figures compare: the series' common primary set, else the first set (in the first
    series' order) that every series has; ReportError naming each series' sets and the fix when none is shared."""
    ids = list(sets)
    primaries = {s[0] for s in sets.values()}
    if len(primaries) == 1:
        return next(iter(primaries))
    shared = [c for c in sets[ids[0]] if all(c in sets[m] for m in ids[1:])]
    if shared:
        return shared[0]
    listed = "; ".join(f"{m}: {', '.join(s)}" for m, s in sets.items())
    raise ReportError(
        f"the series share no calibration set ({listed}), so their masks do not compare; track one on the "
        f"other's set, e.g. `dormant track --model {ids[1]} --calibration <its own sets> --calibration <the set "
        f"{ids[0]} was tracked on, the same texts and --limit> --retau` (a stored series takes a new set only with "
        "--retau), then compare again"
    )


def series_tokens(series: ReportSeries) -> np.ndarray:
    """int64 [checkpoint]: training tokens along each checkpoint's path, as the findings count them."""
    stage = np.array([c["stage"] for c in series.checkpoints], dtype=np.int64)
    ingredient = np.array([c.get("ingredient") or 0 for c in series.checkpoints], dtype=np.int64)
    return path_tokens(series.tokens, stage, predecessors(stage, ingredient))


def _score_fns(series: list[ReportSeries], asked: list[str] | None) -> tuple[str, ...]:
    """The functions compared: those asked (each tracked by every series), else the primary one (ahon_ln when
    every series tracks it, else the first function every series tracks)."""
    if asked:
        for s in series:
            for fn in asked:
                s.fn_index(fn)  # an unknown or untracked function: one line naming the series' own
        return tuple(dict.fromkeys(asked))
    common = [f for f in series[0].score_fns if all(f in s.score_fns for s in series[1:])]
    if not common:
        tracked = "; ".join(f"{s.model_id}: {', '.join(s.score_fns)}" for s in series)
        raise ReportError(f"the series track no score function in common ({tracked}); track one on both")
    return (DEFAULT_FN,) if DEFAULT_FN in common else (common[0],)


# ------------------------------------------------------------------------------ what limits the comparison


def comparison_notes(members: list[Member], score_fns: tuple[str, ...], cal: str) -> list[str]:
    """One line per way the series differ that limits the comparison (none when they differ in none)."""
    notes = []
    if any(m.calibration_ids != members[0].calibration_ids for m in members[1:]):
        sets = "; ".join(f"{m.model_id}: {', '.join(m.calibration_ids)}" for m in members)
        other = [m.model_id for m in members if m.calibration_ids[0] != cal]
        notes.append(
            f"Calibration sets differ ({sets}). The figures compare the set every series has, {cal}"
            + (
                f"; the findings of {', '.join(other)} are each on its primary set, as `dormant findings` gives them"
                if other
                else ""
            )
            + "; input dependence (finding 3) is compared only between series tracked on the same sets."
        )
    for fn in score_fns:
        taus = [m.series.taus[fn] for m in members]
        sources = [series_tau_source(m.series, fn) for m in members]
        if any(s["source"] == "quantile" for s in sources):
            listed = "; ".join(f"{m.model_id}: {t[1]} {t[0]:g}" for m, t in zip(members, taus))
            raw = "" if fn.endswith(("_ln", "_hn")) else ", in raw units whose scale differs between models"
            notes.append(
                f"{fn}: its tau is a per-series quantile of each series' own reference checkpoint's scores{raw} "
                f"({listed}): each series' % dormant sits near that quantile at its reference by construction, so "
                f"{fn}'s levels do not compare across series and no difference is tested; compare the curves' shapes, "
                "or an _ln function with a fixed tau."
            )
        elif len({t for t in taus}) > 1:
            listed = "; ".join(f"{m.model_id}: score {t[1]} {t[0]:g}" for m, t in zip(members, taus))
            notes.append(
                f"{fn}: the series' fixed taus differ ({listed}): the same function marks heads at different "
                f"thresholds; track them with one `--tau {fn}=VALUE --retau` to compare levels."
            )
    shapes = {(m.series.n_layers, m.series.n_heads) for m in members}
    if len(shapes) > 1:
        listed = "; ".join(
            f"{m.model_id}: {m.series.n_layers} × {m.series.n_heads} = {m.series.n_layers * m.series.n_heads} heads"
            for m in members
        )
        notes.append(
            f"Different architectures ({listed}): the figures put them on one axis as % of heads and relative depth "
            "((layer + ½) / number of layers); one head is a different share of each model."
        )
    spans = {tuple(m.tokens.tolist()) for m in members}
    if len(spans) > 1:
        listed = "; ".join(
            f"{m.model_id}: {len(m.tokens)} checkpoints, {fg.format_tokens(m.tokens[0])} to "
            f"{fg.format_tokens(m.tokens[-1])} tokens"
            for m in members
        )
        notes.append(
            f"Different cadences ({listed}): every point is a measured checkpoint (nothing interpolated); the depth "
            "profile takes each series' measured checkpoint nearest to each fraction of its training (named there); "
            "transition counts depend on how often a series is measured, so they are not tested across series."
        )
    no_tokens = [m.model_id for m in members if m.tokens[-1] <= 0]
    if no_tokens:
        notes.append(
            f"{', '.join(no_tokens)}: its checkpoints carry no token counts, so it is left out of the token figures; "
            "track it again with --tokens-per-step N."
        )
    return notes


def series_tau_source(series: ReportSeries, fn: str) -> dict:
    return next((r for r in series.tau_sources if r["score_fn"] == fn), {"source": "not recorded"})


# ------------------------------------------------------------------------------ figure data


@dataclass(frozen=True)
class Curve:
    model_id: str
    tokens: np.ndarray  # int64 [checkpoint]
    fraction: np.ndarray  # float64 [checkpoint]
    pct: np.ndarray  # float64 [checkpoint]: % of scored heads dormant


def percent_curves(c: Comparison, fn: str) -> list[Curve]:
    """Per series with token counts, its % of heads dormant under `fn` at every measured checkpoint."""
    out = []
    for m in c.members:
        if m.tokens[-1] > 0:
            pct = dormant_percent(m.series)[m.series.fn_index(fn)]  # [checkpoint]
            out.append(Curve(m.model_id, m.tokens, m.fraction, pct))
    return out


@dataclass(frozen=True)
class DepthProfile:
    model_id: str
    revision: str  # the measured checkpoint nearest to the fraction
    fraction: float  # its own fraction of the series' tokens
    depth: np.ndarray  # float64 [layer]: (layer + 1/2) / n_layers, so first and last layers sit alike in any depth
    pct: np.ndarray  # float64 [layer]: % of the layer's heads dormant


def nearest_checkpoint(fraction: np.ndarray, target: float) -> int:
    """The checkpoint whose fraction of training is nearest to `target` (the earlier one on a tie)."""
    return int(np.argmin(np.abs(fraction - target)))


def depth_profiles(c: Comparison, fn: str, target: float) -> list[DepthProfile]:
    """Per series with token counts, % of each layer's heads dormant at its checkpoint nearest to `target`."""
    out = []
    for m in c.members:
        if m.tokens[-1] <= 0:
            continue
        k = nearest_checkpoint(m.fraction, target)
        counts = layer_counts(m.series, fn)[:, k]  # [layer]
        n = m.series.n_layers
        depth = (np.arange(n) + 0.5) / n  # [layer]: the middle of each layer's span of the depth
        out.append(
            DepthProfile(
                m.model_id, m.series.revisions[k], float(m.fraction[k]), depth, 100 * counts / m.series.n_heads
            )
        )
    return out


# ------------------------------------------------------------------------------ differences


@dataclass(frozen=True)
class Difference:
    finding: str
    model_id: str
    reference: str  # the series it is compared with (the first one)
    estimate: Estimate | None  # this series' proportion minus the reference's, in percentage points
    test: str  # the test made, or why none is


def newcombe_interval(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float, float]:
    """p1 - p2 and its 95% interval by Newcombe's hybrid score method (1998, method 10): each proportion's
    Wilson interval combined; defined for any counts, 0 and n included (n1, n2 > 0)."""
    from dormant_tasks.statistics import wilson_interval

    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = (float(x) for x in wilson_interval(k1, n1, z))
    l2, u2 = (float(x) for x in wilson_interval(k2, n2, z))
    d = p1 - p2
    return d, d - float(np.hypot(p1 - l1, u2 - p2)), d + float(np.hypot(u1 - p1, p2 - l2))


POINTS = " points"  # the unit of a difference of two proportions, in %
NEWCOMBE = "Newcombe's interval for a difference of two proportions, heads as the trials"


def input_dependence_untested(name_a: str, a, name_b: str, b, fn: str) -> str | None:
    """Why finding 3 is not tested between two series (None: it is), naming which case holds: a series on fewer
    than two sets, sets that differ (each named), or sets alike but no checkpoint scored under `fn` on two of them.
    Only sets that differ are "not the same calibration sets"."""
    for name, d in ((name_a, a), (name_b, b)):
        if len(d.calibration_ids) < 2:
            return f"no test: {name} is tracked on {len(d.calibration_ids)} calibration set, input dependence needs 2"
    if set(a.calibration_ids) != set(b.calibration_ids):
        only_a = sorted(set(a.calibration_ids) - set(b.calibration_ids))
        only_b = sorted(set(b.calibration_ids) - set(a.calibration_ids))
        return (
            "no test: measured on different calibration sets"
            + (f" ({name_a} alone: {', '.join(only_a)}" if only_a else " (")
            + ("; " if only_a and only_b else "")
            + (f"{name_b} alone: {', '.join(only_b)})" if only_b else ")")
        )
    for name, d in ((name_a, a), (name_b, b)):
        if not d.measured:
            return f"no test: no checkpoint of {name} is scored under {fn} on two of its calibration sets"
    return None


def differences(c: Comparison, fn: str) -> list[Difference]:
    """Each series against the first, per finding, where a test is meaningful; otherwise the reason none is made."""
    ref = c.members[0]
    quantile = any(series_tau_source(m.series, fn)["source"] == "quantile" for m in c.members)
    out = []
    for m in c.members[1:]:
        a, b = m.findings[fn], ref.findings[fn]
        pairs: list[tuple[str, Share | None, Share | None, str | None]] = [
            (
                QUANTITIES["emergence.n_settled"],
                Share.of(len(a.emergence.heads), a.emergence.n_heads),
                Share.of(len(b.emergence.heads), b.emergence.n_heads),
                None,
            ),
            (
                QUANTITIES["emergence.early"],
                a.emergence.early,
                b.emergence.early,
                None,
            ),
            (
                QUANTITIES["input_dependence.all_of_any"],
                a.input_dependence.all_of_any,
                b.input_dependence.all_of_any,
                input_dependence_untested(m.model_id, a.input_dependence, ref.model_id, b.input_dependence, fn),
            ),
        ]
        for finding, x, y, why in pairs:
            if why is None and quantile:
                why = f"no test: {fn}'s tau is a per-series quantile (raw units), so its levels do not compare"
            if why is None and (x is None or y is None or not x.n or not y.n):
                why = "no test: undefined in one of the series (0 of 0)"
            if why is not None:
                out.append(Difference(finding, m.model_id, ref.model_id, None, why))
                continue
            assert x is not None and y is not None
            d, low, high = newcombe_interval(x.k, x.n, y.k, y.n)
            verdict = "differs (the interval excludes 0)" if low > 0 or high < 0 else "no difference shown"
            out.append(
                Difference(
                    finding,
                    m.model_id,
                    ref.model_id,
                    Estimate(100 * d, 100 * low, 100 * high, NEWCOMBE, POINTS, min(x.n, y.n)),  # few: marked
                    f"{NEWCOMBE}: {verdict}",
                )
            )
        out.append(
            Difference(
                "transitions",
                m.model_id,
                ref.model_id,
                None,
                "no test: transition counts depend on how often each series is measured (its cadence)",
            )
        )
    return out
