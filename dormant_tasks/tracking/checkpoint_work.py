"""One checkpoint's work, without Prefect, in two halves. Computing touches no store: download and load it, score
it on every calibration set (`score_checkpoint`), aggregate the scores under the series' taus into rows (`rows_of`,
`CheckpointRows`); `compute_checkpoint` is the whole of it, what a task runs on any runner (a thread beside the
flow, a Dask worker on another host). Writing is the flow's alone: `write_checkpoint` commits the rows, or records
the failure that stopped the computing (`failures.checkpoint_outcome`), for every runner. `--retau` re-aggregates
the kept per-input scores where the store is (`reaggregate_from_input_scores`), and writes them the same way."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.checkpoints import Revision
from dormant_tasks.engine import SCORING_VERSION
from dormant_tasks.errors import CheckpointError, DormantError, NonFiniteScores, ScoringError
from dormant_tasks.store import (
    CheckpointKey,
    Table,
    commit_checkpoint,
    keep_input_scores,
    read_table,
    stored_checkpoint_keys,
    write_request,
)
from dormant_tasks.tracking.calibration import CalibrationSet
from dormant_tasks.tracking.failures import CHECKPOINT_FAILURES, CheckpointFailure, clear_failure, record_failure
from dormant_tasks.tracking.masks import aggregate_heads
from dormant_tasks.tracking.plan import SeriesTaus
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult, common_columns, known_commit, with_columns
from dormant_tasks.tracking.series import architecture_change
from dormant_tasks.version import __version__

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the engine (torch) loads when a model is scored, not when this module is imported
    from dormant_tasks.engine import InputScores


def lazy_load_checkpoint(*args, **kwargs):
    """`loading.load_checkpoint`, imported on first use: answering a rerun from the store needs no torch."""
    from dormant_tasks.checkpoints import load_checkpoint as load

    return load(*args, **kwargs)


@dataclass
class ScoredCheckpoint:
    revision: Revision
    commit: str
    scores: InputScores  # imported for type checking only: the engine (torch) loads when a model is scored
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    seconds: dict[str, float] = field(default_factory=dict)
    calibration: CalibrationSet | None = None  # the set `scores` are of (None: the run's primary set)
    windows: tuple[int | None, ...] | None = None  # per layer, its sliding window (None: full); None: not known
    # the dtype asked for (float16/bfloat16) whose pass was not finite, so that `dtype` is float32; None: as asked
    rescored_from: str | None = None


def checkpoint_key(
    request: TrackRequest, revision: Revision, commit: str, tid: str, calibration_id=None
) -> CheckpointKey:
    cal = calibration_id or request.calibration.calibration_id
    return CheckpointKey(revision.name, commit, cal, tid, SCORING_VERSION)


def is_stored(
    request: TrackRequest, revision: Revision, series: SeriesTaus, stored: set[CheckpointKey] | None = None
) -> bool:
    """True when the checkpoint's result is stored for every calibration set of the run (loads nothing)."""
    commit = known_commit(revision)
    if commit is None:
        return False
    stored = stored_checkpoint_keys(request.store, request.model_id) if stored is None else stored
    return all(
        checkpoint_key(request, revision, commit, one.taus_id, one.calibration.calibration_id) in stored
        for one in series.sets
    )


def score_checkpoint(request: TrackRequest, revision: Revision, progress: bool = False) -> tuple[ScoredCheckpoint, ...]:
    """Load one checkpoint once and score every calibration set of the run with every function.

    Each set is batched on its own (never mixed with another set's texts), so its scores are bitwise those
    of a run on that set alone; k sets cost one pass over their inputs and one model load.
    """
    import torch

    from dormant_tasks.engine import layer_windows

    # The hub module evicts a downloaded revision once it is loaded, unless --keep-checkpoints.
    loaded = lazy_load_checkpoint(
        request.source, revision, request.dtype, request.device, request.cache_dir, keep=request.keep_checkpoints
    )
    out = []
    rescored_from = None  # the half dtype whose pass was not finite, once the model is upcast to float32
    try:
        device = str(next(loaded.model.parameters()).device)
        windows = layer_windows(loaded.model.config)
        for k, cal in enumerate(request.calibration_sets):
            t0 = time.perf_counter()
            try:
                scores = _score_set(request, loaded, cal, progress)
            except NonFiniteScores as e:
                if loaded.model.dtype == torch.float32:  # float32 itself is not finite: refused, as ever
                    raise ScoringError(f"calibration set {cal.name}: {e}") from None
                rescored_from = str(loaded.model.dtype).removeprefix("torch.")
                log.warning(
                    "%s: its %s pass is not finite (%s); scoring it again in float32",
                    revision.name,
                    rescored_from,
                    str(e).split(" on ")[0],
                )
                loaded.model.to(torch.float32)  # this checkpoint's copy only: the next one loads in --dtype again
                try:
                    scores = _score_set(request, loaded, cal, progress)
                except NonFiniteScores as again:  # float32 is not finite either: refused, as ever
                    raise ScoringError(f"calibration set {cal.name} (scored again in float32): {again}") from None
            n_layers, n_heads = scores.values.shape[2:]
            seconds = {"score": time.perf_counter() - t0}
            if k == 0:  # the download and load are the checkpoint's, counted once
                seconds = {"download": loaded.seconds_download, "load": loaded.seconds_load, **seconds}
            dtype = "float32" if rescored_from else str(request.dtype)
            out.append(
                ScoredCheckpoint(
                    revision,
                    loaded.commit,
                    scores,
                    n_layers,
                    n_heads,
                    dtype,
                    device,
                    seconds,
                    cal,
                    windows,
                    rescored_from=rescored_from,
                )
            )
    finally:
        del loaded.model
    return tuple(out)


def _score_set(request: TrackRequest, loaded, cal: CalibrationSet, progress: bool) -> InputScores:
    """One calibration set's scores of the loaded model; a failure of the model's own code as this checkpoint's
    one-line ScoringError (`unscorable`), a non-finite pass as NonFiniteScores (retried in float32 by the caller)."""
    from dormant_tasks.engine import score_ids, score_texts

    try:
        if cal.probe is not None:  # token ids, drawn within the model's vocabulary (tracking/probe.py)
            rows = cal.probe.rows(loaded.model.config.get_text_config().vocab_size)
            return score_ids(loaded.model, rows, request.scoring, loaded.tokenizer.pad_token_id, progress)
        return score_texts(
            loaded.model,
            loaded.tokenizer,
            cal.texts,
            request.scoring,
            progress=progress,
            warn_truncated=False,  # the run's summary warns once, with the count
        )
    except NonFiniteScores:
        raise
    except ScoringError as e:
        raise ScoringError(f"calibration set {cal.name}: {e}") from None
    except DormantError:
        raise
    except Exception as e:
        raise unscorable(loaded.revision, cal, e) from None


def unscorable(revision: Revision, cal: CalibrationSet, e: Exception) -> ScoringError:
    """The failure of a forward pass over a checkpoint the engine loaded (a model's own code failing on it: a
    tokenizer whose ids its embedding does not hold, a shape no check foresaw, memory), as this checkpoint's
    failure in one line, so that the run records it and goes on (the traceback at DEBUG: `--debug`)."""
    log.debug("scoring %s failed", revision.name, exc_info=True)
    first = (str(e).splitlines() or [""])[0][:300]
    advice = (
        "use --batch-size 1, --dtype bfloat16 or another --device"
        if isinstance(e, MemoryError) or "out of memory" in first.lower()
        else "check that its config, weights and tokenizer belong together, or drop it from the selection"
    )
    return ScoringError(
        f"{revision.name}: the model failed while scoring calibration set {cal.name} ({type(e).__name__}: "
        f"{first}); {advice}"
    )


@dataclass
class CheckpointRows:
    """One checkpoint's result as rows, ready to store: computed anywhere (a Dask worker that cannot see the
    store), written by the one writer (`write_checkpoint`, in the flow's process)."""

    revision: Revision
    commit: str
    head_scores: pa.Table
    input_scores: pa.Table | None  # None: not kept (the run's --input-scores policy)
    checkpoint: dict  # the `checkpoints` (manifest) row, less `seconds` of the write
    seconds: dict[str, float]
    n_truncated: int


def checkpoint_rows(request: TrackRequest, scored: ScoredCheckpoint, series: SeriesTaus) -> CheckpointRows:
    """Aggregate the per-input scores to the dormancy mask; the rows of head_scores, input_scores and checkpoints."""
    cal = scored.calibration or request.calibration
    one = series.of(cal.calibration_id)
    rev, tid = scored.revision, one.taus_id
    common = common_columns(request.model_id, rev)
    cal_id = cal.calibration_id
    sc = scored.scores
    heads = aggregate_heads(sc.values, sc.score_fns, one.taus, sc.n_tokens, sc.first_boundary, cal.clusters)
    heads = with_columns(heads, {**common, "calibration_id": cal_id, "taus_id": tid})
    heads = with_layer_windows(heads, scored.windows)
    inputs = None
    if keep_input_scores(request.input_scores, scored.scores.values.size):
        inputs = with_columns(scored.scores.to_table(), {**common, "calibration_id": cal_id})
    row = {
        **common,
        "commit": scored.commit,
        "n_layers": scored.n_layers,
        "n_heads": scored.n_heads,
        "calibration_id": cal_id,
        "n_inputs": cal.n_inputs,
        "input_clusters": None if cal.clusters is None else list(cal.clusters),
        "dtype": scored.dtype,
        "rescored_from": scored.rescored_from,
        "device": scored.device,
        "code_version": __version__,
        "taus_id": tid,
        "scoring_version": SCORING_VERSION,
        "ingredient": rev.ingredient,
        "request_id": request.request_id,
    }
    return CheckpointRows(rev, scored.commit, heads, inputs, row, dict(scored.seconds), scored.scores.n_truncated)


def with_layer_windows(heads: pa.Table, windows: tuple[int | None, ...] | None) -> pa.Table:
    """`heads` with `sliding_window`: each row's layer's window in tokens, null for a full-attention layer (and
    for every layer when the windows are not known)."""
    layers = heads.column("layer").to_pylist()
    values = [None] * len(layers) if windows is None else [windows[layer] for layer in layers]
    return heads.append_column("sliding_window", pa.array(values, pa.int32()))


def rows_of(
    request: TrackRequest, scored: tuple[ScoredCheckpoint, ...], series: SeriesTaus
) -> tuple[CheckpointRows, ...]:
    """Every set's rows of one scored checkpoint (`checkpoint_rows` per set)."""
    return tuple(checkpoint_rows(request, one, series) for one in scored)


def write_checkpoint(
    request: TrackRequest, revision: Revision, outcome: tuple[CheckpointRows, ...] | CheckpointFailure
) -> CheckpointResult:
    """The one write of a checkpoint, whichever runner computed it: its rows (per calibration set its
    head_scores (+ input_scores) files, then its manifest row: `store.commit_checkpoint`), after which any failure
    recorded for it is cleared; or the failure that stopped its computing (`checkpoint_outcome`), recorded
    (`record_failure`) so that the run goes on, and raised instead when the request says `fail_fast`. The result
    reported is the primary set's, with the seconds of every set."""
    if not isinstance(outcome, CHECKPOINT_FAILURES):
        changed = next(
            (w for one in outcome if (w := architecture_change(request.store, request.model_id, one.checkpoint))), None
        )
        outcome = CheckpointError(changed) if changed else outcome
    if isinstance(outcome, CHECKPOINT_FAILURES):
        if request.fail_fast:
            raise outcome
        return record_failure(request, revision, str(outcome))
    write_request(request.store, request.model_id, request)
    seconds: dict[str, float] = {}
    for one in outcome:
        t0 = time.perf_counter()
        row = {**one.checkpoint, "analyzed_at": datetime.now(UTC), "seconds": sum(one.seconds.values())}
        commit_checkpoint(request.store, row, one.head_scores, one.input_scores)
        for k, v in {**one.seconds, "write": time.perf_counter() - t0}.items():
            seconds[k] = seconds.get(k, 0.0) + v
    first = outcome[0]
    clear_failure(request, first.revision)
    return CheckpointResult(
        first.revision,
        first.commit,
        False,
        seconds,
        pct_dormant(first.head_scores),
        max(r.n_truncated for r in outcome),
        truncated={r.checkpoint["calibration_id"]: r.n_truncated for r in outcome if r.n_truncated},
    )


def compute_checkpoint(
    request: TrackRequest, revision: Revision, series: SeriesTaus, progress: bool = False
) -> tuple[CheckpointRows, ...]:
    """Load, score and aggregate one checkpoint (every set) without touching the store: what the checkpoint task
    runs on every runner, its rows returned to the flow, which writes them (`write_checkpoint`)."""
    return rows_of(request, score_checkpoint(request, revision, progress), series)


def pct_dormant(head_scores: pa.Table) -> dict[str, float]:
    out = {}
    for fn in pc.unique(head_scores.column("score_fn")).to_pylist():
        d = (
            head_scores.filter(pc.equal(head_scores.column("score_fn"), fn))
            .column("dormant")
            .to_numpy(zero_copy_only=False)
        )
        out[fn] = 100.0 * float(np.mean(d)) if d.size else 0.0
    return out


def reaggregate_from_input_scores(
    request: TrackRequest, revision: Revision, series: SeriesTaus
) -> tuple[CheckpointRows, ...] | None:
    """Re-tau without loading the model when this checkpoint's per-input scores were kept for every set of the
    run (docs/SCORES.md §3): its rows under the new taus, for `write_checkpoint`; None when one set lacks them
    (the checkpoint is scored again). Reads the store: the flow runs it, not a worker."""
    commit = known_commit(revision)
    if commit is None:
        return None
    scored = []
    for cal in request.calibration_sets:
        one = _kept_scores(request, revision, commit, cal)
        if one is None:
            return None
        scored.append(one)
    return rows_of(request, tuple(scored), series)


def _kept_scores(
    request: TrackRequest, revision: Revision, commit: str, cal: CalibrationSet
) -> ScoredCheckpoint | None:
    cal_id = cal.calibration_id
    ckpts = read_table(
        request.store,
        Table.checkpoints,
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": cal_id, "scoring_version": SCORING_VERSION},
    )
    if commit not in ckpts.column("commit").to_pylist():
        return None
    inputs = read_table(
        request.store,
        Table.input_scores,
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": cal_id},
    )
    if inputs.num_rows == 0 or set(request.score_fn_ids) - set(pc.unique(inputs.column("score_fn")).to_pylist()):
        return None
    row = ckpts.filter(pc.equal(ckpts.column("commit"), commit)).to_pylist()[0]
    n_inputs, n_layers, n_heads = row["n_inputs"], row["n_layers"], row["n_heads"]
    values = np.full((n_inputs, len(request.score_fn_ids), n_layers, n_heads), np.nan)
    cols = {
        c: inputs.column(c).to_numpy(zero_copy_only=False)
        for c in ("input_index", "score_fn", "layer", "head_index", "score")
    }
    for f, fn in enumerate(request.score_fn_ids):
        sel = cols["score_fn"] == fn
        values[cols["input_index"][sel], f, cols["layer"][sel], cols["head_index"][sel]] = cols["score"][sel]
    from dormant_tasks.engine import InputScores

    # input_scores keep no token counts and no first-token kinds: length_slope and boundary_gap come out NaN
    # (docs/SCORES.md, "Input dependence"), never 0.
    scores = InputScores(tuple(request.score_fn_ids), values, np.zeros(n_inputs, np.int64))
    windows = _stored_windows(request, revision, cal_id, n_layers)
    return ScoredCheckpoint(
        revision,
        commit,
        scores,
        n_layers,
        n_heads,
        row["dtype"],
        row["device"],
        {},
        cal,
        windows,
        row.get("rescored_from"),
    )


def _stored_windows(
    request: TrackRequest, revision: Revision, calibration_id: str, n_layers: int
) -> tuple[int | None, ...] | None:
    """The layers' windows of the stored result being re-aggregated (no model is loaded to read them from); None
    when that result was stored before the column (its rows keep null)."""
    stored = read_table(
        request.store,
        Table.head_scores,
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": calibration_id},
        columns=["layer", "sliding_window"],
    )
    if stored.num_rows == 0 or stored.column("sliding_window").null_count == stored.num_rows:
        return None
    windows: list[int | None] = [None] * n_layers
    for layer, window in zip(stored.column("layer").to_pylist(), stored.column("sliding_window").to_pylist()):
        windows[layer] = window
    return tuple(windows)
