"""The evolution report of a series: how dormant heads appear, disappear and move (figures + HTML).

Each figure's DATA is computed here by a small function on a `Series` (checked exactly by tests);
`figures.py` only draws (the matplotlib figures and the HTML page). `render_report` writes index.html
(opens offline: no CDN, images referenced relatively), every figure as PNG (slides) and SVG (papers),
and summary.md into a temp folder that replaces the destination only when complete, so a failed
render never leaves a partial report. Score bands use head_scores' per-head means, not input_scores.

The series is what the store says: head states come from `head_scores.dormant`, transitions from the
`transitions` table (so stage-2 ingredient branches keep the predecessors the tracker gave them).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import figures as fg
from .errors import ReportError, did_you_mean
from .evaluation import protocol_line
from .metric import normalised_auc, pct_zeroed_within_1pt
from .paths import default_reports_dir
from .score_functions import ALL_IDS, get_score_function
from .series import SeriesView
from .store import list_models, open_store, read_table, series_slug

DEFAULT_SCORE_FN = "ahon_ln"


@dataclass(frozen=True)
class Series:
    """One model's analysed checkpoints in series order, with every head's state per score function."""

    model_id: str
    checkpoints: list[dict]  # the `checkpoints` rows used, one per revision, in series order
    n_layers: int
    n_heads: int
    score_fns: tuple[str, ...]  # tracked functions, in the paper's order
    taus: dict[str, tuple[float, str]]  # score_fn -> (tau, direction)
    dormant: np.ndarray  # int8 [fn, layer*n_heads+head, checkpoint]: 1 dormant, 0 active, -1 not scored
    score: np.ndarray  # float64 [fn, layer*n_heads+head, checkpoint]: the mean score (NaN if not scored)
    marks: np.ndarray  # int8 [fn, layer*n_heads+head, checkpoint]: +1 fell dormant into it, -1 woke, 0 none
    tau_sources: list[dict]  # `taus` rows of the series' taus_id (may be empty)
    evaluations: list[dict]  # `evaluations` rows of the model (may be empty)

    @property
    def revisions(self) -> list[str]:
        return [c["revision"] for c in self.checkpoints]

    @property
    def tokens(self) -> np.ndarray:
        return np.array([c["tokens"] for c in self.checkpoints], dtype=np.int64)  # [checkpoint]

    def fn_index(self, score_fn: str) -> int:
        if score_fn not in self.score_fns:
            get_score_function(score_fn)  # an id that does not exist at all: ConfigError with did-you-mean
            raise ReportError(
                f"score function {score_fn!r} was not tracked for {self.model_id}; "
                f"choose from: {', '.join(self.score_fns)}"
            )
        return self.score_fns.index(score_fn)


def resolve_model_id(store, model_id: str | None) -> str:
    """The model to report on: the given one (must be in the store) or the store's only model."""
    models = list_models(open_store(store))
    if not models:
        raise ReportError(f"the store {store} holds no analysed checkpoints; run `dormant track` first")
    if model_id is None:
        if len(models) > 1:
            raise ReportError(f"the store holds {len(models)} models; pick one with --model: {', '.join(models)}")
        return models[0]
    if model_id not in models:
        raise ReportError(
            f"model {model_id!r} is not in the store{did_you_mean(model_id, models)}; it holds: {', '.join(models)}"
        )
    return model_id


def load_series(store, model_id: str) -> Series:
    """One model's current series (`SeriesView`); ReportError when the store cannot give a consistent one."""
    root = open_store(store)
    model_id = resolve_model_id(root, model_id)
    if not SeriesView.exists(root, model_id):
        raise ReportError(
            f"{model_id} has no tracked checkpoints in the store (evaluations only?); run `dormant track` for it"
        )
    view = SeriesView.open(root, model_id)
    checkpoints = list(view.checkpoints)
    if not checkpoints:
        raise ReportError(
            f"{model_id} has no checkpoints under its current taus {view.taus_id}"
            f"{f' ({view.n_stale} under older ones)' if view.n_stale else ''}; "
            "run `dormant track --retau` on the whole series"
        )
    n_layers = max(int(c["n_layers"]) for c in checkpoints)
    n_heads = max(int(c["n_heads"]) for c in checkpoints)
    revisions = pa.array(view.revisions, pa.string())

    hs = view.head_scores()
    if hs.num_rows == 0:
        raise ReportError(
            f"the store has checkpoints but no `head_scores` for {model_id} (calibration {view.calibration_id}, "
            f"taus {view.taus_id}); the store is incomplete: run `dormant track` for it again"
        )
    present = set(hs["score_fn"].unique().to_pylist())
    score_fns = tuple(f for f in ALL_IDS if f in present) + tuple(sorted(present - set(ALL_IDS)))
    col = pc.index_in(hs["revision"], value_set=revisions).to_numpy()  # [row]
    fn = pc.index_in(hs["score_fn"], value_set=pa.array(score_fns)).to_numpy()  # [row]
    head = hs["layer"].to_numpy().astype(np.int64) * n_heads + hs["head_index"].to_numpy()  # [row]
    shape = (len(score_fns), n_layers * n_heads, len(checkpoints))
    dormant = np.full(shape, -1, dtype=np.int8)  # [fn, head, checkpoint]
    score = np.full(shape, np.nan)  # [fn, head, checkpoint]
    dormant[fn, head, col] = hs["dormant"].to_numpy(zero_copy_only=False).astype(np.int8)
    score[fn, head, col] = hs["score"].to_numpy(zero_copy_only=False)
    taus = {f: (view.taus[f].value, str(view.taus[f].direction)) for f in score_fns}

    marks = _transition_marks(view.transitions(score_fns), revisions, score_fns, n_heads, shape)
    changes = (np.diff(dormant.astype(np.int16), axis=2) != 0) & (dormant[:, :, 1:] >= 0) & (dormant[:, :, :-1] >= 0)
    if not marks.any() and changes.any():
        raise ReportError(
            f"the `transitions` table has no rows for {model_id} although its head states change; "
            "run `dormant track` again to derive them"
        )
    tau_rows = [r for r in read_table(root, "taus", model_id).to_pylist() if r["taus_id"] == view.taus_id]
    evaluations = read_table(root, "evaluations", model_id).to_pylist()
    return Series(
        model_id, checkpoints, n_layers, n_heads, score_fns, taus, dormant, score, marks, tau_rows, evaluations
    )


def _transition_marks(tr: pa.Table, revisions, score_fns, n_heads, shape) -> np.ndarray:
    """+1 / -1 at (fn, head, checkpoint the change lands in) for the series' current transitions."""
    marks = np.zeros(shape, dtype=np.int8)  # [fn, head, checkpoint]
    if tr.num_rows == 0:
        return marks
    fn = pc.index_in(tr["score_fn"], value_set=pa.array(score_fns)).to_numpy()  # [row]
    col = pc.index_in(tr["to_revision"], value_set=revisions).to_numpy()  # [row]
    head = tr["layer"].to_numpy().astype(np.int64) * n_heads + tr["head_index"].to_numpy()  # [row]
    kind = np.where(pc.equal(tr["to_state"], "dormant").to_numpy(zero_copy_only=False), 1, -1).astype(np.int8)
    marks[fn, head, col] = kind
    return marks


# ---------------------------------------------------------------- figure data (checked exactly by tests)


@dataclass(frozen=True)
class RasterData:
    row_labels: list[str]  # "L{layer}.H{head}", grouped by layer
    columns: list[str]  # revisions in series order
    states: np.ndarray  # int8 [head, checkpoint]: 1 dormant, 0 active, -1 not scored
    marks: np.ndarray  # int8 [head, checkpoint]: +1 fell dormant here, -1 woke here, 0 no change


def raster_data(series: Series, score_fn: str) -> RasterData:
    i = series.fn_index(score_fn)
    labels = [f"L{layer}.H{head}" for layer in range(series.n_layers) for head in range(series.n_heads)]
    return RasterData(labels, series.revisions, series.dormant[i], series.marks[i])


def dormant_percent(series: Series) -> np.ndarray:
    """% of scored heads that are dormant: float64 [fn, checkpoint] (NaN where nothing was scored)."""
    scored = (series.dormant >= 0).sum(axis=1)  # [fn, checkpoint]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * (series.dormant == 1).sum(axis=1) / np.where(scored > 0, scored, np.nan)


def layer_counts(series: Series, score_fn: str) -> np.ndarray:
    """Number of dormant heads per layer: int64 [layer, checkpoint]."""
    states = series.dormant[series.fn_index(score_fn)]  # [head, checkpoint]
    return (states == 1).reshape(series.n_layers, series.n_heads, -1).sum(axis=1)


@dataclass(frozen=True)
class TransitionCounts:
    to_revisions: list[str]  # the later checkpoint of each interval (series order, first checkpoint excluded)
    fell: np.ndarray  # int64 [interval]: heads that fell dormant (active -> dormant)
    woke: np.ndarray  # int64 [interval]: heads that woke (dormant -> active)


def transition_counts(series: Series, score_fn: str) -> TransitionCounts:
    marks = series.marks[series.fn_index(score_fn)][:, 1:]  # [head, interval]
    return TransitionCounts(series.revisions[1:], (marks == 1).sum(axis=0), (marks == -1).sum(axis=0))


def score_bands(series: Series, score_fn: str) -> np.ndarray:
    """10th percentile, median and 90th percentile of the per-head mean scores: float64 [3, checkpoint]."""
    scores = series.score[series.fn_index(score_fn)]  # [head, checkpoint]
    out = np.full((3, scores.shape[1]), np.nan)
    ok = ~np.isnan(scores).all(axis=0)
    out[:, ok] = np.nanquantile(scores[:, ok], [0.1, 0.5, 0.9], axis=0)
    return out


def agreement_iou(series: Series, checkpoint: int = -1) -> np.ndarray:
    """IoU of the dormant head sets of every pair of functions at one checkpoint: float64 [fn, fn].

    NaN where both sets are empty (the overlap of two empty sets is undefined, not 1 or 0).
    """
    sets = (series.dormant[:, :, checkpoint] == 1).astype(np.int64)  # [fn, head]
    inter = sets @ sets.T  # [fn, fn]
    sizes = sets.sum(axis=1)  # [fn]
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), np.nan)


# ---------------------------------------------------------------- publishing


def publish_folder(tmp: Path, out: Path) -> None:
    """Move a complete folder into place; an existing one is renamed away first, then deleted."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def staging_folder(out: Path) -> Path:
    """A new temp folder beside `out`, made by a plain mkdir so that the user's umask sets its mode as for any
    folder (mkdtemp's 0700 would lock a group or a web server out of the published report; reading the umask
    with os.umask would change it for every thread of the process meanwhile)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    return tmp


@dataclass(frozen=True)
class EvaluationGroup:
    """One threshold sweep: the dynamic-mode points of each function for one (revision, task, shots)."""

    revision: str
    task: str
    shots: int
    base_accuracy: float
    n_items: int
    curves: dict[str, np.ndarray]  # score_fn -> [point, 2] (% zeroed, accuracy), sorted by % zeroed
    within_1pt: dict[str, float]  # score_fn -> % of heads zeroed within 1 point (docs/SCORES.md §6)
    auc: dict[str, float]  # score_fn -> normalised AUC
    protocol: str = ""  # shots, metric, chat template, BOS rule, data and few-shot source (evaluation.protocol_line)


def evaluation_groups(series: Series) -> list[EvaluationGroup]:
    groups: dict[tuple, dict[str, list]] = {}
    for row in series.evaluations:
        if row["mode"] == "dynamic":
            key = (row["revision"], row["task"], row["shots"], row["base_accuracy"], row["n_items"], protocol_line(row))
            groups.setdefault(key, {}).setdefault(row["score_fn"], []).append(
                (100.0 * row["frac_zeroed"], 100.0 * row["accuracy"])
            )  # stored fractions, shown in %
    order = {rev: i for i, rev in enumerate(series.revisions)}
    out = []
    ordered = sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], -1), kv[0][1:3]))  # series order, task
    for (revision, task, shots, base, n_items, protocol), by_fn in ordered:
        base = 100.0 * base
        fns = sorted(by_fn, key=lambda f: ALL_IDS.index(f) if f in ALL_IDS else len(ALL_IDS))
        curves = {f: np.array(sorted(by_fn[f])) for f in fns}  # [point, 2]
        within = {f: pct_zeroed_within_1pt(curves[f], base) for f in fns}
        out.append(
            EvaluationGroup(
                revision,
                task,
                shots,
                base,
                n_items,
                curves,
                within,
                {f: normalised_auc(curves[f]) for f in fns},
                protocol,
            )
        )
    return out


# ---------------------------------------------------------------- summaries (also the track flow's artifacts)


def summary_rows(series: Series) -> list[dict]:
    """One row per score function: first checkpoint with a dormant head, final % dormant, transitions."""
    pct = dormant_percent(series)  # [fn, checkpoint]
    rows = []
    for i, fn in enumerate(series.score_fns):
        any_dormant = np.flatnonzero((series.dormant[i] == 1).any(axis=0))  # [checkpoint]
        first = series.checkpoints[any_dormant[0]] if any_dormant.size else None
        marks = series.marks[i]  # [head, checkpoint]
        tau, direction = series.taus[fn]
        rows.append(
            {
                "score_fn": fn,
                "tau": tau,
                "direction": direction,
                "first_dormant_revision": first["revision"] if first else None,
                "first_dormant_tokens": int(first["tokens"]) if first else None,
                "final_pct_dormant": round(float(pct[i, -1]), 2),
                "fell_dormant": int((marks == 1).sum()),
                "woke": int((marks == -1).sum()),
                "heads_ever_changed": int((marks != 0).any(axis=1).sum()),
            }
        )
    return rows


def report_markdown(series: Series) -> str:
    """The keyed markdown summary of a series (summary.md, and the track flow's Prefect artifact)."""
    t = series.tokens
    lines = [
        f"# Dormant heads: {series.model_id}",
        "",
        f"{len(t)} checkpoint(s) from {series.revisions[0]} ({fg.format_tokens(t[0])} tokens) to "
        f"{series.revisions[-1]} ({fg.format_tokens(t[-1])} tokens); {series.n_layers} layers x "
        f"{series.n_heads} heads; calibration set {series.checkpoints[0]['calibration_id']}; "
        f"taus {series.checkpoints[0]['taus_id']}.",
        "",
        "| score function | tau | first checkpoint with a dormant head | final % dormant | fell dormant | woke "
        "| heads that changed state |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in summary_rows(series):
        lines.append(
            f"| {r['score_fn']} | {r['direction']} {r['tau']:g} | {fg.first_dormant_label(r)} | "
            f"{r['final_pct_dormant']:.2f} | "
            f"{r['fell_dormant']} | {r['woke']} | {r['heads_ever_changed']} |"
        )
    note = fg.raw_quantile_note(series.tau_sources)
    if note:
        lines += ["", f"Note: {note}"]
    for g in evaluation_groups(series):
        lines += [
            "",
            f"## {g.task}, {g.shots}-shot, {g.revision}: % of heads zeroed within 1 point "
            f"(base accuracy {g.base_accuracy:.2f}%, {g.n_items} items)",
            "",
            f"Protocol: {g.protocol}.",
            "",
            "| score function | % zeroed within 1 point | normalised AUC |",
            "|---|---:|---:|",
        ]
        lines += [f"| {f} | {g.within_1pt[f]:.2f} | {g.auc[f]:.2f} |" for f in g.curves]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- rendering


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    index_html: Path
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)
    summary_md: Path
    summary_rows: list[dict]
    markdown: str  # the text of summary.md


def render_report(
    store, model_id: str | None = None, out_dir=None, score_fn: str | None = None, progress: bool = False
) -> ReportResult:
    """Render the evolution report of `model_id` (the store's only model when None) into `out_dir`.

    `score_fn` is the function of the per-function figures (raster, layers, transitions, scores):
    ahon_ln when tracked, else the first tracked one. `out_dir` defaults to
    <$DORMANT_REPORTS or ./reports under the working directory>/<series slug>/.
    The folder is replaced only when the new report is complete.
    """
    series = load_series(store, model_id)
    fn = score_fn or (DEFAULT_SCORE_FN if DEFAULT_SCORE_FN in series.score_fns else series.score_fns[0])
    series.fn_index(fn)
    out = Path(out_dir) if out_dir is not None else default_reports_dir() / series_slug(series.model_id)
    t, tau, L, H = series.tokens, series.taus[fn][0], series.n_layers, series.n_heads
    plots = [  # (kind, file name, draw)
        (
            "dormant_percent",
            "dormant_percent",
            lambda: fg.draw_dormant_percent(t, dormant_percent(series), series.score_fns),
        ),
        ("raster", f"raster_{fn}", lambda: fg.draw_raster(raster_data(series, fn), t, L, H, fn, tau)),
        ("layers", f"layers_{fn}", lambda: fg.draw_layer_counts(layer_counts(series, fn), t, H, fn)),
    ]
    if len(t) > 1:
        plots.append(
            (
                "transitions",
                f"transitions_{fn}",
                lambda: fg.draw_transition_bars(transition_counts(series, fn), t[1:], fn),
            )
        )
    plots += [
        ("scores", f"scores_{fn}", lambda: fg.draw_score_bands(t, score_bands(series, fn), tau, fn)),
        (
            "agreement",
            "agreement",
            lambda: fg.draw_agreement(agreement_iou(series), series.score_fns, series.revisions[-1]),
        ),
    ]
    groups = evaluation_groups(series)
    for k, g in enumerate(groups):
        title = f"{g.task}, {g.shots}-shot, {g.revision} ({g.n_items} items)"
        plots.append(
            (
                f"accuracy_vs_zeroed_{k}",
                f"accuracy_vs_zeroed_{k}",
                lambda g=g, title=title: fg.draw_accuracy_vs_zeroed(g.curves, g.base_accuracy, title),
            )
        )

    tmp = staging_folder(out)
    try:
        (tmp / "figures").mkdir()
        drawn = {}
        for _, name, draw in _progress(plots, progress):
            drawn[name] = fg.save_figure(draw(), tmp / "figures", name)
        markdown = report_markdown(series)
        (tmp / "summary.md").write_text(markdown, encoding="utf-8")
        page = fg.report_html(series, fn, {kind: name for kind, name, _ in plots}, summary_rows(series), groups)
        (tmp / "index.html").write_text(page, encoding="utf-8")
        publish_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return ReportResult(out, out / "index.html", figures, out / "summary.md", summary_rows(series), markdown)


def _progress(items, enabled: bool):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc="figures", unit="figure")
