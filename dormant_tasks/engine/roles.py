"""Head roles (Xu, "When Do Attention Circuits Form?", arXiv 2606.02378): where each input's last query looks, and
the role a head's selectivities give it.

The engine's pass records, per input and head, the attention `A[h, S-1, t]` that the input's last query (position
S-1) gives to each role's target t (`score_functions.ROLE_TARGETS`; the `attn_*` records): `target_positions`
says where those targets are in each input, from its token ids alone. A target that does not exist (the last token
has no earlier occurrence; an input too short for the local window or the baseline) is -1 and its value NaN, as is
one outside the last query's sliding window (`attention.reduce_raw`): undefined, never a zero attention.

A head's selectivity for a class is Xu's ratio of means: the mean of its target attention over the inputs divided
by the mean of its baseline attention (each mean over the inputs where it is defined; the baseline floored at 1e-8
as Xu's code does); its role is the class of highest selectivity when that reaches the threshold (30 by default),
else "unclassified", and "undefined" where no class has a selectivity (`head_roles`).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dormant_tasks.engine.score_functions import ROLE_CLASSES, ROLE_TARGETS, SINK_EPS

if TYPE_CHECKING:  # torch is imported by the two functions of the pass: the roles of stored means need none
    import torch

N_BASELINE = 50  # positions in the baseline
BASELINE_SEED = 0  # numpy RandomState seed of the baseline's draw (Xu's)
LOCAL = 4  # positions of the local target: S-6 .. S-3
ROLE_THRESHOLD = 30.0  # the selectivity a head needs for a role (Xu's 30x)
BASELINE_FLOOR = 1e-8  # Xu's floor of the baseline attention in the ratio
UNCLASSIFIED = "unclassified"
UNDEFINED = "undefined"
ROLES = ROLE_CLASSES + (UNCLASSIFIED,)  # what a head's role can be where its selectivities are defined

# Each target's columns in `target_positions`' table, in ROLE_TARGETS order.
_WIDTHS = {"local": LOCAL, "baseline": N_BASELINE}
TARGET_COLUMNS: dict[str, slice] = {}
_start = 0
for _t in ROLE_TARGETS:
    TARGET_COLUMNS[_t] = slice(_start, _start + _WIDTHS.get(_t, 1))
    _start += _WIDTHS.get(_t, 1)
N_COLUMNS = _start


@functools.lru_cache(maxsize=64)
def baseline_positions(length: int) -> tuple[int, ...]:
    """The baseline's positions for inputs of `length` tokens, drawn as Xu draws them: `RandomState(0).randint(1,
    length - 1)` again and again, skipping position 0, the last six (S-6 .. S-1) and repeats, until 50 are drawn.
    An input with fewer than 50 such positions takes them all (in drawn order); one with none has no baseline."""
    candidates = max(0, length - 7)  # positions 1 .. S-7
    want = min(N_BASELINE, candidates)
    rng = np.random.RandomState(BASELINE_SEED)
    drawn: list[int] = []
    while len(drawn) < want:
        p = int(rng.randint(1, length - 1))
        if p < length - 6 and p not in drawn:
            drawn.append(p)
    return tuple(drawn)


def target_positions(input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[batch, N_COLUMNS] int64 positions of every role target of each right-padded input (TARGET_COLUMNS: which
    columns hold which target), -1 where the target does not exist. input_ids [batch, seq], lengths [batch]."""
    import torch

    ids = input_ids.cpu().numpy()
    out = np.full((ids.shape[0], N_COLUMNS), -1, dtype=np.int64)
    for b, n in enumerate(lengths.tolist()):
        last = n - 1
        earlier = np.flatnonzero(ids[b, :last] == ids[b, last])  # the last token's earlier occurrences
        if earlier.size:
            out[b, TARGET_COLUMNS["duplicate"]] = earlier[-1]
            out[b, TARGET_COLUMNS["induction"]] = earlier[-1] + 1
        out[b, TARGET_COLUMNS["previous"]] = last - 1  # -1 for a one-token input: undefined
        out[b, TARGET_COLUMNS["self"]] = last
        out[b, TARGET_COLUMNS["first"]] = 0
        if last - 1 - LOCAL >= 0:
            out[b, TARGET_COLUMNS["local"]] = np.arange(last - 2, last - 2 - LOCAL, -1)
        base = baseline_positions(n)
        if base:
            cols = TARGET_COLUMNS["baseline"]
            out[b, cols.start : cols.start + len(base)] = base
    return torch.from_numpy(out).to(input_ids.device)


def target_weights(
    weights: torch.Tensor, positions: torch.Tensor, target: str, last: torch.Tensor, window
) -> torch.Tensor:
    """[batch, head] float64: the mean of `weights` (the last query's attention to each key, [batch, head, seq])
    over `target`'s positions (`positions`, target_positions' table; the baseline's unused columns left out); NaN
    where the target does not exist or a position of it lies outside the last query's sliding window `window`
    (None: none), as transformers masks it (key j seen by query i when i - j < window). last [batch]."""
    import torch

    cols = positions[:, TARGET_COLUMNS[target]]  # [batch, k]
    if target == "baseline":  # an input shorter than 57 tokens has fewer baseline positions: -1 columns unused
        used = cols >= 0
        defined = used.any(-1, keepdim=True)  # [batch, 1]
    else:
        used = torch.ones_like(cols, dtype=torch.bool)
        defined = (cols >= 0).all(-1, keepdim=True)
    if window is not None:
        defined = defined & ((last[:, None] - cols < window) | ~used).all(-1, keepdim=True)
    got = weights.gather(2, cols.clamp_min(0)[:, None, :].expand(-1, weights.shape[1], -1)).double()  # [b, h, k]
    mean = (got * used[:, None, :]).sum(-1) / used.sum(-1, keepdim=True).clamp_min(1)  # [batch, head]
    return torch.where(defined, mean, torch.nan)


@dataclass(frozen=True)
class HeadRoles:
    """The roles of a checkpoint's heads. selectivity [class, layer, head] float64 (ROLE_CLASSES order; NaN where
    undefined), role [layer, head] str (a ROLE_CLASSES class, UNCLASSIFIED or UNDEFINED), reasons: why a class is
    undefined ({class: text}, only the undefined ones)."""

    selectivity: np.ndarray
    role: np.ndarray
    threshold: float
    reasons: dict[str, str]

    def shares(self) -> dict[str, float]:
        """The share of heads in each role (ROLES; an undefined head counts in the denominator)."""
        return {r: float((self.role == r).mean()) for r in ROLES}

    def layer_shares(self) -> dict[str, list[float]]:
        """The same per layer: {role: [share of layer l's heads]}."""
        return {r: [float(x) for x in (self.role == r).mean(-1)] for r in ROLES}


def selectivities(means: dict[str, np.ndarray]) -> np.ndarray:
    """[class, layer, head]: Xu's selectivity of each class from the checkpoint means of the role functions
    (`means`: attn_<target> -> [layer, head], each the mean over the inputs where it is defined)."""
    base = np.maximum(means["attn_baseline"], BASELINE_FLOOR)  # NaN stays NaN
    return np.stack([means[f"attn_{c}"] / base for c in ROLE_CLASSES])


def head_roles(means: dict[str, np.ndarray], threshold: float = ROLE_THRESHOLD, window_note: str = "") -> HeadRoles:
    """Every head's role from the checkpoint means of the seven role functions (see `selectivities`). A class whose
    selectivity is NaN for every head is named in `reasons`; `window_note` says which layers' windows keep targets
    from the last query, where the caller knows."""
    sel = selectivities(means)  # [class, layer, head]
    with warnings.catch_warnings():  # an all-NaN head: no best class, its role is UNDEFINED
        warnings.simplefilter("ignore", RuntimeWarning)
        best = np.nanmax(sel, axis=0)  # [layer, head]
    index = np.argmax(np.where(np.isnan(sel), -np.inf, sel), axis=0)  # [layer, head]
    role = np.where(best >= threshold, np.asarray(ROLE_CLASSES, dtype=object)[index], UNCLASSIFIED)
    role = np.where(np.isnan(best), UNDEFINED, role).astype(object)
    reasons = {}
    for c, s in zip(ROLE_CLASSES, sel):
        if np.isnan(s).all():
            reasons[c] = (
                "undefined on every input: the baseline or the target does not exist in the inputs, or lies "
                f"outside the last query's sliding window{window_note}"
            )
    return HeadRoles(sel, role, threshold, reasons)


def head_roles_of_inputs(values: dict[str, np.ndarray], threshold: float = ROLE_THRESHOLD) -> HeadRoles:
    """`head_roles` from per-input values (attn_<target> -> [input, layer, head], NaN where undefined): each mean
    over the inputs where it is defined, as the tracker's head scores are."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a target undefined on every input: its mean is NaN
        return head_roles({fn: np.nanmean(v, axis=0) for fn, v in values.items()}, threshold)


def sink_share(first_weight: np.ndarray, eps: float = SINK_EPS) -> float:
    """Gu et al.'s Sink^eps_1 (ICLR 2025): the share of heads whose first-token weight exceeds `eps`, from the
    checkpoint means of `awft_64` ([layer, head]: per input the mean of A[h, i, 0] over its first min(S, 64)
    queries, query 0 included, then the mean over the inputs). A NaN head (none here: the weight always exists)
    would count in the denominator, never as a sink."""
    return float((np.asarray(first_weight) > eps).mean())


__all__ = [
    "HeadRoles",
    "ROLES",
    "ROLE_THRESHOLD",
    "TARGET_COLUMNS",
    "UNCLASSIFIED",
    "UNDEFINED",
    "baseline_positions",
    "head_roles",
    "head_roles_of_inputs",
    "selectivities",
    "sink_share",
    "target_positions",
    "target_weights",
]
