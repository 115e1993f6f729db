"""The confident-state decision of a series' stored transitions, kept out of the append (docs/DATA_CONTRACT.md,
"Derived tables").

Which mask changes are confident is decided over the whole series at once (`statistics.decide_states`: the tail of
the maximum over every checkpoint of a head, Benjamini-Hochberg over every head), so it changes with each new
checkpoint and costs checkpoints x heads x functions. An append (`derive_series` adding a few checkpoint pairs)
therefore derives only the new mask changes and leaves the decision pending: it writes them with `confident` and
its columns null, as a part of the stored transitions (`transition_files`: pending while there are parts) or, when
it writes them whole, with DECISION_KEY = PENDING in the file's metadata (the rule chosen stays in FDR_KEY). The decision is taken when something reads it: `SeriesView.transitions` calls `decide_pending`, which
decides over the checkpoints the file was derived from. A run that holds the series stores it (the report of a
`dormant track` run), folding the parts into the decided file, so it is paid once; a plain reader (`dormant report`, `findings`, `publish`, the Python
API) takes no lock and writes nothing, so it decides in memory on each read. The result is the one a whole
derivation of the same checkpoints gives (tests/library/tracking/test_decision.py).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.statistics import FDR, FDR_METHOD
from dormant_tasks.store import holds_series, series_lock
from dormant_tasks.tracking.indicators import input_clusters, unpack_rows
from dormant_tasks.tracking.results import result_id
from dormant_tasks.tracking.transition_files import (
    DECISION_KEY,
    PAIRS_KEY,
    PENDING,
    RECORD_ONLY,
    read_transitions,
    transitions_metadata,
    write_whole,
)
from dormant_tasks.tracking.transitions import (
    FDR_KEY,
    Decisions,
    DormantMatrix,
    apply_decisions,
    predecessors,
    recorded_choice,
    state_decisions,
)

# the columns confident states need of every checkpoint (`series_rates`), read once per decision
RATE_COLUMNS = ("score_fn", "revision", "layer", "head_index", "dormant", "dormant_rate", "inactive_inputs")


CLUSTERS_KEY = "dormant.clusters"  # a decided transitions file's metadata: how each function's clusters were made


def clusters_record(decisions: Decisions) -> str | None:
    """The CLUSTERS_KEY value: per function, whether the inputs' clusters were given, inferred (with the block
    length, `statistics.infer_clusters`) or absent, and the clusters used; None when no function was decided from
    per-input indicators."""
    made = {fn: st.clusters.record() for (_, fn), (_, st) in sorted(decisions.items()) if st.clusters is not None}
    return json.dumps(made, sort_keys=True) if made else None


def is_pending(meta: dict[str, str]) -> bool:
    """Whether a transitions file (its metadata) waits for its confident-state decision."""
    return meta.get(DECISION_KEY) == PENDING


def decide_pending(view, transitions: pa.Table, meta: dict[str, str]) -> pa.Table:
    """`transitions` (the view's whole stored file, `meta` its metadata) with `confident` decided when its decision
    is pending, by the rule it records, over the checkpoints its pairs name; stored when this process holds the
    series (`_store_decision`). Unchanged when decided already."""
    if not is_pending(meta):
        return transitions
    level, method = recorded_choice(meta.get(FDR_KEY)) or (FDR, FDR_METHOD)
    record = None
    if transitions.num_rows:
        decisions = state_decisions(series_rates(view, derived_revisions(view, meta)), level, method)
        decided, record = apply_decisions(transitions, decisions), clusters_record(decisions)
    else:  # no mask change: nothing to decide, nothing to read
        decided = transitions
    _store_decision(view, decided, meta, record)
    return decided


def decided_file(view) -> pa.Table | None:
    """The view's transitions file as a whole derivation would have written it (its rows decided, its metadata
    without DECISION_KEY), for a copy of the store (`publish`); None when its decision is not pending."""
    meta = transitions_metadata(view)
    if not is_pending(meta):
        return None
    decided = decide_pending(view, read_transitions(view), meta)
    kept = {k: v for k, v in _decided_metadata(meta).items() if k not in RECORD_ONLY}  # one file, no parts
    return decided.replace_schema_metadata(kept)


def _decided_metadata(meta: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in meta.items() if k.startswith("dormant.") and k != DECISION_KEY}


def derived_revisions(view, meta: dict[str, str]) -> list[str]:
    """The current revisions (series order) of the checkpoints a derived file's pairs name: the view's own, unless
    a checkpoint was stored after the file was derived (a run stopped before its derivation)."""
    named = {i for pair in json.loads(meta.get(PAIRS_KEY, "[]")) for i in pair.split(">")}
    if not named:
        return list(view.revisions[:1])
    return [c["revision"] for c in view.checkpoints if result_id(c) in named]


def _store_decision(view, decided: pa.Table, meta: dict[str, str], record: str | None = None) -> None:
    """Write the decided file in place of the pending one when this process holds the series for a run (a track
    run's report) and the file is still the one decided. A plain read takes no lock and writes
    nothing (`store.lock`): it keeps the decision in memory."""
    if not holds_series(view.store, view.model_id):
        return
    kept = _decided_metadata(meta) | ({CLUSTERS_KEY: record} if record else {})  # how the clusters were made
    with series_lock(view.store, view.model_id):
        if transitions_metadata(view) != meta:
            return  # derived again, or appended to, meanwhile: its own decision is pending
        write_whole(view, decided, kept)  # the parts folded into the decided base


def series_rates(view, revisions: list[str] | None = None) -> list[DormantMatrix]:
    """Per tracked function, the series' masks and dormant rates over its current checkpoints (or those of
    `revisions`), in series order, with each checkpoint's inputs: what `confirm_transitions` reads. A lean
    `dormant_matrices` (RATE_COLUMNS only, none of its checks: each pair was checked when its mask changes were
    derived), read once per decision (benchmarks/confident_states.py: linear in checkpoints x heads x functions)."""
    t = view.head_scores(columns=list(RATE_COLUMNS), revisions=revisions)
    keep = set(view.revisions if revisions is None else revisions)
    ck = [c for c in view.checkpoints if c["revision"] in keep]  # series order
    revision = np.array([c["revision"] for c in ck], dtype=object)
    stage = np.array([c["stage"] for c in ck], dtype=np.int64)
    pred = predecessors(stage, np.array([c["ingredient"] or 0 for c in ck], dtype=np.int64))
    per = {c: np.array([r[c] for r in ck], dtype=np.int64) for c in ("step", "tokens")}
    n_inputs = np.array([c["n_inputs"] for c in ck], dtype=np.float64)
    col = pc.index_in(t.column("revision"), value_set=pa.array(revision.tolist(), pa.string())).to_numpy(
        zero_copy_only=False
    )  # [row]
    layer = t.column("layer").to_numpy().astype(np.int64)
    head_index = t.column("head_index").to_numpy().astype(np.int64)
    width = int(head_index.max()) + 1 if len(head_index) else 1
    keys, head = np.unique(layer * width + head_index, return_inverse=True)  # [head], [row]
    fn_codes = t.column("score_fn").combine_chunks().dictionary_encode()
    fn_of = fn_codes.indices.to_numpy(zero_copy_only=False)
    dormant_col = t.column("dormant").to_numpy(zero_copy_only=False).astype(bool)
    rate_col = t.column("dormant_rate").to_numpy(zero_copy_only=False).astype(np.float64)
    same_inputs = n_inputs.size and not np.isnan(n_inputs).any() and (n_inputs == n_inputs[0]).all()
    clusters = input_clusters(view.checkpoints_table(), view.model_id)
    out = []
    for code, fn in enumerate(fn_codes.dictionary.to_pylist()):
        rows = np.flatnonzero(fn_of == code)
        dormant = np.zeros((len(ck), len(keys)), dtype=bool)  # [checkpoint, head]
        rate = np.full((len(ck), len(keys)), np.nan)
        dormant[col[rows], head[rows]] = dormant_col[rows]
        rate[col[rows], head[rows]] = rate_col[rows]
        inactive = None  # [checkpoint, head, input], when every row keeps its indicators
        unpacked = (
            unpack_rows(t.column("inactive_inputs").take(pa.array(rows)), int(n_inputs[0])) if same_inputs else None
        )
        if unpacked is not None and rows.size == dormant.size and (clusters is None or clusters.size == n_inputs[0]):
            inactive = np.zeros((*dormant.shape, int(n_inputs[0])), dtype=bool)
            inactive[col[rows], head[rows]] = unpacked
        tau = view.taus[fn].value if fn in view.taus else float("nan")
        out.append(
            DormantMatrix(
                view.model_id,
                fn,
                revision,
                stage,
                per["step"],
                per["tokens"],
                pred,
                keys // width,
                keys % width,
                float(tau),
                dormant,
                view.calibration_id,
                view.taus_id,
                rate,
                n_inputs,
                inactive,
                clusters if inactive is not None else None,
            )  # fmt: skip
        )
    return out
