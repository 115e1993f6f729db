"""The paper's three training-dynamics findings, measured on a tracked series (docs/SCORES.md §7, "Findings").

Dormant heads (1) **emerge early** in pretraining, (2) **transition** between dormant and active states
during it, and (3) **depend on the input text**. Each is stated here with its number and its uncertainty,
from the store only (`SeriesView`): the head states and dormant rates of head_scores, the stored transitions,
the calibration sets' agreement and the per-input inactive indicators (`head_scores.inactive_inputs`).
`dormant findings` prints them (text, Markdown or JSON) and the report shows them (`reporting/texts.py`).

Every number is an `Estimate` (value, 95% interval, the method's name, the units behind it) or a `Share` (k of
n heads). Intervals over heads resample the layers and the heads within them (heads of one layer are not
independent); fewer than MIN_UNITS layers back no interval. They speak for this one model: a group of seeds
(`findings/replication.py`) is what speaks for a training recipe.

- Emergence: per head, the first checkpoint from which it is dormant at >= STABLE of the checkpoints to the end,
  over at least MIN_RUN checkpoints (a late blip does not undo it; a head dormant only at the last checkpoints has
  not settled yet); heads that never settle are right-censored at the end, not dropped. The median among the
  heads that settle and the median over all heads (censored: "not reached" when fewer than half settle), each
  with the bootstrap interval over layers; the share settled by EARLY of the tokens.
- Transitions: changes of the mask, and among them the confident ones: from a confident state to the opposite
  confident state (`statistics.decide_states`: clusters of inputs resampled, the maximum over checkpoints; BH or BY over heads); per training stage, confident ones per
  billion tokens (bootstrap over layers; the exact Poisson interval beside it), the checkpoint spacing, and the
  cadence-free measures: heads that ever change state, more than once, confidently.
- Input dependence (`findings/dependence.py`).
- Resolution (`findings/resolution.py`): where a run left listed checkpoints unscored (`--budget`, `--max`,
  `--every`), a time seen at a scored checkpoint is an interval back to the scored one before it (the medians carry
  both ends: `statistics.interval_median_estimate`), and the confident transitions not resolved to adjacent
  checkpoints are named with their pair and the checkpoints unscored between.

Token counts along a series: a checkpoint's tokens, plus, after a stage boundary whose names restart the
count (OLMo-2's stage-2 ingredients count their own tokens), the tokens of the branch point (`path_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.errors import StoreError
from dormant_tasks.findings.dependence import InputDependence, input_dependence
from dormant_tasks.findings.resolution import ChangeResolution, change_resolution, lower_ends
from dormant_tasks.findings.roles import RoleShares, role_shares
from dormant_tasks.statistics import (
    DEFAULT_RESAMPLING,
    FDR,
    FDR_METHOD,
    FDR_METHODS,
    PAIRED_FDR_FAMILIES,
    POISSON,
    RESAMPLES,
    ClusterReach,
    Estimate,
    InferredClusters,
    PairedChanges,
    Resampling,
    Share,
    decision_clusters,
    interval_median_estimate,
    paired_changes,
    poisson_interval,
    pooled_qvalues,
    rate_estimate,
    scaled,
    share_estimate,
)
from dormant_tasks.tracking import Resolution, apply_decisions, series_resolution, state_decisions

EARLY = 0.10  # "early": by this fraction of the series' tokens
# The fewest tokens a stage spans for its rate "per billion tokens" to be stated: the unit itself. A shorter stage's
# count scaled up to a billion would be an extrapolation (61K tokens: x16,000), so its rate is withheld (NaN).
MIN_RATE_TOKENS = 10**9
RATE_WITHHELD = f"withheld: a rate per billion tokens is stated over at least {MIN_RATE_TOKENS:,} tokens"
STABLE = 0.80  # "settled": dormant at >= this fraction of the checkpoints from then to the last
MIN_RUN = 3  # ... over at least this many checkpoints (one dormant last checkpoint is not "settled")


@dataclass(frozen=True)
class Emergence:
    n_heads: int
    final_revision: str
    final_tokens: int  # along the path (`path_tokens`)
    pct_dormant_first: float  # % of heads dormant at the first checkpoint (as `dormant status`)
    pct_dormant_last: float  # ... at the last
    first_dormant_revision: str | None  # the first checkpoint with any dormant head
    first_dormant_tokens: int | None
    heads: list[str]  # "L{layer}.H{head}" of the heads that settle dormant (emerged)
    n_settled: int = field(init=False)  # len(heads): a count of its own in the findings table
    first_tokens: np.ndarray  # int64 [emerged head]: tokens at its first dormant checkpoint on the path
    settled_tokens: np.ndarray  # int64 [emerged head]: tokens from which it is dormant at >= STABLE
    settled_revisions: list[str]  # [emerged head]
    n_censored: int  # heads that have not settled dormant by the end (right-censored there)
    stable: float  # STABLE
    min_run: int  # MIN_RUN
    first_median: Estimate  # median of first_tokens among the emerged heads (bootstrap over layers)
    settled_median: Estimate  # median of settled_tokens among the emerged heads
    settled_median_all: Estimate  # over every head, the censored ones at +inf (value inf: "not reached")
    first_fraction: Estimate  # first_median / final_tokens (fraction of the series' tokens)
    settled_fraction: Estimate
    early_tokens: float  # EARLY x final_tokens
    early: Share  # of the emerged heads, those settled by early_tokens (bootstrap over layers)
    # [emerged head] the lower end of its settling time: the scored checkpoint before, where listed checkpoints lie
    # unscored between (interval-censored, `findings/resolution.py`); else settled_tokens. None: not computed
    settled_low: np.ndarray | None = None
    n_interval: int | None = None  # emerged heads whose settling time is an interval; None: the listing is unknown

    def __post_init__(self):
        object.__setattr__(self, "n_settled", len(self.heads))


@dataclass(frozen=True)
class StageRate:
    stage: int
    n_transitions: int
    n_confident: int
    tokens: int  # tokens the stage's compared pairs span (along each pair's path)
    spacing: Estimate  # median tokens between compared checkpoints of the stage (min-max as its "interval")
    per_billion: Estimate  # confident transitions per 1e9 tokens, bootstrap over layers (NaN when tokens = 0)
    poisson: Estimate  # the same rate with the exact Poisson interval (too narrow when transitions cluster)


@dataclass(frozen=True)
class Transitions:
    n_transitions: int  # changes of the mask between compared checkpoints
    fell_dormant: int
    woke: int
    n_confident: int  # transitions between opposite confident states
    n_blips: int  # mask changes undone at the next checkpoint
    n_confident_blips: int  # ... whose both legs are confident
    fdr: float  # the false discovery rate of the heads called to change confident state
    method: str  # "bh" or "by"
    correction: str  # how "confident" was decided, in words
    n_heads: int  # the family: every head of the function
    n_selected: int  # heads with a confident transition
    state_level: float  # a state is confident when its p, adjusted over the head's checkpoints, <= this
    undetermined: Share  # (head, checkpoint) cells whose state is undetermined, of all
    n_paired: int  # mask changes with McNemar's p (per-input indicators kept)
    n_raw: int  # ... with McNemar p < 0.05, uncorrected (the rate on these inputs changed between the two)
    stages: list[StageRate]
    ever_changed: Share  # heads (of all) whose mask changed at least once
    more_than_once: Share  # heads (of all) whose mask changed more than once
    confidently_changed: Share  # heads (of all) with a confident transition
    confidently_more_than_once: int  # heads with two or more confident transitions
    interval_tokens: np.ndarray  # int64 [interval]: tokens at the later checkpoint of each compared pair
    interval_spacing: np.ndarray  # int64 [interval]: tokens between the pair's checkpoints
    interval_steps: np.ndarray  # int64 [interval]: steps between them
    interval_confident: np.ndarray  # int64 [interval]: confident transitions located in it
    interval_other: np.ndarray  # int64 [interval]: the other mask changes
    resolution: ChangeResolution | None = None  # which confident transitions are resolved to adjacent checkpoints
    # whether the inputs' clusters let any state be confident at these heads (`statistics.cluster_reach`); its
    # `message()` goes beside every confident count. None: not decided from clusters (counts only)
    # (these three objects hold per-input and per-(pair, head) arrays: the findings record and table carry the
    # summaries below instead, `record: False`)
    reach: ClusterReach | None = field(default=None, metadata={"record": False})
    # the clusters used: given, inferred (blocks) or absent
    clusters: InferredClusters | None = field(default=None, metadata={"record": False})
    # heads that changed on these inputs between adjacent checkpoints (`statistics.paired_changes`: McNemar's exact
    # test, clustered, BH or BY over the heads of each pair); None without per-input indicators
    paired: PairedChanges | None = field(default=None, metadata={"record": False})
    reach_z: float | None = field(init=False)  # the largest |z| the clusters allow (None: not decided from clusters)
    reach_needed: float | None = field(init=False)  # the |z| the first confident state needs at least
    reach_note: str | None = field(init=False)  # `reach.message()`: said beside every confident count
    input_clusters: str | None = field(init=False)  # the clusters used, in words (`clusters.describe()`)
    paired_changes: int | None = field(init=False)  # (pair, head) changes on these inputs at the FDR
    paired_heads: int | None = field(init=False)  # heads with at least one such change
    paired_test: str | None = field(init=False)  # the paired test and its correction, in words

    def __post_init__(self):
        reach, paired = self.reach, self.paired
        for name, value in {
            "reach_z": None if reach is None else float(reach.largest),
            "reach_needed": None if reach is None else float(reach.needed),
            "reach_note": None if reach is None else reach.message(),
            "input_clusters": None if self.clusters is None else self.clusters.describe(),
            "paired_changes": None if paired is None else paired.n_changed,
            "paired_heads": None if paired is None else paired.heads_changed,
            "paired_test": None
            if paired is None
            else f"{paired.test}; {paired.method.upper()} q <= {paired.fdr:g} over {_family_words(paired.family)}",
        }.items():
            object.__setattr__(self, name, value)


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
    resampling: Resampling = DEFAULT_RESAMPLING
    taus_id: str = ""  # the taus the states were decided under (a row of the findings table names them)
    # per checkpoint, the share of heads in each role (findings/roles.py); None, and left out of the record and
    # the table, where the series holds no role functions
    role_shares: RoleShares | None = field(default=None, metadata={"omit_none": True})


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


def stable_index(dormant_on_path: np.ndarray, stable: float = STABLE, min_run: int = MIN_RUN) -> np.ndarray:
    """int64 [head]: the first position on the path at which the head is dormant and from which it is dormant
    at >= `stable` of the positions to the end (that one included), at least `min_run` positions before the end
    counted in; -1 when there is none (the head has not settled dormant: right-censored at the end). A head
    dormant for good that wakes at the last checkpoint still settled. dormant_on_path: bool [position, head]."""
    d = np.asarray(dormant_on_path, dtype=bool)
    n = d.shape[0]
    after = np.flip(np.cumsum(np.flip(d, axis=0), axis=0), axis=0)  # [position, head] dormant from p to the end
    left = (n - np.arange(n))[:, None]  # [position, 1] positions from p to the end
    ok = d & (after >= stable * left - 1e-9) & (left >= min_run)  # [position, head]
    return np.where(ok.any(axis=0), ok.argmax(axis=0), -1).astype(np.int64)


# ------------------------------------------------------------------------------------------ the findings


def series_findings(
    store,
    model_id: str,
    score_fn: str | None = None,
    fdr: float = FDR,
    resampling: Resampling = DEFAULT_RESAMPLING,
    fdr_method: str = FDR_METHOD,
    *,
    views: list | None = None,
    paired_family: str = "pair",
) -> Findings:
    """The three findings of `model_id` on its primary calibration set under `score_fn` (default ahon_ln when
    tracked, else the first tracked function); confident transitions at false discovery rate `fdr` by
    `fdr_method` ("bh" or "by"), decided afresh from the stored dormant rates; reads the store only (`views`: the
    series' views when the caller opened them already, the primary set first). `paired_family`: the family over
    which the paired changes' false discovery rate is held, "pair" (the heads of each adjacent pair), "function"
    (every pair and head of the function) or "series" (every pair and head of every function and calibration set
    of the series, `statistics.pooled_qvalues`)."""
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.tracking import SeriesView, open_views

    if not 0 < fdr < 1:
        raise ConfigError(f"--fdr {fdr}: a false discovery rate lies between 0 and 1 (e.g. 0.05)")
    if fdr_method not in FDR_METHODS:
        raise ConfigError(f"--fdr-method {fdr_method!r}: choose one of {', '.join(FDR_METHODS)}")
    if resampling.resamples < 1 or resampling.permutations < 1:
        raise ConfigError(f"--resamples {resampling.resamples}: give a positive number (e.g. {RESAMPLES})")
    if paired_family not in PAIRED_FDR_FAMILIES:
        raise ConfigError(f"--paired-fdr {paired_family!r}: choose one of {', '.join(PAIRED_FDR_FAMILIES)}")
    views = views or open_views(store, model_id)
    if not views:
        SeriesView.open(store, model_id)  # the StoreError that names what the store holds
    view = views[0]
    fn = score_fn or (DEFAULT_FN if DEFAULT_FN in view.taus else next(iter(view.taus)))
    if fn not in view.taus:
        from dormant_tasks.engine import get_score_function

        get_score_function(fn)  # an unknown id: ConfigError with did-you-mean
        raise StoreError(f"{model_id}: {fn} is not tracked; choose from: {', '.join(view.taus)}")
    states = list(view.states([fn]))
    if not states:
        raise StoreError(
            f"{model_id}: no {fn} head_scores under the current taus; run `dormant track --model {model_id}`"
        )
    s = states[0]
    tokens = path_tokens(s.tokens, s.stage, s.predecessor)  # [checkpoint]
    transitions = view.stored_transitions([fn])  # the mask changes: confident ones are decided below, afresh
    resolution = series_resolution(store, model_id, s.revision.tolist())
    return Findings(
        model_id,
        fn,
        view.calibration_id,
        view.taus[fn].value,
        view.taus[fn].direction,
        len(s.revision),
        emergence(s, tokens, resampling, resolution=resolution),
        transition_findings(
            s,
            tokens,
            transitions,
            fdr,
            resampling,
            fdr_method,
            resolution,
            paired_family,
            views if paired_family == "series" else None,
        ),  # fmt: skip
        input_dependence(views, fn, s, tokens, resampling),
        resampling,
        view.taus_id,
        role_shares(views),
    )


def emergence(
    s,
    tokens: np.ndarray,
    resampling: Resampling = DEFAULT_RESAMPLING,
    stable: float = STABLE,
    min_run: int = MIN_RUN,
    resolution: Resolution | None = None,
) -> Emergence:
    """Finding 1 from a `DormantMatrix` and its `path_tokens`; `resolution` (the series' listing against its scored
    checkpoints): a time seen after unscored listed checkpoints is interval-censored (None: every time a point)."""
    n_ckpt, n_heads = s.dormant.shape
    last = n_ckpt - 1
    path = path_to(last, s.predecessor)  # [position]
    on_path = s.dormant[path]  # [position, head]
    settled = stable_index(on_path, stable, min_run)  # [head]
    emerged = np.flatnonzero(settled >= 0)  # [emerged head]
    first_pos = on_path[:, emerged].argmax(axis=0) if emerged.size else np.zeros(0, np.int64)  # [emerged]
    first_at = path[first_pos]  # [emerged head] checkpoint index
    at = path[settled[emerged]]  # [emerged head] checkpoint index
    first_tokens, settled_tokens = tokens[first_at].astype(np.int64), tokens[at].astype(np.int64)
    total = float(tokens[last])
    early_tokens = EARLY * total
    any_dormant = np.flatnonzero(s.dormant.any(axis=1))  # [checkpoint]
    first = int(any_dormant[0]) if any_dormant.size else None
    labels = [f"L{s.layer[h]}.H{s.head_index[h]}" for h in emerged]
    listing = resolution if resolution is not None else Resolution(False)
    first_low, _ = lower_ends(first_pos, path, s.revision, tokens, listing)  # [emerged head]
    settled_low, n_interval = lower_ends(settled[emerged], path, s.revision, tokens, listing)
    first_median = interval_median_estimate(first_low, first_tokens, s.layer[emerged], resampling, 10, "tokens")
    settled_median = interval_median_estimate(settled_low, settled_tokens, s.layer[emerged], resampling, 11, "tokens")
    every = np.full(n_heads, np.inf)  # [head] censored heads at +inf: later than any checkpoint
    every[emerged] = settled_tokens
    every_low = every.copy()
    every_low[emerged] = settled_low
    per_total = 1.0 / total if total > 0 else float("nan")
    return Emergence(
        n_heads,
        str(s.revision[last]),
        int(tokens[last]),
        100.0 * float(s.dormant[0].mean()),
        100.0 * float(s.dormant[last].mean()),
        None if first is None else str(s.revision[first]),
        None if first is None else int(tokens[first]),
        labels,
        first_tokens,
        settled_tokens,
        [str(s.revision[c]) for c in at],
        int(n_heads - emerged.size),
        stable,
        min_run,
        first_median,
        settled_median,
        interval_median_estimate(every_low, every, s.layer, resampling, 16, "tokens"),
        scaled(first_median, per_total, "fraction of the series' tokens"),
        scaled(settled_median, per_total, "fraction of the series' tokens"),
        early_tokens,
        share_estimate(settled_tokens <= early_tokens, s.layer[emerged], resampling, 12),
        settled_low,
        n_interval,
    )


def transition_findings(
    s,
    tokens: np.ndarray,
    transitions,
    fdr: float = FDR,
    resampling: Resampling = DEFAULT_RESAMPLING,
    fdr_method: str = FDR_METHOD,
    resolution: Resolution | None = None,
    paired_family: str = "pair",
    views: list | None = None,
) -> Transitions:
    """Finding 2 from a `DormantMatrix` (with its rates and inputs), its `path_tokens` and the function's stored
    transitions (the mask changes), confident ones decided at `fdr` by `fdr_method`; with the series' `resolution`,
    which of them are resolved to adjacent checkpoints. The paired changes' FDR over `paired_family` (with
    "series", over every function of every view in `views`)."""
    from dormant_tasks.statistics import UNDETERMINED

    decided = state_decisions([s], fdr, fdr_method)
    transitions = apply_decisions(transitions, decided)
    st = decided[(s.model_id, s.score_fn)][1] if decided else None  # None: the rates or inputs are unknown
    to, head = _transition_rows(s, transitions)
    confident = np.array([c is True for c in transitions.column("confident").to_pylist()], dtype=bool)
    fell = np.asarray(transitions.column("to_state").to_pylist(), dtype=object) == "dormant"
    p = np.array([np.nan if x is None else x for x in transitions.column("confident_p").to_pylist()], np.float64)
    n_heads = len(s.layer)
    per_head = np.bincount(head, minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)
    per_head_sure = np.bincount(head[confident], minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)
    undetermined = int((st.state == UNDETERMINED).sum()) if st is not None else 0
    has_pred = np.flatnonzero(s.predecessor >= 0)  # [interval] the later checkpoint of each compared pair
    span = tokens[has_pred] - tokens[s.predecessor[has_pred]]  # [interval]
    steps = s.step[has_pred] - s.step[s.predecessor[has_pred]]  # [interval]
    sure_per, all_per = _per_interval(has_pred, to, confident)
    name = {"bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}[fdr_method]
    return Transitions(
        int(len(to)),
        int(fell.sum()),
        int((~fell).sum()),
        int(confident.sum()),
        int(np.array([b is True for b in transitions.column("blip").to_pylist()], dtype=bool).sum()),
        _confident_blips(transitions, head, confident),
        fdr,
        fdr_method,
        f"confident states ({_clusters_words(st)}, max over checkpoints); {name} q <= {fdr:g} over {n_heads} heads",
        n_heads,
        st.n_selected if st is not None else 0,
        st.level if st is not None else float("nan"),
        Share(undetermined, s.dormant.size if st is not None else 0, float("nan"), float("nan"), "count"),
        int((~np.isnan(p)).sum()),
        int((p < 0.05).sum()),
        _stage_rates(s, has_pred, span, to, head, confident, resampling),
        share_estimate(per_head > 0, s.layer, resampling, 13),
        share_estimate(per_head > 1, s.layer, resampling, 14),
        share_estimate(per_head_sure > 0, s.layer, resampling, 15),
        int((per_head_sure > 1).sum()),
        tokens[has_pred].astype(np.int64),
        span.astype(np.int64),
        steps.astype(np.int64),
        sure_per.astype(np.int64),
        (all_per - sure_per).astype(np.int64),
        None if resolution is None else change_resolution(transitions, confident, resolution),
        st.reach if st is not None else None,
        st.clusters if st is not None else None,
        _paired(s, st, fdr, fdr_method, paired_family, views),
    )


def _paired(s, st, fdr: float, method: str, family: str = "pair", views: list | None = None) -> PairedChanges | None:
    """The paired-changes finding on the clusters the decision used (None: no indicators kept); with family
    "series", its q-values pooled with every other function's and calibration set's of `views`."""
    if s.inactive is None or st is None or st.clusters is None:
        return None
    mine = paired_changes(
        s.inactive,
        st.clusters.labels,
        s.predecessor,
        fdr=fdr,
        method=method,
        family="pair" if family == "series" else family,
    )
    if family != "series":
        return mine
    others = [
        paired_changes(o.inactive, decision_clusters(o.inactive, o.clusters).labels, o.predecessor).p
        for view in views or []
        for o in view.states()
        if o.inactive is not None and not (view.calibration_id == s.calibration_id and o.score_fn == s.score_fn)
    ]
    q = pooled_qvalues([mine.p, *others], method)[0]
    return replace(mine, q=q, family=f"series ({1 + len(others)} functions x sets)")


def _family_words(family: str) -> str:
    """The family of a paired FDR, in words."""
    if family.startswith("series"):
        return f"every function and calibration set of the series, {family[len('series ') :].strip('()')}"
    return {"pair": "the heads of each adjacent pair", "function": "every pair and head"}.get(family, family)


def _clusters_words(st) -> str:
    """How the inputs' clusters behind the confident counts were made: given, inferred (blocks) or absent."""
    if st is None or st.clusters is None:
        return "inputs as independent: counts only"
    return st.clusters.describe()


def _transition_rows(s, transitions) -> tuple[np.ndarray, np.ndarray]:
    """Per stored transition: the index of its later checkpoint in the series, and of its head (layer-major)."""
    rank = {r: i for i, r in enumerate(s.revision.tolist())}
    to = np.array([rank.get(r, -1) for r in transitions.column("to_revision").to_pylist()], dtype=np.int64)
    if (to < 0).any():
        raise StoreError(f"{s.model_id} {s.score_fn}: a transition names a checkpoint the series lacks")
    width = int(s.head_index.max()) + 1 if len(s.head_index) else 1
    head_of = {k: h for h, k in enumerate((s.layer.astype(np.int64) * width + s.head_index).tolist())}
    keys = np.asarray(transitions.column("layer"), np.int64) * width + np.asarray(transitions.column("head_index"))
    return to, np.array([head_of.get(k, -1) for k in keys.tolist()], dtype=np.int64)


def _confident_blips(transitions, head: np.ndarray, confident: np.ndarray) -> int:
    """Blips whose both legs are confident: the row leaving the blip's checkpoint (same head) is confident too."""
    blip = np.array([b is True for b in transitions.column("blip").to_pylist()], dtype=bool)
    leaving = {(int(h), r) for h, r, c in zip(head, transitions.column("from_revision").to_pylist(), confident) if c}
    to_rev = transitions.column("to_revision").to_pylist()
    return sum(1 for i in np.flatnonzero(blip & confident) if (int(head[i]), to_rev[i]) in leaving)


def _stage_rates(s, has_pred, span, to, head, confident, resampling: Resampling) -> list[StageRate]:
    """Per training stage: its mask changes, confident ones, tokens spanned and rates per billion tokens."""
    n_heads = len(s.layer)
    stages = []
    for stage in sorted(set(s.stage[has_pred].tolist())):
        mine = s.stage[to] == stage  # [transition]
        n_sure = int((confident & mine).sum())
        in_stage = s.stage[has_pred] == stage  # [interval]
        stage_tokens = int(span[in_stage].sum())
        scale = 1e9 / stage_tokens if stage_tokens > 0 else float("nan")
        sure_head = np.bincount(head[confident & mine], minlength=n_heads)  # [head] each head's whole history
        low, high = poisson_interval(n_sure)
        gaps = span[in_stage]
        rated = stage_tokens <= 0 or stage_tokens >= MIN_RATE_TOKENS  # (no span: NaN, said as such)
        withheld = Estimate.undefined(RATE_WITHHELD, "per billion tokens")
        stages.append(
            StageRate(
                int(stage),
                int(mine.sum()),
                n_sure,
                stage_tokens,
                Estimate(float(np.median(gaps)), float(gaps.min()), float(gaps.max()), "median (min-max)", "tokens"),
                rate_estimate(sure_head, s.layer, stage_tokens, resampling) if rated else withheld,
                Estimate(n_sure * scale, low * scale, high * scale, POISSON, "per billion tokens", n_sure)
                if rated
                else withheld,
            )
        )
    return stages


def _per_interval(has_pred: np.ndarray, to: np.ndarray, confident: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(confident, all) mask changes located in each compared interval."""
    into = np.searchsorted(has_pred, to)  # [transition] its interval
    n_int = len(has_pred)
    if not n_int:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.bincount(into[confident], minlength=n_int), np.bincount(into, minlength=n_int)
