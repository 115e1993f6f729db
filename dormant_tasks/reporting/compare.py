"""Comparing series side by side (`dormant compare`): dormancy across model sizes and families, from the store.

Each series is read as its report reads it (`series_data.load_series`, through `SeriesView`) and its findings are its
own `dormant findings` (`tracking.findings.series_findings`), so every number here equals the one the series'
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

import functools
import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dormant_tasks.errors import ConfigError, ReportError
from dormant_tasks.names import series_slug
from dormant_tasks.outputs import Owner, check_folder, publish_folder, staging_folder
from dormant_tasks.paths import default_reports_dir
from dormant_tasks.reporting import comparisons, page
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting.figure_data import dormant_percent, layer_counts
from dormant_tasks.reporting.series_data import DEFAULT_SCORE_FN, Series, load_series, resolve_model_id
from dormant_tasks.tracking import (
    EARLY,
    Z95,
    Estimate,
    Findings,
    SeriesView,
    Share,
    path_tokens,
    predecessors,
    series_findings,
    stored_series,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FRACTIONS = (0.1, 0.25, 0.5, 1.0)  # of each series' training tokens: the depth profile's matched points
FORMATS = ("markdown", "csv")


@dataclass(frozen=True)
class Member:
    """One compared series."""

    series: Series  # on the compared calibration set
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
        raise ReportError(f"{missing[0]} has no tracked checkpoints in the store; run `dormant track` for it first")
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
        f"other's set, e.g. `dormant track --model {ids[1]} --calibration <the set {ids[0]} was tracked on, the "
        "same texts and --limit>`, then compare again"
    )


def series_tokens(series: Series) -> np.ndarray:
    """int64 [checkpoint]: training tokens along each checkpoint's path, as the findings count them."""
    stage = np.array([c["stage"] for c in series.checkpoints], dtype=np.int64)
    ingredient = np.array([c.get("ingredient") or 0 for c in series.checkpoints], dtype=np.int64)
    return path_tokens(series.tokens, stage, predecessors(stage, ingredient))


def _score_fns(series: list[Series], asked: list[str] | None) -> tuple[str, ...]:
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
    return (DEFAULT_SCORE_FN,) if DEFAULT_SCORE_FN in common else (common[0],)


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
        sources = [_tau_source(m.series, fn) for m in members]
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


def _tau_source(series: Series, fn: str) -> dict:
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


# ------------------------------------------------------------------------------ findings, one table


def _stage_rates(f: Findings) -> str:
    parts = [
        f"stage {r.stage}: {cell_text(r.per_billion)}" if r.tokens > 0 else f"stage {r.stage}: no token span"
        for r in f.transitions.stages
    ]
    return "; ".join(parts) or "a single checkpoint"


def _input_last(f: Findings) -> Any:
    return f.input_dependence.last if f.input_dependence.measured else "not measured (one calibration set)"


def _input_floor(f: Findings) -> Any:
    floor = f.input_dependence.noise_floor
    return floor.difference if floor is not None else f.input_dependence.noise_floor_note or "not measured"


def _input_all(f: Findings) -> Any:
    return f.input_dependence.all_of_any if f.input_dependence.measured else ""


# The findings columns: (header, the value from a series' Findings). A new field of the findings is one line here;
# `cell_text` / `cell_fields` render every value, one with an interval (a Share, an Estimate, any object with
# `value`, `low` and `high`) as such.
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
    (f"dormant for good by {int(100 * EARLY)}% of tokens", lambda f: f.emergence.early),
    ("first dormant, median (fraction of tokens)", lambda f: f.emergence.first_fraction),
    ("settled dormant, median (fraction of tokens)", lambda f: f.emergence.settled_fraction),
    (
        "transitions (fell / woke)",
        lambda f: f"{f.transitions.n_transitions} ({f.transitions.fell_dormant} / {f.transitions.woke})",
    ),
    ("confident", lambda f: f.transitions.n_confident),
    ("blips", lambda f: f.transitions.n_blips),
    ("confident per billion tokens", _stage_rates),
    ("heads changing state at least once", lambda f: f.transitions.ever_changed),
    ("heads changing state more than once", lambda f: f.transitions.more_than_once),
    ("input dependence: Jaccard at the last shared checkpoint", _input_last),
    ("dormant on every set, of those on any", _input_all),
    ("input dependence: across - within (noise floor)", _input_floor),
]


def _interval(v: Any) -> bool:
    """A value with a 95% interval: a Share, an Estimate, or any findings field with `value`, `low` and `high`."""
    return all(hasattr(v, a) for a in ("value", "low", "high"))


def cell_text(v: Any) -> str:
    """One findings value as text: a share (k, n) as "k of n (p%, 95% CI a–b%)", another value with an interval
    as "v (95% CI a to b)" (a difference in points with one decimal and its sign, else three significant digits)."""
    if v is None:
        return ""
    if _interval(v) and hasattr(v, "n"):
        if not v.n:
            return f"undefined ({v.k} of {v.n})"
        return f"{v.k} of {v.n} ({100 * v.value:.1f}%, 95% CI {100 * v.low:.1f}–{100 * v.high:.1f}%)"
    if _interval(v):
        if v.value != v.value:  # NaN
            return "undefined"
        unit = getattr(v, "unit", "")
        sign, fmt = ("+", ".1f") if unit == POINTS else ("", ".3g")  # a difference shows its sign
        return f"{v.value:{sign}{fmt}}{unit} (95% CI {v.low:{fmt}} to {v.high:{fmt}})".replace("-", "−")
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
    from dormant_tasks.tracking import wilson_interval

    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = (float(x) for x in wilson_interval(k1, n1, z))
    l2, u2 = (float(x) for x in wilson_interval(k2, n2, z))
    d = p1 - p2
    return d, d - float(np.hypot(p1 - l1, u2 - p2)), d + float(np.hypot(u1 - p1, p2 - l2))


POINTS = " points"  # the unit of a difference of two proportions, in %
NEWCOMBE = "Newcombe's interval for a difference of two proportions, heads as the trials"


def differences(c: Comparison, fn: str) -> list[Difference]:
    """Each series against the first, per finding, where a test is meaningful; otherwise the reason none is made."""
    ref = c.members[0]
    quantile = any(_tau_source(m.series, fn)["source"] == "quantile" for m in c.members)
    out = []
    for m in c.members[1:]:
        a, b = m.findings[fn], ref.findings[fn]
        pairs: list[tuple[str, Share | None, Share | None, str | None]] = [
            (
                "heads dormant at the last checkpoint",
                Share.of(len(a.emergence.heads), a.emergence.n_heads),
                Share.of(len(b.emergence.heads), b.emergence.n_heads),
                None,
            ),
            (
                f"of those, dormant for good by {int(100 * EARLY)}% of tokens",
                a.emergence.early,
                b.emergence.early,
                None,
            ),
            (
                "input dependence: heads dormant on every set, of those dormant on any",
                a.input_dependence.all_of_any,
                b.input_dependence.all_of_any,
                None
                if a.input_dependence.measured
                and b.input_dependence.measured
                and set(a.input_dependence.calibration_ids) == set(b.input_dependence.calibration_ids)
                else "no test: not measured on the same calibration sets in both series",
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
                    Estimate(100 * d, 100 * low, 100 * high, NEWCOMBE, POINTS),
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


# ------------------------------------------------------------------------------ tables (stdout, summary.md)


def settings_rows(c: Comparison) -> list[list[str]]:
    """Per series: shape, checkpoints, tokens, the token gaps between checkpoints, calibration sets, taus."""
    rows = []
    for m in c.members:
        s = m.series
        gaps = np.diff(m.tokens)
        taus = "; ".join(
            f"{fn}: score {s.taus[fn][1]} {s.taus[fn][0]:g} ({_tau_label(_tau_source(s, fn))})" for fn in c.score_fns
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
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
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
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines)


def comparison_markdown(c: Comparison) -> str:
    """summary.md of a comparison: the settings, the lines that limit it, the findings and the differences."""
    lines = [f"# Dormant heads compared: {' vs '.join(m.model_id for m in c.members)}", ""]
    lines += ["| " + " | ".join(SETTINGS_HEADER) + " |", "|" + "---|" * len(SETTINGS_HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in settings_rows(c)]
    if c.notes:
        lines += ["", "What limits the comparison:", ""] + [f"- {n}" for n in c.notes]
    lines += ["", "## Findings", "", comparison_table(c)]
    for fn in c.score_fns:
        lines += ["", f"## Differences under {fn} (against {c.members[0].model_id})", ""]
        lines += ["| finding | series | difference | test |", "|---|---|---:|---|"]
        for d in differences(c, fn):
            lines.append(f"| {d.finding} | {d.model_id} | {cell_text(d.estimate)} | {d.test} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ rendering


def comparison_folder(model_ids: list[str]) -> str:
    """The default folder name of a comparison: compare-A-vs-B (a long list: the first, a count and a digest)."""
    slugs = [series_slug(m) for m in model_ids]
    name = "compare-" + "-vs-".join(slugs)
    if len(name) <= 120:
        return name
    digest = hashlib.sha256("\0".join(model_ids).encode()).hexdigest()[:8]
    return f"compare-{slugs[0]}-and-{len(slugs) - 1}-more-{digest}"


@dataclass(frozen=True)
class CompareResult:
    comparison: Comparison
    out_dir: Path
    index_html: Path
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)
    summary_md: Path
    index: Path  # the reports folder's comparisons.json, which the series' reports read


CAPTIONS = {
    "tokens": "% of heads dormant under {fn} against training tokens (log axis), one line per series, a point at "
    "every checkpoint measured.",
    "fraction": "% of heads dormant under {fn} against the fraction of each series' own training tokens (log axis; "
    "1 = its last checkpoint), a point at every checkpoint measured.",
    "depth": "% of each layer's heads dormant under {fn} against relative depth ((layer + ½) / number of layers), at "
    "matched fractions of training: per series its measured checkpoint nearest to each fraction, named in the "
    "legend with its own fraction.",
}


def comparison_plots(c: Comparison) -> list[tuple[str, str, str, Callable[[], Figure]]]:
    """(score_fn, kind, file name, draw) of every figure of the comparison."""
    plots: list[tuple[str, str, str, Callable[[], Figure]]] = []
    for fn in c.score_fns:
        curves = percent_curves(c, fn)
        panels = [(t, depth_profiles(c, fn, t)) for t in FRACTIONS]
        plots += [
            (fn, "tokens", f"tokens_{fn}", functools.partial(fg.draw_compare_percent, curves, fn)),
            (fn, "fraction", f"fraction_{fn}", functools.partial(fg.draw_compare_percent, curves, fn, True)),
            (fn, "depth", f"depth_{fn}", functools.partial(fg.draw_depth_profiles, panels, fn)),
        ]
    return plots


def render_comparison(store, model_ids: list[str], out_dir=None, score_fns: list[str] | None = None) -> CompareResult:
    """Compare the series `model_ids` into `out_dir` (default: <reports dir>/compare-A-vs-B/): index.html, every
    figure as PNG and SVG, summary.md; published only when complete, then recorded in the parent folder's index
    (`comparisons.json`) so that the series' reports link to it."""
    c = load_comparison(store, model_ids, score_fns)
    ids = [m.model_id for m in c.members]
    out = Path(out_dir) if out_dir is not None else default_reports_dir() / comparison_folder(ids)
    owner = Owner.of("comparison", store, " vs ".join(ids))
    check_folder(out, owner)  # before the figures are drawn: nothing the tool did not write is replaced
    plots = comparison_plots(c)
    tmp = staging_folder(out)
    try:
        (tmp / "figures").mkdir()
        drawn = {name: fg.save_figure(draw(), tmp / "figures", name) for _, _, name, draw in plots}
        markdown = comparison_markdown(c)
        (tmp / "summary.md").write_text(markdown, encoding="utf-8")
        (tmp / "index.html").write_text(page.compare_html(page_context(c, plots, out)), encoding="utf-8")
        publish_folder(tmp, out, owner)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    index = comparisons.record_comparison(out, ids)
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return CompareResult(c, out, out / "index.html", figures, out / "summary.md", index)


def page_context(c: Comparison, plots, out: Path) -> dict:
    """The template's context: plain strings and tables (header + rows), escaped by the template."""
    headers = [h for h, _ in FINDINGS_COLUMNS]
    series = []
    for m in c.members:
        report = out.parent / series_slug(m.model_id) / "index.html"  # the series' report, where `report` puts it
        series.append(
            {"model_id": m.model_id, "report": f"../{series_slug(m.model_id)}/index.html" if report.is_file() else None}
        )
    functions = []
    for fn in c.score_fns:
        figures = [{"name": name, "caption": CAPTIONS[kind].format(fn=fn)} for f, kind, name, _ in plots if f == fn]
        rows = findings_rows(c, fn)
        functions.append(
            {
                "score_fn": fn,
                "figures": figures,
                "findings": page._table(  # one column per series: a page reads down a finding, across series
                    ["finding", *(m.model_id for m in c.members)],
                    [[h, *(cell_text(values[i]) for _, values in rows)] for i, h in enumerate(headers)],
                ),
                "differences": page._table(
                    ["finding", "series", f"difference from {c.members[0].model_id}", "test"],
                    [[d.finding, d.model_id, cell_text(d.estimate), d.test] for d in differences(c, fn)],
                ),
            }
        )
    return {
        "title": " vs ".join(m.model_id for m in c.members),
        "series": series,
        "calibration_id": c.calibration_id,
        "settings": page._table(SETTINGS_HEADER, settings_rows(c)),
        "notes": c.notes,
        "functions": functions,
    }
