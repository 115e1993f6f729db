"""The scoring attention function: the model's normal attention output plus every docs/SCORES.md §2 score, in one pass.

`scoring_attention` is registered in `transformers.AttentionInterface` under `ATTENTION_NAME` and called by
every decoder layer with `(module, query, key, value, attention_mask, scaling, dropout, **kwargs)`. The
per-pass state (input lengths, wanted functions, zeroing, results) arrives as the keyword argument
`dormant_session` (a `ScoringSession`), which transformers forwards from `model(...)` to the attention call.
`dormant_tasks.engine.scoring.scoring_pass` installs the function for one forward pass and builds the session.

How each layer computes its scores, never holding more than this layer's tensors and never the S x S matrix:
- inputs are RIGHT-padded and attention is causal, so real queries never see padding; the 2-D padding mask
  is only used (as per-input lengths) to drop padded queries/keys from every mean;
- the attention output comes from a fused kernel; on CPU `_scaled_dot_product_flash_attention_for_cpu`
  also returns each query's log-sum-exp (lse). With z_ij = scale q_i.k_j:
  entropy_i = lse_i - sum_j A_ij z_ij = lse_i - scale q_i.(sum_j A_ij k_j), and the bracket is a second fused
  attention whose values are the keys; the first-token weight is A_i0 = exp(z_i0 - lse_i);
- on CUDA, where Triton (the `gpu` extra) is installed, one Triton kernel (`engine/triton_attention.py`) returns
  the output with every per-query statistic (entropy, first-token weight, output norms, full output norms) in
  float32, and one masked mean turns them into the layer's scores; `ScoringSession.kernel` "triton" forces it
  (on CPU in Triton's interpreter, for the tests), "torch" keeps torch's kernels;
- elsewhere (or when `ScoringSession.query_block` is set) entropy and first-token weight come from explicit
  float32 softmax rows, a block of queries at a time ([batch, head, block, seq] at most);
- full head output norms need no projection: ||o W_O[h]^T||^2 = o G_h o^T with the d_head x d_head Gram
  matrix G_h = W_O[h]^T W_O[h], computed once per layer per session.
All per-position quantities are float32, per-input means float64, whatever the model dtype.

Sliding windows: a layer that passes `sliding_window=W` (its own argument, per layer, not the config) on an
input longer than W attends as transformers masks it: query i sees keys i - W < j <= i (`window_keys`, from
`sliding_window_overlay` AND `causal_mask_function` in transformers/masking_utils.py; flash attention's
window_size=(W - 1, ...) is the same rule). Every path applies it: on torch's kernels a block of queries at a
time over the keys its window reaches (`_windowed_attention`: the CPU fused kernel with an additive mask, which
still returns the lse; sdpa with a boolean mask elsewhere), the query-block rows mask the same keys, and the
Triton kernel masks them and skips key blocks wholly outside. A full layer, or a window no shorter than the
input, keeps the full causal path unchanged. The scores follow that attention: a query past the window from
token 0 has A_i0 = 0 exactly, and awft stays the mean over all real queries (zeros included); entropy is over
the keys the query sees; the value scores (ftvvn, avvn) read values, which no window changes.

Zeroing (docs/SCORES.md §6) happens here too, after the layer has computed its scores from its pre-zeroing output:
`DynamicZeroing(score_fn, tau)` zeroes, per input, the heads that `score_functions.is_inactive` marks;
`StaticZeroing(heads)` zeroes a fixed set of (layer, head) pairs for every input. The zeroed
(input, layer, head) mask is recorded either way.

Attention this function does not compute is refused in one line, never ignored: logit soft-capping and
attention sinks. The model's family (`engine.adapters`) says where W_O is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dormant_tasks.engine.adapters import FamilyAdapter, float_weight
from dormant_tasks.engine.cpu_attention_adapter import fused_cpu_attention
from dormant_tasks.engine.roles import target_weights
from dormant_tasks.engine.score_functions import (
    RAW_IDS,
    RAW_STATISTICS,
    SCORE_FUNCTIONS,
    Normaliser,
    Reduce,
    get_score_function,
    is_inactive,
    quantities,
    raw_statistics,
)
from dormant_tasks.errors import ScoringError

ATTENTION_NAME = "dormant_scoring"

DEFAULT_BLOCK = 256  # queries per block on the query-block path (devices without the CPU lse kernel)
KERNELS = ("auto", "triton", "torch")  # ScoringSession.kernel
# torch's fused CPU attention that also returns the log-sum-exp; None where this torch's op is missing or its
# signature changed (the engine then takes the public sdpa and the query-block rows)
_FUSED_CPU: Any = fused_cpu_attention()


@dataclass(frozen=True)
class DynamicZeroing:
    """Zero, per input, the heads a layer marks inactive under `score_fn` and `tau` (docs/SCORES.md §6, dynamic)."""

    score_fn: str
    tau: float

    def __post_init__(self):
        get_score_function(self.score_fn)  # raises ConfigError for an unknown id


@dataclass(frozen=True)
class StaticZeroing:
    """Zero a fixed set of (layer, head) pairs for every input (docs/SCORES.md §6, static)."""

    heads: frozenset[tuple[int, int]]


@dataclass
class ScoringSession:
    """State of one scoring forward pass, shared by all layers through the `dormant_session` kwarg."""

    lengths: torch.Tensor  # [batch] number of non-padding tokens of each (right-padded) input
    score_fns: tuple[str, ...]  # ids whose scores are recorded, in this order
    random_u: torch.Tensor | None  # [batch, layer, head] float64, the seeded `random` baseline (None: not needed)
    adapter: FamilyAdapter | None = None  # where the model's family keeps W_O (engine.adapters); None: o_proj
    zeroing: DynamicZeroing | StaticZeroing | None = None
    query_block: int | None = None  # force the float32 query-block path with this many queries per block
    kernel: str = "auto"  # one of KERNELS: the Triton kernel on CUDA where installed ("auto"), always, or never
    scores: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [batch, fn, head] float64
    zeroed: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [batch, head] bool
    gram: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [head, d_head, d_head], see head_gram
    # layer -> (raw score names, [name] count of their non-finite values), counted on the device, read once per pass
    nonfinite: dict[int, tuple[tuple[str, ...], torch.Tensor]] = field(default_factory=dict)
    # [batch, roles.N_COLUMNS] positions of the role functions' targets (roles.target_positions); None: none asked
    targets: torch.Tensor | None = None

    def needed(self) -> set[str]:
        """Every function whose value some recorded score or the zeroing rule depends on."""
        wanted = set(self.score_fns)
        if isinstance(self.zeroing, DynamicZeroing):
            wanted.add(self.zeroing.score_fn)
        return wanted


def head_gram(o_proj_weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """G_h = W_O[h]^T W_O[h] for every head: [head, d_head, d_head] float32."""
    w = float_weight(o_proj_weight)  # [width, head * d_head], dequantised when stored in 8 bits
    w = w.view(w.shape[0], n_heads, -1)  # [width, head, d_head]
    return torch.einsum("whd,whe->hde", w, w)  # [head, d_head, d_head]


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[batch, kv_head, seq, d] -> [batch, kv_head * n_rep, seq, d]: query head h reads KV head h // n_rep."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


def _first_weight(q32, k32, scaling, lse, window: int | None = None):
    """A_i0 = exp(z_i0 - lse_i): [batch, head, seq]; exactly 0 for a query that the window keeps from token 0."""
    first_logit = scaling * (q32 * k32[:, :, :1]).sum(-1)  # [batch, head, seq]
    first = torch.exp(first_logit - lse)
    if window is not None:
        first[:, :, window:] = 0.0  # i - 0 >= window: key 0 is outside query i's window
    return first


def _entropy_and_first_weight_fused(q32, k32, scaling, window: int | None = None):
    """Per-query entropy and A_i0 from the log-sum-exp and a fused attention whose values are the keys."""
    if window is None:
        k_mean, lse = _FUSED_CPU(q32, k32, k32, 0.0, True, scale=scaling)  # [batch, head, seq, d], [b, h, seq]
    else:
        k_mean, lse = _windowed_attention(q32, k32, k32, scaling, window)  # the same, over each query's window
    entropy = lse - scaling * (q32 * k_mean).sum(-1)  # [batch, head, seq]
    return entropy, _first_weight(q32, k32, scaling, lse, window)


def window_keys(start: int, stop: int, window: int | None, device) -> tuple[int, torch.Tensor]:
    """(first key, seen [stop - start, stop - first key] bool) for queries start .. stop - 1: the keys a query i
    sees are j <= i with i - j < window (transformers' `sliding_window_overlay`, kv_idx > q_idx - sliding_window,
    AND `causal_mask_function`, kv_idx <= q_idx: `window` keys, the query's own included), or every j <= i
    without a window. Keys before the first key are outside every one of these queries' windows."""
    lo = 0 if window is None else max(0, start - window + 1)
    rows = torch.arange(start, stop, device=device)[:, None]  # [block, 1] query positions
    cols = torch.arange(lo, stop, device=device)  # [key] key positions
    seen = cols <= rows  # [block, key]
    if window is not None:
        seen &= rows - cols < window
    return lo, seen


def _entropy_and_first_weight_blocks(q32, k32, scaling, block_size, window: int | None = None):
    """The same two quantities from explicit float32 softmax rows, `block_size` queries at a time, each block
    over the keys its window reaches ([batch, head, block, block + window - 1] at most with a window)."""
    seq = q32.shape[2]
    entropy = torch.empty(q32.shape[:3], dtype=torch.float32, device=q32.device)  # [batch, head, seq]
    first = torch.empty_like(entropy)  # [batch, head, seq]
    for start in range(0, seq, block_size):
        stop = min(start + block_size, seq)
        lo, seen = window_keys(start, stop, window, q32.device)  # [block, key]
        logits = scaling * q32[:, :, start:stop] @ k32[:, :, lo:stop].transpose(-1, -2)  # [batch, head, block, key]
        log_a = torch.log_softmax(logits.masked_fill(~seen, float("-inf")), dim=-1)  # [batch, head, block, key]
        a = log_a.exp()  # [batch, head, block, key]
        entropy[:, :, start:stop] = -(a * log_a.masked_fill(~seen, 0.0)).sum(-1)  # 0 ln 0 = 0
        first[:, :, start:stop] = a[..., 0] if lo == 0 else 0.0  # key 0 outside the window: A_i0 = 0 exactly
    return entropy, first


def _masked_mean(x: torch.Tensor, valid: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean over the non-padding positions: x [batch, head, seq], valid [batch, seq] -> [batch, head] float64."""
    return (x.double() * valid[:, None, :]).sum(-1) / lengths[:, None]


def _layer_ratio(x: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """x / den with NaN where the denominator is 0 (docs/SCORES.md §2 edge case)."""
    return torch.where(den == 0, torch.nan, x / den)


def layer_scores(
    module,
    query,
    key,
    value,
    attn_output,
    scaling,
    session: ScoringSession,
    lse: torch.Tensor | None = None,
    window: int | None = None,
) -> dict[str, torch.Tensor]:
    """Every needed score of this layer, each [batch, head] float64, from the pre-zeroing output. `lse`
    [batch, head, seq]: the output's float32 log-sum-exp when the fused CPU kernel computed it from float32
    queries and keys; then the first-token weight needs no second attention call unless entropy is needed.
    `window`: the layer's sliding window where the input is longer than it (None: full causal attention)."""
    needed = session.needed()
    raws = raw_statistics(needed)  # the raw statistics they read
    wanted = quantities(raws)  # the per-position quantities those read (score_functions.RAW_STATISTICS)
    seq = query.shape[2]
    lengths = session.lengths.to(query.device)  # [batch]
    valid = (torch.arange(seq, device=query.device) < lengths[:, None]).double()  # [batch, seq]
    per: dict[str, torch.Tensor] = {}  # quantity -> [batch, head, seq]
    if "value_norm" in wanted:
        per["value_norm"] = _value_norms(value, query.shape[1] // key.shape[1])

    if wanted & {"first_weight", "entropy"}:
        q32 = query.float()  # [batch, head, seq, d]
        k32 = _repeat_kv(key.float(), query.shape[1] // key.shape[1])  # [batch, head, seq, d]
        fused = session.query_block is None and query.device.type == "cpu" and _FUSED_CPU is not None
        if fused and lse is not None and "entropy" not in wanted:
            first = _first_weight(q32, k32, scaling, lse, window)  # [batch, head, seq]
            entropy = None
        elif fused:
            entropy, first = _entropy_and_first_weight_fused(q32, k32, scaling, window)
        else:
            block = session.query_block or DEFAULT_BLOCK
            entropy, first = _entropy_and_first_weight_blocks(q32, k32, scaling, block, window)
        if entropy is not None:
            # Query 0 sees only itself: entropy exactly 0, whatever the rounding of lse - z.
            entropy = entropy.clamp_min(0.0)  # [batch, head, seq]
            entropy[:, :, 0] = 0.0
            per["entropy"] = entropy
        per["first_weight"] = first

    o32 = attn_output.float()  # [batch, head, seq, d]
    if "output_norm" in wanted:
        per["output_norm"] = o32.norm(dim=-1)  # [batch, head, seq]
    if "full_output_norm" in wanted:
        gram = _layer_gram(module, session, query.shape[1])  # [head, d, d]
        sq = torch.einsum("bhsd,hde,bhse->bhs", o32, gram, o32)  # [batch, head, seq] = ||o W_O[h]^T||^2
        per["full_output_norm"] = sq.clamp_min(0.0).sqrt()
    if "last_weights" in wanted:
        z = last_query_logits(query, key, scaling, lengths, window)  # [batch, head, seq], -inf where unseen
        per["last_weights"] = torch.softmax(z, dim=-1)  # [batch, head, seq], 0 where unseen
    raw = reduce_raw(per, raws, valid, lengths, session.targets, window)
    return _final_scores(raw, needed, session, module.layer_idx, query.device, per.get("last_weights"))


def last_query_logits(query, key, scaling, lengths, window: int | None = None) -> torch.Tensor:
    """z [batch, head, seq] float32: scale q_{S-1}.k_j of each input's last query (S = its length) against every
    key, -inf at the keys it does not see (later ones, padding, and those outside its sliding `window`). GQA: query
    head h reads KV head h // (heads / kv_heads), read through a view, never a repeated copy."""
    batch, n_heads, seq, d = query.shape
    n_kv = key.shape[1]
    last = (lengths - 1).to(query.device)  # [batch]
    q_last = query.gather(2, last[:, None, None, None].expand(batch, n_heads, 1, d))[:, :, 0].float()  # [b, h, d]
    q_grouped = q_last.view(batch, n_kv, n_heads // n_kv, d)  # [batch, kv_head, rep, d]
    z = torch.einsum("bkrd,bksd->bkrs", q_grouped, key.float()).reshape(batch, n_heads, seq) * scaling
    j = torch.arange(seq, device=query.device)
    seen = j[None, :] <= last[:, None]  # [batch, seq]
    if window is not None:
        seen &= last[:, None] - j[None, :] < window
    return z.masked_fill(~seen[:, None, :], float("-inf"))  # [batch, head, seq]


def reduce_raw(
    per: dict[str, torch.Tensor],
    raws,
    valid: torch.Tensor,
    lengths: torch.Tensor,
    targets: torch.Tensor | None = None,
    window: int | None = None,
) -> dict:
    """Each raw statistic of `raws` [batch, head] float64 from the per-position quantities `per` ([batch, head, seq]
    each), as its record says (score_functions.RAW_STATISTICS): the mean over the input's positions, its last
    position, position 0, the mean over its first `first_t` positions, or the mean over its role target's positions (`targets`, roles.target_positions; NaN
    where undefined or outside the layer's sliding `window`). `valid` [batch, seq]: the positions that are not
    padding; `lengths` [batch]."""
    out = {}
    for name in RAW_IDS:  # the registry's order
        if name not in raws:
            continue
        stat = RAW_STATISTICS[name]
        x = per[stat.quantity]
        if stat.reduce is Reduce.TARGET:
            assert targets is not None and stat.target is not None  # scoring_pass finds them whenever asked for
            out[name] = target_weights(x, targets, stat.target, lengths - 1, window)
        elif stat.reduce is Reduce.MEAN:
            out[name] = _masked_mean(x, valid, lengths)
        elif stat.reduce is Reduce.HEAD:  # the first `first_t` positions (Gu's T): a shorter input's all
            assert stat.first_t is not None  # every HEAD record names its T
            first_t = torch.arange(valid.shape[1], device=valid.device) < stat.first_t  # [seq]
            out[name] = _masked_mean(x, valid * first_t, lengths.clamp(max=stat.first_t))
        elif stat.reduce is Reduce.LAST:
            last = (lengths - 1)[:, None, None].expand(x.shape[0], x.shape[1], 1)  # [batch, head, 1]
            out[name] = x.gather(2, last)[..., 0].double()
        else:
            out[name] = x[:, :, 0].double()
    return out


def _layer_gram(module, session: ScoringSession, n_heads: int) -> torch.Tensor:
    """This layer's [head, d_head, d_head] Gram matrices, cached for the session (its weights do not change)."""
    if module.layer_idx not in session.gram:
        w_o = session.adapter.output_weight(module) if session.adapter else module.o_proj.weight  # [width, h*d]
        session.gram[module.layer_idx] = head_gram(w_o, n_heads)
    return session.gram[module.layer_idx]


def _value_norms(value: torch.Tensor, n_rep: int) -> torch.Tensor:
    """The norm of each key's value vector, per query head [batch, head, seq] (the KV heads' norms, repeated)."""
    return _repeat_kv(value.float().norm(dim=-1, keepdim=True), n_rep)[..., 0]


def _final_scores(
    raw: dict, needed: set[str], session: ScoringSession, layer: int, device, last_weights: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Every needed function [batch, head] float64 from the raw per-head scores, as its registry record says
    (score_functions.SCORE_FUNCTIONS: the raw statistic, divided by its layer mean or its head's own; the random
    baseline).
    The raw scores' non-finite values are counted (`session.nonfinite`): finite activations give finite raw
    scores, so a NaN there is an overflow or a broken model, never the documented NaN of a ratio's zero
    denominator, and `scoring_pass` refuses the pass rather than count such a head as active. The role functions are
    NaN by definition where their target is undefined: for them the last query's attention row `last_weights`
    [batch, head, seq] (0 where unseen, never NaN) is counted instead."""
    checked = {n: x for n, x in raw.items() if RAW_STATISTICS[n].reduce is not Reduce.TARGET}
    if last_weights is not None:
        checked["the last query's attention"] = last_weights
    if checked:
        names = tuple(checked)
        session.nonfinite[layer] = (names, torch.stack([(~torch.isfinite(checked[n])).sum() for n in names]))
    out: dict[str, torch.Tensor] = {}
    for fn in needed:
        f = SCORE_FUNCTIONS[fn]
        if f.raw is None:  # the random baseline
            assert session.random_u is not None  # drawn whenever `random` is asked for
            out[fn] = session.random_u[:, layer].to(device, torch.float64)  # [batch, head]
        elif f.normaliser is Normaliser.LAYER:
            out[fn] = _layer_ratio(raw[f.raw], raw[f.by].mean(-1, keepdim=True))  # [batch, head]
        elif f.normaliser is Normaliser.HEAD:
            out[fn] = _layer_ratio(raw[f.raw], raw[f.by])  # [batch, head]
        else:
            out[fn] = raw[fn]
    return out


def triton_layer_scores(
    module, query, key, value, scaling, session: ScoringSession, window: int | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(attn_output [batch, seq, head, d], every needed score [batch, head] float64) from one Triton kernel that
    returns the output with its per-query statistics (engine/triton_attention.py), then one masked mean of them.
    `window`: the layer's sliding window (None: full causal attention)."""
    from dormant_tasks.engine import triton_attention as tri  # Triton is imported only where its kernel runs

    needed = session.needed()
    raws = raw_statistics(needed)  # the raw statistics they read
    wanted = quantities(raws)  # the per-position quantities those read (score_functions.RAW_STATISTICS)
    n_heads, seq = query.shape[1], query.shape[2]
    lengths = session.lengths.to(query.device)  # [batch]
    valid = (torch.arange(seq, device=query.device) < lengths[:, None]).double()  # [batch, seq]
    gram = _layer_gram(module, session, n_heads) if "full_output_norm" in wanted else None
    out, stats = tri.attention_with_stats(
        query,
        key,
        value,
        scaling,
        entropy="entropy" in wanted,
        first_weight="first_weight" in wanted,
        norm="output_norm" in wanted,
        gram=gram,
        window=window,
        lse="last_weights" in wanted,
    )  # [batch, seq, head, d], [batch, head, N_STATS, seq]
    per = {q: stats[:, :, tri.STATS[q]] for q in wanted if q in tri.STATS}  # quantity -> [batch, head, seq]
    if "value_norm" in wanted:
        per["value_norm"] = _value_norms(value, n_heads // key.shape[1])
    if "last_weights" in wanted:  # A = exp(z - lse) at the last query, the kernel's log-sum-exp its normaliser
        last = (lengths - 1)[:, None, None].expand(query.shape[0], n_heads, 1)  # [batch, head, 1]
        lse_last = stats[:, :, tri.STAT_LSE].gather(2, last)  # [batch, head, 1]
        per["last_weights"] = torch.exp(last_query_logits(query, key, scaling, lengths, window) - lse_last)
    raw = reduce_raw(per, raws, valid, lengths, session.targets, window)
    return out, _final_scores(raw, needed, session, module.layer_idx, query.device, per.get("last_weights"))


def _use_triton(session: ScoringSession, query: torch.Tensor) -> bool:
    """Whether this layer runs the Triton kernel: `kernel="triton"` always (ScoringError where it cannot), "auto" on
    CUDA when Triton is installed (compiled, not interpreted) and no query block is forced, "torch" never. Triton
    (0.2 s and 70 modules to import) is imported only here, where the kernel may run: never on a CPU run's "auto"."""
    if session.kernel == "torch" or (session.kernel == "auto" and session.query_block is not None):
        return False
    if session.kernel == "auto" and query.device.type != "cuda":
        return False
    from dormant_tasks.engine import triton_attention as tri

    reason = tri.unavailable_reason(query)
    if session.kernel == "triton":
        if reason is not None:
            raise ScoringError(f"the Triton score kernel cannot run here: {reason}")
        return True
    return reason is None and query.device.type == "cuda" and not tri.INTERPRETED


def _zero_mask(session: ScoringSession, layer: int, scores: dict[str, torch.Tensor], shape, device) -> torch.Tensor:
    """[batch, head] bool: which heads of this layer are zeroed for which input."""
    zeroing = session.zeroing
    if isinstance(zeroing, DynamicZeroing):
        direction = get_score_function(zeroing.score_fn).direction
        return is_inactive(scores[zeroing.score_fn], zeroing.tau, direction)  # NaN is never inactive
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    if isinstance(zeroing, StaticZeroing):
        for zl, zh in zeroing.heads:
            if zl == layer:
                mask[:, zh] = True
    return mask


def _layer_window(module, seq: int, kwargs) -> int | None:
    """The sliding window this layer applies to an input of `seq` positions, or None where every query sees all
    earlier tokens anyway (no window, or seq <= window: the full causal path, unchanged). The layer's own
    `sliding_window` argument decides, as it does in transformers' flash attention; its mask (built from the
    config) applies the same window on the eager and sdpa paths."""
    window = kwargs.get("sliding_window")
    if window is None:
        return None
    if int(window) < 1:
        raise ScoringError(f"{type(module).__name__} passes sliding_window={window}; a window must be at least 1 token")
    return int(window) if seq > int(window) else None


def _refuse_unimplemented(module, kwargs) -> None:
    """ScoringError (one line) when the layer asks for attention the engine does not compute."""
    name = type(module).__name__
    if kwargs.get("softcap") is not None:
        raise ScoringError(f"{name} uses attention logit soft-capping, which the score engine does not implement")
    if kwargs.get("s_aux") is not None:
        raise ScoringError(f"{name} uses attention sinks (s_aux), which the score engine does not implement")


def scoring_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, dormant_session=None, **kwargs
):
    """AttentionInterface function: (attn_output [batch, query, head, d_head], None) plus the session's scores.

    query [batch, head, seq, d]; key, value [batch, kv_head, seq, d] (GQA repeat happens here).
    """
    session: ScoringSession | None = dormant_session
    if session is None:
        raise ScoringError(
            f"the {ATTENTION_NAME!r} attention ran outside dormant_tasks.engine.scoring.scoring_pass; "
            "call scoring_pass/score_texts instead of the model directly"
        )
    _refuse_unimplemented(module, kwargs)
    if scaling is None:  # transformers before 5.4 left it out for GPT-2; the engine does not guess a layer's rule
        raise ScoringError(
            f"{type(module).__name__} does not pass its attention scaling to AttentionInterface; upgrade "
            "transformers (>= 5.4)"
        )
    if query.shape[2] != key.shape[2]:
        raise ScoringError("the score engine scores whole inputs in one pass; call the model without a KV cache")
    window = _layer_window(module, query.shape[2], kwargs)
    if _use_triton(session, query):
        out, scores = triton_layer_scores(module, query, key, value, scaling, session, window)  # [b, s, h, d]
    else:
        attn_output = _torch_attention(query, key, value, scaling, window, session.query_block or DEFAULT_BLOCK)
        scores = layer_scores(module, query, key, value, attn_output[0], scaling, session, attn_output[1], window)
        out = attn_output[0].transpose(1, 2)  # [batch, seq, head, d]
    layer = module.layer_idx
    batch, n_heads = query.shape[:2]
    session.scores[layer] = (
        torch.stack([scores[fn] for fn in session.score_fns], dim=1)
        if session.score_fns
        else query.new_zeros((batch, 0, n_heads), dtype=torch.float64)
    )  # [batch, fn, head]
    zero = _zero_mask(session, layer, scores, (batch, n_heads), query.device)  # [batch, head]
    session.zeroed[layer] = zero
    if zero.any():
        out = out.masked_fill(zero[:, None, :, None], 0.0)  # [batch, seq, head, d]
    return out.contiguous(), None  # [batch, seq, head, d]


def _torch_attention(
    query, key, value, scaling, window: int | None = None, block_size: int = DEFAULT_BLOCK
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(attn_output [batch, head, seq, d], its float32 log-sum-exp [batch, head, seq] or None) from torch's fused
    kernels, K/V repeated per query head; with a `window`, a query block at a time over the window's keys."""
    n_rep = query.shape[1] // key.shape[1]
    k = _repeat_kv(key, n_rep)  # [batch, head, seq, d]
    v = _repeat_kv(value, n_rep)  # [batch, head, seq, d]
    if window is not None:
        attn_output, lse = _windowed_attention(query, k, v, scaling, window, block_size)
        return attn_output, lse if query.dtype == torch.float32 else None
    if query.device.type == "cpu" and _FUSED_CPU is not None:
        attn_output, lse = _FUSED_CPU(query, k, v, 0.0, True, scale=scaling)  # [batch, head, seq, d], [b, h, seq]
        # scores are float32 whatever the model dtype: a lower-precision lse came from lower-precision q, k
        return attn_output, lse if query.dtype == torch.float32 else None
    attn_output = torch.nn.functional.scaled_dot_product_attention(query, k, v, is_causal=True, scale=scaling)
    return attn_output, None


def _windowed_attention(
    q, k, v, scaling, window: int, block_size: int = DEFAULT_BLOCK
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sliding-window causal attention, q, k, v [batch, head, seq, d] (K/V already per query head):
    (out [batch, head, seq, d], log-sum-exp [batch, head, seq] float32 on CPU, else None). Neither fused kernel
    takes a window, so each block of `block_size` queries attends to the keys its window reaches
    (`window_keys`) under a mask [block, block + window - 1] at most: never the seq x seq matrix, and the work
    grows with seq x (window + block), not seq^2. On CPU the fused kernel takes the mask as an additive one (0 or
    -inf in the queries' dtype) and returns the log-sum-exp; elsewhere sdpa takes it as a boolean mask."""
    seq = q.shape[2]
    out = torch.empty_like(q)  # [batch, head, seq, d]
    cpu = q.device.type == "cpu" and _FUSED_CPU is not None
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if cpu else None  # [batch, head, seq]
    for start in range(0, seq, block_size):
        stop = min(start + block_size, seq)
        lo, seen = window_keys(start, stop, window, q.device)  # [block, key]
        qb, kb, vb = q[:, :, start:stop], k[:, :, lo:stop], v[:, :, lo:stop]
        if cpu:
            bias = torch.zeros(seen.shape, dtype=q.dtype, device=q.device).masked_fill(~seen, float("-inf"))
            out[:, :, start:stop], block_lse = _FUSED_CPU(qb, kb, vb, 0.0, False, attn_mask=bias, scale=scaling)
            lse[:, :, start:stop] = block_lse  # type: ignore[index]  # allocated above on CPU
        else:
            out[:, :, start:stop] = torch.nn.functional.scaled_dot_product_attention(
                qb, kb, vb, attn_mask=seen, scale=scaling
            )
    return out, lse


def random_baseline(seed: int, input_indices, n_layers: int, n_heads: int) -> np.ndarray:
    """u ~ U(0,1) [input, layer, head], each input from its own generator seeded by (seed, input_index)."""
    return np.stack([np.random.default_rng([seed, int(i)]).random((n_layers, n_heads)) for i in input_indices])


__all__ = [
    "ATTENTION_NAME",
    "DynamicZeroing",
    "ScoringSession",
    "StaticZeroing",
    "head_gram",
    "layer_scores",
    "random_baseline",
    "scoring_attention",
]
