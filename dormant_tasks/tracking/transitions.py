"""Dormant <-> active transitions between consecutively analysed checkpoints of a series (docs/SCORES.md §5).

Order of a series: (stage, ingredient, step), ingredient 0 for stage 1. Stage-2 ingredients are separate
branches that start from stage 1, so each checkpoint is compared with its predecessor in the tree:
- the previous checkpoint of the same (stage, ingredient) branch, or
- for the first checkpoint of a branch, the last checkpoint of the earlier stages (the branch point:
  every stage-2 ingredient starts from the end of stage 1, not from the previous ingredient).
A series without stage 2 is thus a plain chain. Checkpoints are consecutive per score function: a
function scored on only some checkpoints is compared between those.

Ingredients come from the `checkpoints` table (head_scores rows do not carry them); without it every
checkpoint is on branch 0, and two revisions at the same (stage, step) are refused as ambiguous.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.checkpoints import series_sort_key
from dormant_tasks.errors import StoreError
from dormant_tasks.statistics import (
    FDR,
    FDR_METHODS,
    StateTransitions,
    between_states,
    decide_states,
    state_transitions,
)
from dormant_tasks.store import SCHEMAS, Table, conform
from dormant_tasks.tracking.indicators import cell_indicators, input_clusters, paired_p


def _state(dormant: np.ndarray) -> np.ndarray:
    return np.where(dormant, "dormant", "active")


@dataclass(frozen=True)
class DormantMatrix:
    """The dormant states of one (model_id, score_fn) over its ordered checkpoints."""

    model_id: str
    score_fn: str
    revision: np.ndarray  # [checkpoint] str, in series order
    stage: np.ndarray  # [checkpoint]
    step: np.ndarray  # [checkpoint]
    tokens: np.ndarray  # [checkpoint]
    predecessor: np.ndarray  # [checkpoint] index of the checkpoint compared with, -1 for the first
    layer: np.ndarray  # [head] int, heads sorted by (layer, head_index)
    head_index: np.ndarray  # [head]
    tau: float
    dormant: np.ndarray  # [checkpoint, head] bool
    calibration_id: str  # shared by every compared pair (checked)
    taus_id: str
    rate: np.ndarray | None = None  # [checkpoint, head] dormant_rate (None: not read)
    n_inputs: np.ndarray | None = None  # [checkpoint] float, the calibration inputs (NaN: unknown)
    inactive: np.ndarray | None = None  # bool [checkpoint, head, input] (None: not read, or some row keeps none)
    clusters: np.ndarray | None = None  # int [input] the inputs' clusters (None: one input per cluster)

    def inactive_counts(self) -> np.ndarray | None:
        """[checkpoint, head] inputs on which each head was inactive (rate x inputs), None without both."""
        if self.rate is None or self.n_inputs is None:
            return None
        return np.rint(self.rate * self.n_inputs[:, None])


def _per_checkpoint(checkpoints: pa.Table | None, column: str) -> dict[tuple[str, str], int]:
    if checkpoints is None or column not in checkpoints.column_names:
        return {}
    rows = zip(*(checkpoints.column(c).to_pylist() for c in ("model_id", "revision", column)))
    return {(m, r): v for m, r, v in rows}


def series_order(stage, ingredient, step, tokens, revision) -> np.ndarray:
    """Indices that sort checkpoints into the one series order (`checkpoints.series_sort_key`: main last)."""
    keys = [
        series_sort_key(str(r), int(s), None if i is None else int(i), int(st), int(t))
        for s, i, st, t, r in zip(stage, ingredient, step, tokens, revision)
    ]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def predecessors(stage: np.ndarray, ingredient: np.ndarray) -> np.ndarray:
    """[checkpoint] predecessor index in the branch tree (checkpoints already in series order)."""
    pred = np.arange(len(stage)) - 1  # same branch: the previous one
    for c in range(1, len(stage)):
        if (stage[c], ingredient[c]) != (stage[c - 1], ingredient[c - 1]):
            earlier = np.flatnonzero(stage[:c] < stage[c])
            pred[c] = earlier[-1] if earlier.size else c - 1  # branch point: end of the earlier stages
    return pred


def _dense(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(keys, return_inverse=True) for small non-negative ints, in O(rows) instead of a sort."""
    present = np.flatnonzero(np.bincount(keys)) if keys.size else np.zeros(0, np.int64)  # sorted distinct keys
    index = np.zeros(present[-1] + 1 if present.size else 0, dtype=np.int64)
    index[present] = np.arange(present.size)
    return present, index[keys]


def _unique_per_checkpoint(
    values: np.ndarray, ckpt: np.ndarray, rep: np.ndarray, what: str, model_id: str, revision: np.ndarray
) -> np.ndarray:
    """[checkpoint] the one value of `what` that each checkpoint's rows share (`rep`: one row of each)."""
    out = values[rep]
    same = (values == out[ckpt]) | (_isnan(values) & _isnan(out[ckpt]))
    if not same.all():
        bad = revision[ckpt[np.flatnonzero(~same)[0]]]
        raise StoreError(
            f"{model_id} {bad}: its head_scores rows disagree on {what}: keep one scoring result per checkpoint"
        )
    return out


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


# String columns are compared as dictionary codes: a 7B series holds millions of head_scores rows.
_CODED = ("model_id", "score_fn", "revision", "calibration_id", "taus_id")
_NUMERIC = ("stage", "step", "tokens", "layer", "head_index", "tau", "dormant", "dormant_rate")


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """[row] int codes and [code] the strings they stand for."""
    encoded = column.combine_chunks().dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False), np.array(encoded.dictionary.to_pylist(), dtype=object)


def dormant_matrices(head_scores: pa.Table, checkpoints: pa.Table | None = None) -> Iterator[DormantMatrix]:
    """Per (model_id, score_fn), sorted: the dormant matrix over ordered checkpoints, after checking that
    every compared pair shares calibration set, taus and tau, and that every checkpoint has the same heads."""
    for s, _, _ in _states_and_cells(head_scores, checkpoints):
        yield s


def _states_and_cells(
    head_scores: pa.Table, checkpoints: pa.Table | None
) -> Iterator[tuple[DormantMatrix, np.ndarray, np.ndarray]]:
    """`dormant_matrices`, each with its head_scores rows and where each row sits in `dormant.ravel()`."""
    known = {
        "ingredient": _per_checkpoint(checkpoints, "ingredient"),
        "n_inputs": _per_checkpoint(checkpoints, "n_inputs"),
    }
    cols = {c: head_scores.column(c).to_numpy(zero_copy_only=False) for c in _NUMERIC if c in head_scores.column_names}
    names = {}
    for c in _CODED:
        cols[c], names[c] = _codes(head_scores.column(c))
    groups = {
        (names["model_id"][m], names["score_fn"][f]): (m, f)
        for m, f in set(zip(cols["model_id"].tolist(), cols["score_fn"].tolist()))
    }
    bits = head_scores.column("inactive_inputs") if "inactive_inputs" in head_scores.column_names else None
    for (model_id, score_fn), (m, f) in sorted(groups.items()):
        rows = np.flatnonzero((cols["model_id"] == m) & (cols["score_fn"] == f))
        s, cell = _states_of(model_id, score_fn, {k: v[rows] for k, v in cols.items()}, names, known)
        labels = input_clusters(checkpoints, model_id) if bits is not None else None
        got = (
            None
            if bits is None
            else cell_indicators(s.n_inputs, s.dormant.shape, bits.take(pa.array(rows)), cell, labels)
        )
        s = s if got is None else replace(s, inactive=got, clusters=labels)
        yield s, rows, cell


def _states_of(
    model_id: str, score_fn: str, c: dict[str, np.ndarray], names, known: dict[str, dict]
) -> tuple[DormantMatrix, np.ndarray]:
    revision_codes, ckpt = _dense(c["revision"])  # ckpt: [row] checkpoint index
    revisions = names["revision"][revision_codes]  # [checkpoint] str
    n = len(revisions)
    rep = np.empty(n, dtype=np.int64)
    rep[ckpt] = np.arange(len(ckpt))  # [checkpoint] one of its rows
    per = {k: _unique_per_checkpoint(c[k], ckpt, rep, k, model_id, revisions) for k in ("stage", "step", "tokens")}
    ingredient = np.array([known["ingredient"].get((model_id, r)) or 0 for r in revisions])
    order = series_order(per["stage"], ingredient, per["step"], per["tokens"], revisions)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    revision = revisions[order]
    stage, step, tokens, ingredient = per["stage"][order], per["step"][order], per["tokens"][order], ingredient[order]
    for i in range(1, n):
        if (stage[i], ingredient[i], step[i]) == (stage[i - 1], ingredient[i - 1], step[i - 1]):
            raise StoreError(
                f"{model_id}: revisions {revision[i - 1]!r} and {revision[i]!r} both sit at stage {stage[i]} "
                f"step {step[i]}: pass the checkpoints table so that stage-2 ingredients become separate branches; "
                "two branches of one stage at one step are a duplicate step, which track sets aside unless "
                "--keep-duplicates"
            )
    pred = predecessors(stage, ingredient)

    # Taus and calibration must not change between compared checkpoints.
    for what in ("calibration_id", "taus_id", "tau"):
        v = _unique_per_checkpoint(c[what], ckpt, rep, what, model_id, revisions)[order]  # [checkpoint]
        for i in range(1, n):
            a, b = v[pred[i]], v[i]
            if a != b and not (what == "tau" and np.isnan(a) and np.isnan(b)):
                a, b = (names[what][a], names[what][b]) if what in names else (a, b)
                raise StoreError(
                    f"{model_id} {score_fn}: cannot compare {revision[pred[i]]!r} with {revision[i]!r}: {what} differs "
                    f"({a!r} vs {b!r}); score both with the same calibration set and taus (re-tau the whole series)"
                )

    width = int(c["head_index"].max()) + 1
    head_keys, head_idx = _dense(c["layer"].astype(np.int64) * width + c["head_index"])  # head_idx: [row]
    heads = np.stack([head_keys // width, head_keys % width], axis=1)  # [head, (layer, head)]
    cell = rank[ckpt] * len(heads) + head_idx  # [row] position in the [checkpoint, head] matrix
    count = np.bincount(cell, minlength=n * len(heads)).reshape(n, len(heads))
    if (count != 1).any():
        i, h = np.argwhere(count != 1)[0]
        what = "twice" if count[i, h] > 1 else "not at all"
        raise StoreError(
            f"{model_id} {score_fn}: head (layer {heads[h, 0]}, head_index {heads[h, 1]}) appears {what} at {revision[i]!r}; "
            "read head_scores with dedupe and one calibration_id/taus_id, with the same heads at every checkpoint"
        )
    dormant = np.zeros(n * len(heads), dtype=bool)
    dormant[cell] = c["dormant"].astype(bool)
    rate: np.ndarray | None = None
    if "dormant_rate" in c:
        flat = np.full(n * len(heads), np.nan)
        flat[cell] = c["dormant_rate"].astype(np.float64)
        rate = flat.reshape(n, len(heads))
    n_inputs = np.array([known["n_inputs"].get((model_id, r)) for r in revision], dtype=np.float64)
    tau = c["tau"][0] if len(c["tau"]) else np.nan
    first = rep[order[0]]  # a row of the first checkpoint: every compared pair shares its ids (checked above)
    states = DormantMatrix(
        model_id,
        score_fn,
        revision,
        stage,
        step,
        tokens,
        pred,
        heads[:, 0],
        heads[:, 1],
        float(tau),
        dormant.reshape(n, len(heads)),
        str(names["calibration_id"][c["calibration_id"][first]]),
        str(names["taus_id"][c["taus_id"][first]]),
        rate,
        n_inputs,
    )
    return states, cell


def derive_transitions(
    head_scores: pa.Table, checkpoints: pa.Table | None = None, fdr: float = FDR, method: str = "bh"
) -> pa.Table:
    """One row per change of `dormant` state between a checkpoint and its predecessor, per (score_fn, layer, head)
    (`mask_changes`), with `confident` and the state columns decided over these checkpoints
    (`confirm_transitions`): they need every checkpoint's inputs (`n_inputs` of the `checkpoints` table), and
    without it they are null. `blip` is False here (`mark_blips`).
    """
    return confirm_transitions(*mask_changes(head_scores, checkpoints), fdr, method)


def mask_changes(head_scores: pa.Table, checkpoints: pa.Table | None = None) -> tuple[pa.Table, list[DormantMatrix]]:
    """The mask changes of `derive_transitions`, undecided (`confident` and the state columns null), and the dormant
    matrices they came from.

    The common columns (revision, stage, step, tokens) are those of the `to` checkpoint. StoreError when
    compared checkpoints differ in calibration_id, taus_id or tau, or a head is missing or duplicated.
    `confident_p`: McNemar's exact test of the change on the calibration inputs (null: the head's dormant rate on
    these inputs is the same at both checkpoints), where both rows keep their per-input indicators.
    """
    bits = head_scores.column("inactive_inputs") if "inactive_inputs" in head_scores.column_names else None
    parts, matrices = [], []
    for s, rows, cell in _states_and_cells(head_scores, checkpoints):
        matrices.append(s)
        to = np.flatnonzero(s.predecessor >= 0)  # [pair] the later checkpoint of each compared pair
        frm = s.predecessor[to]  # [pair]
        changed = s.dormant[frm] != s.dormant[to]  # [pair, head]
        p, h = np.nonzero(changed)  # one entry per transition, ordered by (pair, head)
        t_i, f_i = to[p], frm[p]
        p_value = paired_p(bits, rows, cell, s.dormant.size, f_i * s.dormant.shape[1] + h, t_i * s.dormant.shape[1] + h)
        parts.append(
            {
                "model_id": np.full(len(p), s.model_id, dtype=object),
                "revision": s.revision[t_i],
                "stage": s.stage[t_i],
                "step": s.step[t_i],
                "tokens": s.tokens[t_i],
                "score_fn": np.full(len(p), s.score_fn, dtype=object),
                "tau": np.full(len(p), s.tau),
                "layer": s.layer[h],
                "head_index": s.head_index[h],
                "from_revision": s.revision[f_i],
                "to_revision": s.revision[t_i],
                "from_step": s.step[f_i],
                "to_step": s.step[t_i],
                "from_tokens": s.tokens[f_i],
                "to_tokens": s.tokens[t_i],
                "from_state": _state(s.dormant[f_i, h]),
                "to_state": _state(s.dormant[t_i, h]),
                "confident_p": pa.array(p_value, mask=np.isnan(p_value), type=pa.float64()),
                "blip": np.zeros(len(p), dtype=bool),
                "calibration_id": np.full(len(p), s.calibration_id, dtype=object),
                "taus_id": np.full(len(p), s.taus_id, dtype=object),
            }
        )
    return _to_table(parts, Table.transitions), matrices


FDR_KEY = "dormant.fdr"  # a transitions file's metadata: how its `confident` was decided (`fdr_record`)


RULE = "confident states, clusters, max over checkpoints"  # this release's rule (older ones: decided again)


def fdr_record(level: float, method: str = "bh") -> str:
    """The FDR_KEY value: the rule of `confident`, its correction, its level and its family."""
    return json.dumps(
        {
            "rule": RULE,
            "states": "wild cluster bootstrap with the null imposed, the maximum over the head's checkpoints",
            "correction": {"bh": "benjamini-hochberg", "by": "benjamini-yekutieli"}[method],
            "method": method,
            "level": level,
            "family": "every head of the series' function and calibration set",
        }
    )


def stored_rule(record: str | None) -> tuple[float, str] | None:
    """(level, method) of a stored FDR_KEY value of this release's rule; None for another rule or none."""
    if not record:
        return None
    r = json.loads(record)
    return (float(r["level"]), str(r["method"])) if r.get("rule") == RULE else None


def recorded_choice(record: str | None) -> tuple[float, str] | None:
    """(level, method) a stored FDR_KEY value names under any rule (kept when `confident` is decided again)."""
    if not record:
        return None
    r = json.loads(record)
    return (float(r["level"]), str(r.get("method", "bh"))) if "level" in r else None


def confirm_transitions(
    transitions: pa.Table, matrices: Iterable[DormantMatrix], fdr: float = FDR, method: str = "bh"
) -> pa.Table:
    """`transitions` (a series' whole table) with `confident` decided by confident states (docs/SCORES.md,
    "Confidence"): `apply_decisions` of `state_decisions`."""
    return apply_decisions(transitions, state_decisions(matrices, fdr, method))


Decisions = dict[tuple[str, str], tuple[DormantMatrix, StateTransitions]]


def state_decisions(matrices: Iterable[DormantMatrix], fdr: float = FDR, method: str = "bh") -> Decisions:
    """Per (model_id, score_fn), its dormant matrix and confident states and transitions, by `decide_states` from the
    indicators and clusters, or by `state_transitions` from the counts where a result keeps no indicators; a matrix
    without rates or inputs (`inactive_counts` None, an unknown `n_inputs`) is left out."""
    if method not in FDR_METHODS:
        raise ValueError(f"unknown false discovery rate method {method!r}: choose one of {', '.join(FDR_METHODS)}")
    out: Decisions = {}
    for s in matrices:
        k = s.inactive_counts()
        if k is None or s.n_inputs is None or np.isnan(s.n_inputs).any():
            continue
        if s.inactive is None:
            out[(s.model_id, s.score_fn)] = (s, state_transitions(k, s.n_inputs, s.predecessor, s.dormant, fdr, method))
            continue
        d = decide_states(s.inactive, s.clusters, s.predecessor, fdr=fdr, method=method)
        rate = k / s.n_inputs[:, None]
        st = between_states(
            d.state, d.state_p, s.predecessor, s.dormant, rate, d.head_p, d.head_q, d.level, method, fdr
        )
        out[(s.model_id, s.score_fn)] = (s, replace(st, reach=d.reach, clusters=d.clusters))
    return out


def apply_decisions(transitions: pa.Table, decisions: Decisions) -> pa.Table:
    """`transitions` with `confident` set by `decisions`: the row where each confident transition is located is
    confident, every other row of a decided function is not; `from_confident_revision`/`to_confident_revision`
    name the confident checkpoints it goes between and `state_p` their intersection-union p; `head_p` and
    `confident_q` (its BH or BY q-value over the heads) are the head's, on every row of the head. A function without
    a decision keeps null columns. Row order unchanged."""
    n = transitions.num_rows
    confident = np.zeros(n, dtype=bool)
    known = np.zeros(n, dtype=bool)
    head_p, head_q, state_p = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    from_rev, to_rev = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
    if n and decisions:  # (none: every column null, no pass over the rows: an append's pending table)
        rows_of: dict[tuple[str, str], list[int]] = {}
        groups = zip(transitions.column("model_id").to_pylist(), transitions.column("score_fn").to_pylist())
        for i, g in enumerate(groups):
            rows_of.setdefault(g, []).append(i)
        to_col = transitions.column("to_revision").to_pylist()
        layer = np.asarray(transitions.column("layer"), np.int64)
        head_index = np.asarray(transitions.column("head_index"), np.int64)
        for group, (s, st) in decisions.items():
            mine = np.array(rows_of.get(group, []), dtype=np.int64)
            if not mine.size:
                continue
            width = int(s.head_index.max()) + 1
            head_of = {key: h for h, key in enumerate((s.layer.astype(np.int64) * width + s.head_index).tolist())}
            rank = {r: i for i, r in enumerate(s.revision.tolist())}
            heads = np.array([head_of[key] for key in (layer[mine] * width + head_index[mine]).tolist()])
            at = np.array([rank[to_col[i]] for i in mine], dtype=np.int64)
            known[mine] = True
            head_p[mine], head_q[mine] = st.head_p[heads], st.head_q[heads]
            row_of = {(int(h), int(c)): int(i) for h, c, i in zip(heads, at, mine)}
            for t in range(len(st.head)):
                i = row_of[(int(st.head[t]), int(st.at[t]))]  # the located mask change is a row of the table
                confident[i] = True
                state_p[i] = st.p[t]
                from_rev[i], to_rev[i] = s.revision[st.start[t]], s.revision[st.end[t]]
    columns = {
        "confident": pa.array(confident, mask=~known, type=pa.bool_()),
        "confident_q": pa.array(head_q, mask=np.isnan(head_q), type=pa.float64()),
        "head_p": pa.array(head_p, mask=np.isnan(head_p), type=pa.float64()),
        "state_p": pa.array(state_p, mask=np.isnan(state_p), type=pa.float64()),
        "from_confident_revision": pa.array(from_rev, type=pa.string()),
        "to_confident_revision": pa.array(to_rev, type=pa.string()),
    }
    kept = transitions.drop_columns([c for c in columns if c in transitions.column_names])
    for name, column in columns.items():
        kept = kept.append_column(SCHEMAS[Table.transitions].field(name), column)
    return conform(kept, Table.transitions)


# A transition's head within its derivation: transitions of one of these and one head form the head's series.
_BLIP_GROUP = ("model_id", "taus_id", "calibration_id", "score_fn")


def mark_blips(transitions: pa.Table) -> pa.Table:
    """`transitions` with `blip` recomputed over the whole table, row order unchanged.

    A transition into checkpoint c is a blip when it is undone at the next checkpoint: the same head (of
    the same series, taus, calibration set and function) has a transition out of c (`from_revision` equal
    to its `to_revision`), A -> B -> A. On a branch point (the end of stage 1) one undoing branch is enough.
    Run it on a series' whole table: a blip is known only once its second half is there.
    """
    n = transitions.num_rows
    blip = np.zeros(n, dtype=bool)
    if n:
        head = [_codes(transitions.column(c))[0] for c in _BLIP_GROUP]
        head += [transitions.column(c).to_numpy(zero_copy_only=False) for c in ("layer", "head_index")]
        both = pa.chunked_array(transitions.column("from_revision").chunks + transitions.column("to_revision").chunks)
        revision = _codes(both)[0]  # [2 * row]: the checkpoint each row leaves, then the one it enters
        one = _joint_key(head)  # [row] the head (of its group): keyed once, not once per half
        key = _joint_key([np.concatenate([one, one]), revision])  # [2 * row]
        if key.max() < max(2**25, 8 * n):  # keys are >= 0: a lookup table (<= 32 MiB), no sort of the rows
            seen = np.zeros(int(key.max()) + 1, dtype=bool)
            seen[key[:n]] = True
            blip = seen[key[n:]]  # enters a checkpoint that the same head leaves
        else:
            blip = np.isin(key[n:], key[:n])
    field = SCHEMAS[Table.transitions].field("blip")
    column = pa.array(blip, type=pa.bool_())
    if "blip" in transitions.column_names:
        return transitions.set_column(transitions.column_names.index("blip"), field, column)
    return transitions.append_column(field, column)


def _joint_key(columns: list[np.ndarray]) -> np.ndarray:
    """[row] one int64 per distinct combination of the columns' values (equal rows, equal keys)."""
    ints = [np.asarray(c, dtype=np.int64) for c in columns]
    low = [c.min(initial=0) for c in ints]
    radix = [int(c.max(initial=0)) - int(m) + 1 for c, m in zip(ints, low)]
    if all(m >= 0 for m in low) and float(np.prod(np.array(radix, dtype=np.float64))) < 2.0**62:
        key = np.zeros(len(columns[0]), dtype=np.int64)  # small non-negative codes: a mixed-radix number, no sort
        for c, m, r in zip(ints, low, radix):
            key = key * r + (c - m)
        return key
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        values, col = np.unique(np.asarray(col, dtype=np.int64), return_inverse=True)
        key = np.unique(key * len(values) + col.reshape(-1), return_inverse=True)[1].reshape(-1).astype(np.int64)
    return key


def head_histories(head_scores: pa.Table, checkpoints: pa.Table | None = None) -> pa.Table:
    """Per (model_id, score_fn, layer, head): first checkpoint at which it is dormant (null if never),
    number of state changes (over all branches), and its state at the last checkpoint in series order.

    The common columns are those of that last checkpoint.
    """
    return histories_of(dormant_matrices(head_scores, checkpoints))


def histories_of(states: Iterable[DormantMatrix]) -> pa.Table:
    """`head_histories` of dormant matrices, however they were obtained (`dormant_matrices`, `states_from_transitions`)."""
    parts = []
    for s in states:
        n_heads, last = len(s.layer), len(s.revision) - 1
        ever = s.dormant.any(axis=0)  # [head]
        first = np.where(ever, s.dormant.argmax(axis=0), -1)  # [head] first dormant checkpoint, -1 never
        has_pred = s.predecessor >= 0
        n_changes = (s.dormant[s.predecessor[has_pred]] != s.dormant[has_pred]).sum(axis=0)  # [head]
        first_or_0 = np.maximum(first, 0)
        parts.append(
            {
                "model_id": np.full(n_heads, s.model_id, dtype=object),
                "revision": np.full(n_heads, s.revision[last], dtype=object),
                "stage": np.full(n_heads, s.stage[last]),
                "step": np.full(n_heads, s.step[last]),
                "tokens": np.full(n_heads, s.tokens[last]),
                "score_fn": np.full(n_heads, s.score_fn, dtype=object),
                "tau": np.full(n_heads, s.tau),
                "layer": s.layer,
                "head_index": s.head_index,
                "first_dormant_step": pa.array(s.step[first_or_0], mask=~ever, type=pa.int64()),
                "first_dormant_tokens": pa.array(s.tokens[first_or_0], mask=~ever, type=pa.int64()),
                "first_dormant_revision": pa.array(s.revision[first_or_0].astype(object), mask=~ever, type=pa.string()),
                "n_changes": n_changes,
                "final_state": _state(s.dormant[last]),
                "calibration_id": np.full(n_heads, s.calibration_id, dtype=object),
                "taus_id": np.full(n_heads, s.taus_id, dtype=object),
            }
        )
    return _to_table(parts, Table.head_histories)


def states_from_transitions(first: pa.Table, transitions: pa.Table, checkpoints: pa.Table) -> Iterator[DormantMatrix]:
    """The dormant matrices of a series rebuilt from its first checkpoint's head_scores and its transitions,
    without reading any other checkpoint: each checkpoint starts from its predecessor's states and takes the
    changes that the transitions into it record. `checkpoints`: the series' current rows (any order).

    Equal to `dormant_matrices` of every checkpoint's head_scores when the transitions are those of
    `derive_transitions` on them (tests/library/tracking/test_transitions.py holds the two side by side).
    """
    ck = {c: checkpoints.column(c).to_pylist() for c in ("revision", "stage", "step", "tokens", "ingredient")}
    ingredient = np.array([i or 0 for i in ck["ingredient"]])
    order = series_order(ck["stage"], ingredient, ck["step"], ck["tokens"], ck["revision"])
    revision = np.array(ck["revision"], dtype=object)[order]
    stage, step, tokens = (np.array(ck[c], dtype=np.int64)[order] for c in ("stage", "step", "tokens"))
    pred = predecessors(stage, ingredient[order])
    rank = {r: i for i, r in enumerate(revision)}
    for s in dormant_matrices(first):
        if s.revision.tolist() != [revision[0]]:
            raise StoreError(f"{s.model_id}: states_from_transitions needs the head_scores of {revision[0]!r} alone")
        width = int(s.head_index.max()) + 1 if len(s.head_index) else 1
        head_of = {k: h for h, k in enumerate((s.layer.astype(np.int64) * width + s.head_index).tolist())}
        mine = transitions.filter(pc.equal(transitions.column("score_fn"), s.score_fn))
        to_rank = np.array([rank.get(r, -1) for r in mine.column("to_revision").to_pylist()], dtype=np.int64)
        heads = np.array(
            [
                head_of.get(k, -1)
                for k in (
                    np.asarray(mine.column("layer"), np.int64) * width + np.asarray(mine.column("head_index"))
                ).tolist()
            ],
            dtype=np.int64,
        )
        to_dormant = np.asarray(mine.column("to_state").to_pylist(), dtype=object) == "dormant"
        if ((to_rank < 0) | (heads < 0)).any():
            raise StoreError(f"{s.model_id} {s.score_fn}: a transition names a checkpoint or head the series lacks")
        dormant = np.zeros((len(revision), len(s.layer)), dtype=bool)
        dormant[0] = s.dormant[0]
        by_to = np.argsort(to_rank, kind="stable")
        bounds = np.searchsorted(to_rank[by_to], np.arange(len(revision) + 1))
        for i in range(1, len(revision)):
            dormant[i] = dormant[pred[i]]
            changes = by_to[bounds[i] : bounds[i + 1]]
            dormant[i, heads[changes]] = to_dormant[changes]
        yield DormantMatrix(
            s.model_id,
            s.score_fn,
            revision,
            stage,
            step,
            tokens,
            pred,
            s.layer,
            s.head_index,
            s.tau,
            dormant,
            s.calibration_id,
            s.taus_id,
        )


def _nulls(part: dict) -> list[None]:
    """A nullable column a part leaves out (decided later, over the whole table)."""
    return [None] * len(part["model_id"])


def _to_table(parts: list[dict], table: str) -> pa.Table:
    schema = SCHEMAS[table]
    if not parts:
        return schema.empty_table()
    pieces = [
        pa.Table.from_arrays(
            [
                p[f.name] if isinstance(p.get(f.name), pa.Array) else pa.array(p.get(f.name, _nulls(p)), type=f.type)
                for f in schema
            ],
            schema=schema,
        )
        for p in parts
    ]
    return pa.concat_tables(pieces)
