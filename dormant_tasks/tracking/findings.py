"""The paper's three training-dynamics findings, measured on a tracked series (docs/SCORES.md §7, "Findings").

Dormant heads (1) **emerge early** in pretraining, (2) **transition** between dormant and active states
during it, and (3) **depend on the input text**. Each is stated here with its number and its uncertainty,
from the store only (`SeriesView`): the head states of head_scores, the stored transitions (with their
`confident` and `blip`) and the calibration sets' agreement. `dormant findings` prints them and the report
shows them (the text and figures: `reporting/report.py`, `findings_lines`); the counts are the ones `dormant status` and the report's summary give.

- Emergence: for the heads dormant at the last checkpoint, the token count at which each became dormant
  **for good** (the first checkpoint of the path to the last one from which it stays dormant), and the share
  of them settled by 10% of the tokens, with its 95% Wilson interval (heads as the trials).
- Transitions: per training stage, the transitions, the confident ones and the confident ones per billion
  tokens (95% exact Poisson interval on the count); the heads that changed state more than once (Wilson).
- Input dependence: the Jaccard agreement of the calibration sets' masks at every shared checkpoint, pooled
  over the pairs of sets (|A n B| summed over pairs / |A u B| summed), with a Wilson interval at the last one;
  undefined where no set marks a head (docs/DATA_CONTRACT.md, `calibration_agreement`).

Token counts along a series: a checkpoint's tokens, plus, after a stage boundary whose names restart the
count (OLMo-2's stage-2 ingredients count their own tokens), the tokens of the branch point (`path_tokens`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc

from dormant_tasks.errors import StoreError
from dormant_tasks.tracking.confidence import Z95, wilson_interval

EARLY = 0.10  # "early": by this fraction of the series' tokens
DEFAULT_FN = "ahon_ln"  # the v1 "dormant head" rule, as `dormant status` summarises


@dataclass(frozen=True)
class Share:
    """k of n, with its 95% Wilson interval (NaN when n = 0)."""

    k: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        low, high = wilson_interval(k, n)
        return cls(int(k), int(n), float(low), float(high))


@dataclass(frozen=True)
class Emergence:
    n_heads: int
    final_revision: str
    final_tokens: int  # along the path (`path_tokens`)
    pct_dormant_first: float  # % of heads dormant at the first checkpoint (as `dormant status`)
    pct_dormant_last: float  # ... at the last
    first_dormant_revision: str | None  # the first checkpoint with any dormant head
    first_dormant_tokens: int | None
    heads: list[str]  # "L{layer}.H{head}" of the heads dormant at the last checkpoint
    settled_tokens: np.ndarray  # int64 [final-dormant head]: tokens at which each became dormant for good
    settled_revisions: list[str]  # [final-dormant head]
    early_tokens: float  # EARLY x final_tokens
    early: Share  # of the final-dormant heads, those settled by early_tokens


@dataclass(frozen=True)
class StageRate:
    stage: int
    n_transitions: int
    n_confident: int
    tokens: int  # tokens the stage's compared pairs span (along each pair's path)
    per_billion: float  # confident transitions per 1e9 tokens (NaN when tokens = 0)
    low: float  # 95% exact Poisson interval of per_billion
    high: float


@dataclass(frozen=True)
class Transitions:
    n_transitions: int
    fell_dormant: int
    woke: int
    n_confident: int
    n_blips: int
    stages: list[StageRate]
    more_than_once: Share  # heads (of all) that changed state more than once
    confidently_more_than_once: int  # heads with two or more confident transitions
    interval_tokens: np.ndarray  # int64 [interval]: tokens at the later checkpoint of each compared pair
    interval_confident: np.ndarray  # int64 [interval]: confident transitions into it
    interval_other: np.ndarray  # int64 [interval]: the others


@dataclass(frozen=True)
class InputDependence:
    calibration_ids: list[str]  # the series' sets, the primary first
    revisions: list[str] = field(default_factory=list)  # checkpoints scored on >= 2 sets, series order
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [checkpoint], along the path
    jaccard: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [checkpoint] pooled over pairs (NaN: undefined)
    pairs: dict = field(default_factory=dict)  # (set a, set b) -> float64 [checkpoint] Jaccard (NaN: undefined)
    first: tuple[str, float] | None = None  # the first checkpoint where the Jaccard is defined, and its value
    last: Share | None = None  # pooled |A n B| of pooled |A u B| at the last shared checkpoint
    all_of_any: Share | None = None  # heads dormant on every set, of those dormant on any, at the last one

    @property
    def measured(self) -> bool:
        return len(self.calibration_ids) >= 2 and bool(self.revisions)


@dataclass(frozen=True)
class Findings:
    model_id: str
    score_fn: str
    calibration_id: str
    tau: float
    direction: str
    n_checkpoints: int
    emergence: Emergence
    transitions: Transitions
    input_dependence: InputDependence


# ------------------------------------------------------------------------------------------ pieces


def path_tokens(tokens: np.ndarray, stage: np.ndarray, predecessor: np.ndarray) -> np.ndarray:
    """int64 [checkpoint]: training tokens seen, counted along each checkpoint's path from the first one.

    A checkpoint adds its token difference to its predecessor's count; when its own count is smaller (a new
    stage whose names count from 0, e.g. a stage-2 ingredient after stage 1), it adds its own count instead;
    a checkpoint without a token count (`main`, -1) adds nothing. Checkpoints in series order.
    """
    out = np.asarray(tokens, dtype=np.int64).copy()
    for c in range(len(out)):
        p = predecessor[c]
        if p < 0:
            out[c] = max(int(tokens[c]), 0)
        elif tokens[c] < 0:
            out[c] = out[p]
        elif tokens[c] >= tokens[p]:
            out[c] = out[p] + int(tokens[c] - tokens[p])
        else:
            out[c] = out[p] + int(tokens[c])
    return out


def path_to(last: int, predecessor: np.ndarray) -> np.ndarray:
    """int64 [checkpoint on the path]: the checkpoints from the first one to `last`, following predecessors."""
    path = [last]
    while predecessor[path[-1]] >= 0:
        path.append(int(predecessor[path[-1]]))
    return np.array(path[::-1], dtype=np.int64)


def settled_index(dormant_on_path: np.ndarray) -> np.ndarray:
    """int64 [head]: the first position on the path from which the head stays dormant to the end; -1 when it is
    not dormant at the end. dormant_on_path: bool [position, head]."""
    d = np.asarray(dormant_on_path, dtype=bool)
    n = d.shape[0]
    # stays[p] = dormant at every position >= p: a cumulative AND from the end
    stays = np.flip(np.logical_and.accumulate(np.flip(d, axis=0), axis=0), axis=0)  # [position, head]
    first = np.where(stays.any(axis=0), stays.argmax(axis=0), -1)
    return np.where(d[n - 1], first, -1).astype(np.int64)


def poisson_interval(k: int, z: float = Z95) -> tuple[float, float]:
    """The exact (Garwood) two-sided 95% interval of a Poisson mean from one count k: the means at which
    P(X >= k) and P(X <= k) are 2.5%. By bisection on the Poisson CDF, summed in log space (no scipy)."""
    alpha = math.erfc(z / math.sqrt(2)) / 2  # 0.025 for z = 1.96

    def cdf(x: int, lam: float) -> float:  # P(X <= x)
        if x < 0:
            return 0.0
        if lam == 0:
            return 1.0
        log_lam = math.log(lam)
        return math.fsum(math.exp(-lam + i * log_lam - math.lgamma(i + 1)) for i in range(x + 1))

    def bisect(below, hi: float) -> float:  # the root of a condition true below it and false above
        lo = 0.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if below(mid) else (lo, mid)
        return (lo + hi) / 2

    top = k + 20.0 * math.sqrt(k + 1) + 20.0
    upper = bisect(lambda lam: cdf(k, lam) > alpha, top)  # P(X <= k) falls as the mean grows
    lower = 0.0 if k == 0 else bisect(lambda lam: 1.0 - cdf(k - 1, lam) < alpha, top)  # P(X >= k) grows
    return lower, upper


# ------------------------------------------------------------------------------------------ the findings


def series_findings(store, model_id: str, score_fn: str | None = None) -> Findings:
    """The three findings of `model_id` on its primary calibration set under `score_fn` (default ahon_ln when
    tracked, else the first tracked function); reads the store only."""
    from dormant_tasks.tracking.series import SeriesView, open_views

    views = open_views(store, model_id)
    if not views:
        SeriesView.open(store, model_id)  # the StoreError that names what the store holds
    view = views[0]
    fn = score_fn or (DEFAULT_FN if DEFAULT_FN in view.taus else next(iter(view.taus)))
    if fn not in view.taus:
        from dormant_tasks.engine.score_functions import get_score_function

        get_score_function(fn)  # an unknown id: ConfigError with did-you-mean
        raise StoreError(f"{model_id}: {fn} is not tracked; choose from: {', '.join(view.taus)}")
    states = list(view.states([fn]))
    if not states:
        raise StoreError(f"{model_id}: no {fn} head_scores under the current taus; run `dormant track` for it")
    s = states[0]
    tokens = path_tokens(s.tokens, s.stage, s.predecessor)  # [checkpoint]
    transitions = view.transitions([fn])
    return Findings(
        model_id,
        fn,
        view.calibration_id,
        view.taus[fn].value,
        view.taus[fn].direction,
        len(s.revision),
        emergence(s, tokens),
        transition_findings(s, tokens, transitions),
        input_dependence(views, fn, s, tokens),
    )


def emergence(s, tokens: np.ndarray) -> Emergence:
    """Finding 1 from a `SeriesStates` and its `path_tokens`."""
    n_ckpt, n_heads = s.dormant.shape
    last = n_ckpt - 1
    path = path_to(last, s.predecessor)  # [position]
    settled = settled_index(s.dormant[path])  # [head]
    final = np.flatnonzero(settled >= 0)  # [final-dormant head]
    at = path[settled[final]]  # [final-dormant head] checkpoint index
    settled_tokens = tokens[at]
    early_tokens = EARLY * float(tokens[last])
    any_dormant = np.flatnonzero(s.dormant.any(axis=1))  # [checkpoint]
    first = int(any_dormant[0]) if any_dormant.size else None
    labels = [f"L{s.layer[h]}.H{s.head_index[h]}" for h in final]
    return Emergence(
        n_heads,
        str(s.revision[last]),
        int(tokens[last]),
        100.0 * float(s.dormant[0].mean()),
        100.0 * float(s.dormant[last].mean()),
        None if first is None else str(s.revision[first]),
        None if first is None else int(tokens[first]),
        labels,
        settled_tokens.astype(np.int64),
        [str(s.revision[c]) for c in at],
        early_tokens,
        Share.of(int((settled_tokens <= early_tokens).sum()), len(final)),
    )


def transition_findings(s, tokens: np.ndarray, transitions) -> Transitions:
    """Finding 2 from a `SeriesStates`, its `path_tokens` and the function's stored transitions."""
    rank = {r: i for i, r in enumerate(s.revision.tolist())}
    to = np.array([rank.get(r, -1) for r in transitions.column("to_revision").to_pylist()], dtype=np.int64)
    if (to < 0).any():
        raise StoreError(f"{s.model_id} {s.score_fn}: a transition names a checkpoint the series lacks")
    confident = pc.fill_null(transitions.column("confident"), False).to_numpy(zero_copy_only=False).astype(bool)
    blip = pc.fill_null(transitions.column("blip"), False).to_numpy(zero_copy_only=False).astype(bool)
    fell = np.asarray(transitions.column("to_state").to_pylist(), dtype=object) == "dormant"
    width = int(s.head_index.max()) + 1 if len(s.head_index) else 1
    head_of = {k: h for h, k in enumerate((s.layer.astype(np.int64) * width + s.head_index).tolist())}
    keys = np.asarray(transitions.column("layer"), np.int64) * width + np.asarray(transitions.column("head_index"))
    head = np.array([head_of.get(k, -1) for k in keys.tolist()], dtype=np.int64)
    n_heads = len(s.layer)
    per_head = np.bincount(head, minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)
    per_head_sure = np.bincount(head[confident], minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)

    has_pred = np.flatnonzero(s.predecessor >= 0)  # [interval] the later checkpoint of each compared pair
    span = tokens[has_pred] - tokens[s.predecessor[has_pred]]  # [interval]
    stages = []
    for stage in sorted(set(s.stage[has_pred].tolist())):
        mine = s.stage[to] == stage  # [transition]
        n_sure = int((confident & mine).sum())
        stage_tokens = int(span[s.stage[has_pred] == stage].sum())
        scale = 1e9 / stage_tokens if stage_tokens > 0 else float("nan")
        low, high = poisson_interval(n_sure)
        stages.append(
            StageRate(int(stage), int(mine.sum()), n_sure, stage_tokens, n_sure * scale, low * scale, high * scale)
        )
    into = np.searchsorted(has_pred, to)  # [transition] its interval
    n_int = len(has_pred)
    sure_per = np.bincount(into[confident], minlength=n_int) if n_int else np.zeros(0, np.int64)
    all_per = np.bincount(into, minlength=n_int) if n_int else np.zeros(0, np.int64)
    return Transitions(
        int(len(to)),
        int(fell.sum()),
        int((~fell).sum()),
        int(confident.sum()),
        int(blip.sum()),
        stages,
        Share.of(int((per_head > 1).sum()), n_heads),
        int((per_head_sure > 1).sum()),
        tokens[has_pred].astype(np.int64),
        sure_per.astype(np.int64),
        (all_per - sure_per).astype(np.int64),
    )


def input_dependence(views, score_fn: str, s, tokens: np.ndarray) -> InputDependence:
    """Finding 3: the calibration sets' masks through training (the `calibration_agreement` table, computed
    when the store has none yet). Not measured with fewer than two sets."""
    from dormant_tasks.store.io import read_table
    from dormant_tasks.tracking.agreement import TABLE, set_agreement

    ids = [v.calibration_id for v in views]
    if len(ids) < 2:
        return InputDependence(ids)
    model_id = views[0].model_id
    table = read_table(views[0].store, TABLE, model_id)
    if table.num_rows == 0:
        table = set_agreement(views[0].store, model_id)
    rows = [r for r in table.to_pylist() if r["score_fn"] == score_fn]
    revisions = list(dict.fromkeys(r["revision"] for r in rows))  # the table is in series order
    if not revisions:
        return InputDependence(ids)
    rank = {r: i for i, r in enumerate(s.revision.tolist())}
    col = {r: j for j, r in enumerate(revisions)}
    both, union = np.zeros(len(revisions), np.int64), np.zeros(len(revisions), np.int64)  # [checkpoint]
    pairs = {(a, b): np.full(len(revisions), np.nan) for i, a in enumerate(ids) for b in ids[i + 1 :]}
    n_all, n_any = {}, {}
    for r in rows:
        j = col[r["revision"]]
        both[j] += r["n_both"]
        union[j] += r["n_dormant_a"] + r["n_dormant_b"] - r["n_both"]
        pairs[(r["calibration_a"], r["calibration_b"])][j] = r["jaccard"]
        n_all[j], n_any[j] = r["n_dormant_all"], r["n_dormant_any"]
    with np.errstate(invalid="ignore", divide="ignore"):
        jaccard = np.where(union > 0, both / np.where(union > 0, union, 1), np.nan)
    defined = np.flatnonzero(~np.isnan(jaccard))
    first = (revisions[defined[0]], float(jaccard[defined[0]])) if defined.size else None
    last = len(revisions) - 1
    # tokens of checkpoints the primary set lacks are unknown to its path: those columns keep their own count
    tok = np.array([tokens[rank[r]] if r in rank else -1 for r in revisions], dtype=np.int64)
    return InputDependence(
        ids,
        revisions,
        tok,
        jaccard,
        pairs,
        first,
        Share.of(int(both[last]), int(union[last])),
        Share.of(int(n_all[last]), int(n_any[last])),
    )
