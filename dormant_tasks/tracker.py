"""The tracker's steps, without Prefect: series taus, one checkpoint's analysis, the series' transitions.

`flows/track.py` calls these through the thin task wrappers of `dormant_tasks.tasks`; tests and the
overhead benchmark call them directly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__
from .calibration import CalibrationSet, load_calibration
from .checkpoints import Revision, is_local_source
from .errors import StoreError
from .loading import evict_revision, load_checkpoint
from .masks import Tau, aggregate, needs_reference, resolve_taus, tau_specs, taus_id
from .score_functions import parse_score_functions
from .scoring import InputScores, score_texts
from .store import (
    CheckpointKey,
    checkpoint_file_key,
    read_table,
    series_lock,
    stored_checkpoint_keys,
    write_table,
)
from .transitions import derive_transitions, head_histories

# Bump when the score engine's results change: stored results of another version are scored again.
SCORING_VERSION = "1"
# Per-input scores are kept by default only while they stay small (SPEC §8: off by default for big models).
INPUT_SCORES_AUTO_LIMIT = 2_000_000


@dataclass(frozen=True)
class TrackConfig:
    """Everything that fixes what `track` computes for a series. Saved (as taus + checkpoint rows) with the results."""

    source: str  # Hub repo id or local folder of checkpoint folders
    store: Path
    calibration: CalibrationSet
    score_fns: tuple[str, ...]
    tau_overrides: tuple[str, ...] = ()  # `--tau FN=VALUE` / `FN=qQ`
    dtype: str = "float32"
    device: str = "auto"
    batch_size: int = 8
    seed: int = 0
    cache_dir: str | None = None
    keep_checkpoints: bool = False
    input_scores: bool | None = None  # None: keep them when small (INPUT_SCORES_AUTO_LIMIT)
    retau: bool = False

    @property
    def model_id(self) -> str:
        return model_id_for(self.source)

    @classmethod
    def build(cls, source, store, scores=None, taus=(), texts=None, limit=None, dtype="float32", device="auto",
              batch_size=8, seed=0, cache_dir=None, keep_checkpoints=False, input_scores=None,
              retau=False) -> "TrackConfig":
        """From the track flow's parameters: validates the functions and reads the calibration set."""
        return cls(source=source, store=Path(store), calibration=load_calibration(texts, limit),
                   score_fns=tuple(parse_score_functions(scores)), tau_overrides=tuple(taus), dtype=dtype,
                   device=device, batch_size=batch_size, seed=seed, cache_dir=cache_dir,
                   keep_checkpoints=keep_checkpoints, input_scores=input_scores, retau=retau)


def model_id_for(source: str) -> str:
    """A Hub repo id as is; a local series by its folder name (e.g. `tiny-olmo2`)."""
    return Path(source).expanduser().resolve().name if is_local_source(source) else str(source)


def common_columns(model_id: str, revision: Revision) -> dict:
    return {"model_id": model_id, "revision": revision.name, "stage": revision.stage,
            "step": revision.step, "tokens": revision.tokens}


def _with_columns(table: pa.Table, columns: dict) -> pa.Table:
    for name, value in columns.items():
        table = table.append_column(name, pa.array([value] * table.num_rows))
    return table


# ------------------------------------------------------------------------------------------------ taus


@dataclass
class SeriesTaus:
    taus: dict[str, Tau]
    taus_id: str
    reference: "CheckpointResult | None" = None  # the reference checkpoint, already analysed with these taus


def stored_taus(cfg: TrackConfig) -> tuple[dict[str, Tau], str] | None:
    """The series' taus and the calibration they were fixed with, or None for a new series."""
    if not (Path(cfg.store) / "_store.json").is_file():
        return None
    rows = read_table(cfg.store, "taus", model_id=cfg.model_id).to_pylist()
    if not rows:
        return None
    taus = {r["score_fn"]: Tau(r["score_fn"], r["tau"], r["direction"], r["source"], r["quantile"],
                               r["reference_revision"]) for r in rows}
    return taus, rows[0]["calibration_id"]


def resolve_series_taus(cfg: TrackConfig, selected: list[Revision]) -> SeriesTaus:
    """SPEC §3: the series' taus are fixed the first time it is tracked and reused afterwards.

    Explicit `--tau` values that differ from the stored ones are refused unless `retau` is set. A new
    series with quantile taus analyses its reference checkpoint (the last selected one) first.
    """
    specs = tau_specs(cfg.score_fns, cfg.tau_overrides)
    stored = None if cfg.retau else stored_taus(cfg)
    if stored is not None:
        existing, calibration_id = stored
        if calibration_id != cfg.calibration.calibration_id:
            raise StoreError(f"series {cfg.model_id!r} was tracked with calibration set {calibration_id}, not "
                             f"{cfg.calibration.calibration_id}; results on different calibration sets are not comparable. "
                             "Use the same --texts/--limit, another --store, or re-tau the whole series with --retau")
        missing = [fn for fn in cfg.score_fns if fn not in existing]
        if missing:
            raise StoreError(f"series {cfg.model_id!r} was tracked without {', '.join(missing)}; its taus are fixed. "
                             "Track the same --scores, or re-tau the whole series with --retau")
        for spec in (s for s in specs.values() if s.score_fn in {_fn(o) for o in cfg.tau_overrides}):
            old = existing[spec.score_fn]
            same = (spec.value is not None and old.source == "fixed" and old.value == spec.value) or \
                   (spec.quantile is not None and old.source == "quantile" and old.quantile == spec.quantile)
            if not same:
                raise StoreError(
                    f"--tau {spec.score_fn}: the series {cfg.model_id!r} already uses tau = {old.value:g} "
                    f"({old.source}{'' if old.quantile is None else f' q={old.quantile:g} of ' + str(old.reference_revision)}); "
                    "mixing taus would make checkpoints incomparable. Drop --tau, or re-tau the whole series with --retau")
        taus = {fn: existing[fn] for fn in cfg.score_fns}
        return SeriesTaus(taus, taus_id(taus))
    if not needs_reference(specs):
        taus = resolve_taus(specs)
        _write_taus(cfg, taus, selected[-1])
        return SeriesTaus(taus, taus_id(taus))
    reference = selected[-1]
    scored = score_checkpoint(cfg, reference)
    taus = resolve_taus(specs, scored.scores.values, scored.scores.score_fns, reference.name)
    _write_taus(cfg, taus, reference)
    result = write_checkpoint(cfg, scored, SeriesTaus(taus, taus_id(taus)))
    return SeriesTaus(taus, taus_id(taus), reference=result)


def _fn(override: str) -> str:
    return override.split("=", 1)[0].strip()


def _write_taus(cfg: TrackConfig, taus: dict[str, Tau], reference: Revision) -> None:
    tid = taus_id(taus)
    rows = [{**common_columns(cfg.model_id, reference), "score_fn": t.score_fn, "tau": t.value,
             "direction": t.direction, "source": t.source, "quantile": t.quantile,
             "reference_revision": t.reference_revision, "calibration_id": cfg.calibration.calibration_id,
             "taus_id": tid} for t in taus.values()]
    # One taus file per series: a re-tau replaces it; results of the old taus stay, keyed by their taus_id.
    write_table(cfg.store, "taus", rows, file_key="taus")


# ------------------------------------------------------------------------------------------ checkpoints


@dataclass
class ScoredCheckpoint:
    revision: Revision
    commit: str
    scores: InputScores
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class CheckpointResult:
    revision: Revision
    commit: str
    skipped: bool
    seconds: dict[str, float]
    pct_dormant: dict[str, float]  # score_fn -> % of heads dormant


def checkpoint_key(cfg: TrackConfig, revision: Revision, commit: str, tid: str) -> CheckpointKey:
    return CheckpointKey(revision.name, commit, cfg.calibration.calibration_id, tid, SCORING_VERSION)


def known_commit(revision: Revision) -> str | None:
    """The commit without loading anything: the Hub sha, or a local folder's content hash."""
    if revision.commit:
        return revision.commit
    if revision.path is not None:
        from .loading import local_content_hash

        return local_content_hash(Path(revision.path))
    return None


def is_stored(cfg: TrackConfig, revision: Revision, tid: str, stored: set[CheckpointKey] | None = None) -> bool:
    commit = known_commit(revision)
    if commit is None:
        return False
    stored = stored_checkpoint_keys(cfg.store, cfg.model_id) if stored is None else stored
    return checkpoint_key(cfg, revision, commit, tid) in stored


def score_checkpoint(cfg: TrackConfig, revision: Revision, progress: bool = False) -> ScoredCheckpoint:
    """Load one checkpoint and score the calibration set with every function in one pass per batch."""
    loaded = load_checkpoint(cfg.source, revision, cfg.dtype, cfg.device, cfg.cache_dir, keep=True)
    try:
        t0 = time.perf_counter()
        scores = score_texts(loaded.model, loaded.tokenizer, cfg.calibration.texts, cfg.score_fns,
                             batch_size=cfg.batch_size, seed=cfg.seed, progress=progress)
        seconds_score = time.perf_counter() - t0
        n_layers, n_heads = scores.values.shape[2:]
        device = str(next(loaded.model.parameters()).device)
    finally:
        del loaded.model
        if revision.path is None and not cfg.keep_checkpoints:
            evict_revision(cfg.source, loaded.commit, cfg.cache_dir)
    return ScoredCheckpoint(revision, loaded.commit, scores, n_layers, n_heads, cfg.dtype, device,
                            {"download": loaded.seconds_download, "load": loaded.seconds_load, "score": seconds_score})


def write_checkpoint(cfg: TrackConfig, scored: ScoredCheckpoint, series: SeriesTaus) -> CheckpointResult:
    """Aggregate to the dormancy mask and write head_scores (+ input_scores), then the checkpoints row last."""
    t0 = time.perf_counter()
    rev, tid = scored.revision, series.taus_id
    key = checkpoint_key(cfg, rev, scored.commit, tid)
    file_key = checkpoint_file_key(key)
    common = common_columns(cfg.model_id, rev)
    cal_id = cfg.calibration.calibration_id
    heads = aggregate(scored.scores.values, scored.scores.score_fns, series.taus)
    heads = _with_columns(heads, {**common, "calibration_id": cal_id, "taus_id": tid})
    keep_inputs = cfg.input_scores
    if keep_inputs is None:
        keep_inputs = scored.scores.values.size <= INPUT_SCORES_AUTO_LIMIT
    with series_lock(cfg.store, cfg.model_id):
        if keep_inputs:
            inputs = _with_columns(scored.scores.to_table(), {**common, "calibration_id": cal_id})
            write_table(cfg.store, "input_scores", inputs, file_key=file_key)
        write_table(cfg.store, "head_scores", heads, file_key=file_key)
        seconds = {**scored.seconds, "write": time.perf_counter() - t0}
        write_table(cfg.store, "checkpoints", [{
            **common, "commit": scored.commit, "n_layers": scored.n_layers, "n_heads": scored.n_heads,
            "calibration_id": cal_id, "n_inputs": len(cfg.calibration.texts), "dtype": scored.dtype,
            "device": scored.device, "seconds": sum(seconds.values()), "analyzed_at": datetime.now(timezone.utc),
            "code_version": __version__, "taus_id": tid, "scoring_version": SCORING_VERSION,
            "ingredient": rev.ingredient,
        }], file_key=file_key)
    return CheckpointResult(rev, scored.commit, False, seconds, pct_dormant(heads))


def pct_dormant(head_scores: pa.Table) -> dict[str, float]:
    out = {}
    for fn in pc.unique(head_scores.column("score_fn")).to_pylist():
        d = head_scores.filter(pc.equal(head_scores.column("score_fn"), fn)).column("dormant").to_numpy(
            zero_copy_only=False)
        out[fn] = 100.0 * float(np.mean(d)) if d.size else 0.0
    return out


def analyze_checkpoint(cfg: TrackConfig, revision: Revision, series: SeriesTaus,
                       progress: bool = False) -> CheckpointResult:
    """Skip a stored checkpoint without loading it; else load, score, aggregate and write it."""
    if is_stored(cfg, revision, series.taus_id):
        return CheckpointResult(revision, known_commit(revision) or "", True, {}, {})
    if cfg.retau:
        rescored = reaggregate_from_input_scores(cfg, revision, series)
        if rescored is not None:
            return rescored
    return write_checkpoint(cfg, score_checkpoint(cfg, revision, progress), series)


def reaggregate_from_input_scores(cfg: TrackConfig, revision: Revision, series: SeriesTaus) -> CheckpointResult | None:
    """Re-tau without loading the model when this checkpoint's per-input scores were kept (SPEC §3)."""
    commit = known_commit(revision)
    cal_id = cfg.calibration.calibration_id
    ckpts = read_table(cfg.store, "checkpoints", model_id=cfg.model_id,
                       filters={"revision": revision.name, "calibration_id": cal_id,
                                "scoring_version": SCORING_VERSION})
    if commit is None or commit not in ckpts.column("commit").to_pylist():
        return None
    inputs = read_table(cfg.store, "input_scores", model_id=cfg.model_id,
                        filters={"revision": revision.name, "calibration_id": cal_id})
    if inputs.num_rows == 0 or set(cfg.score_fns) - set(pc.unique(inputs.column("score_fn")).to_pylist()):
        return None
    row = ckpts.filter(pc.equal(ckpts.column("commit"), commit)).to_pylist()[0]
    n_inputs, n_layers, n_heads = row["n_inputs"], row["n_layers"], row["n_heads"]
    values = np.full((n_inputs, len(cfg.score_fns), n_layers, n_heads), np.nan)
    cols = {c: inputs.column(c).to_numpy(zero_copy_only=False) for c in ("input_index", "score_fn", "layer", "head", "value")}
    for f, fn in enumerate(cfg.score_fns):
        sel = cols["score_fn"] == fn
        values[cols["input_index"][sel], f, cols["layer"][sel], cols["head"][sel]] = cols["value"][sel]
    scored = ScoredCheckpoint(revision, commit, InputScores(tuple(cfg.score_fns), values, np.zeros(n_inputs, np.int64)),
                              n_layers, n_heads, row["dtype"], row["device"], {})
    return write_checkpoint(cfg, scored, series)


def pending_revisions(cfg: TrackConfig, selected: list[Revision]) -> list[Revision] | None:
    """The selected checkpoints not yet stored with the series' taus, or None for a series whose taus are
    not fixed yet (or are being replaced). Loads no model: a rerun on a stored series costs only this."""
    if cfg.retau or stored_taus(cfg) is None:
        return None
    series = resolve_series_taus(cfg, selected)  # validates --tau/--scores/calibration against the series
    stored = stored_checkpoint_keys(cfg.store, cfg.model_id)
    return [r for r in selected if not is_stored(cfg, r, series.taus_id, stored)]


# ------------------------------------------------------------------------------------------ transitions


@dataclass
class SeriesSummary:
    n_checkpoints: int
    n_transitions: int
    transitions_by_fn: dict[str, int]


def derive_series(cfg: TrackConfig, tid: str) -> SeriesSummary:
    """Rewrite the series' transitions and head histories from every stored checkpoint with these taus."""
    cal_id = cfg.calibration.calibration_id
    ckpts = read_table(cfg.store, "checkpoints", model_id=cfg.model_id,
                       filters={"calibration_id": cal_id, "taus_id": tid, "scoring_version": SCORING_VERSION})
    heads = read_table(cfg.store, "head_scores", model_id=cfg.model_id,
                       filters={"calibration_id": cal_id, "taus_id": tid})
    heads = heads.filter(pc.is_in(heads.column("revision"), ckpts.column("revision")))
    trans = derive_transitions(heads, ckpts)
    hist = head_histories(heads, ckpts)
    with series_lock(cfg.store, cfg.model_id):
        write_table(cfg.store, "transitions", trans, file_key=f"transitions-{tid}", model_id=cfg.model_id)
        write_table(cfg.store, "head_histories", hist, file_key=f"head_histories-{tid}", model_id=cfg.model_id)
    by_fn: dict[str, int] = {}
    for fn in trans.column("score_fn").to_pylist():
        by_fn[fn] = by_fn.get(fn, 0) + 1
    return SeriesSummary(ckpts.num_rows, trans.num_rows, by_fn)
