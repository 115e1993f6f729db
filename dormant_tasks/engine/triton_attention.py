"""One Triton kernel for a layer's causal attention output AND the per-query statistics the scores need.

`attention_with_stats(query, key, value, scaling, ...)` -> (out [batch, seq, head, d] in the query's dtype,
stats [batch, head, N_STATS, seq] float32). Each program takes BLOCK_M queries of one (input, head) and walks the keys
up to the diagonal, BLOCK_N at a time, with an online softmax in float32 (docs/SCORES.md §2, "GPU kernel").
Per query i, with z_ij = scale q_i.k_j (j <= i), a running maximum m_i, l_i = sum_j exp(z_ij - m_i) and
t_i = sum_j exp(z_ij - m_i) (z_ij - m_i), all rescaled when m_i grows:
- o_i = sum_j exp(z_ij - m_i) v_j / l_i, stored in the model's dtype and in the layout the model wants next;
- STAT_ENTROPY: -sum_j A_ij ln A_ij = ln l_i - t_i / l_i (no cancellation against m_i: t is taken relative to it),
  0 for query 0 (it sees only itself) and never below 0;
- STAT_FIRST: A_i0 = exp(z_i0 - m_i - ln l_i);
- STAT_NORM: ||o_i|| of the output as stored (what the output projection receives);
- STAT_FULL_NORM: ||o_i W_O[h]^T|| = sqrt(o_i G_h o_i^T) from the head's Gram matrix G_h = W_O[h]^T W_O[h];
- STAT_LSE: the log-sum-exp m_i + ln l_i, so that any one weight is A_ij = exp(z_ij - lse_i): the head-role
  functions read the last query's weights at their targets this way (`attention.triton_layer_scores`).
Sliding window (`window`, WINDOWED): query i sees keys i - window < j <= i (transformers' `sliding_window_overlay`
AND `causal_mask_function`); the key loop starts at the first block that holds a key of the query block's first
window, and STAT_FIRST is exactly 0 for i >= window (key 0 is outside the window, its block maybe never read).
GQA: query head h reads KV head h // (heads / kv_heads) through its strides, never a repeated copy. Right padding
needs nothing here: causal queries never see later (padding) keys; the means over real queries are taken by the
caller. Rows of `stats` not asked for are left unset.

CUDA tensors run the compiled kernel; with TRITON_INTERPRET=1 set before the process starts, CPU tensors run the
very same kernel through Triton's interpreter (slow: the tests and small checks only). Triton is the optional extra `dormant-heads[gpu]`; `unavailable_reason()` says why
it cannot be used where it cannot.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the optional extra is not installed: the engine keeps its torch paths
    triton = None
# Triton decorates its own language helpers (tl.sum, tl.zeros...) for the interpreter only when TRITON_INTERPRET=1
# is set before it is imported, so the mode is fixed for the process: interpreted (any device) or compiled (CUDA).
INTERPRETED = triton is not None and bool(triton.knobs.runtime.interpret)

STAT_ENTROPY, STAT_FIRST, STAT_NORM, STAT_FULL_NORM, STAT_LSE = range(5)
# The kernel's statistics by the per-position quantity they are (engine.score_functions.RAW_STATISTICS)
STATS = {
    "entropy": STAT_ENTROPY,
    "first_weight": STAT_FIRST,
    "output_norm": STAT_NORM,
    "full_output_norm": STAT_FULL_NORM,
}
N_STATS = 5
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_HEAD_DIM = 256


def unavailable_reason(query: torch.Tensor) -> str | None:
    """None when the kernel can run on these queries, else why not (one phrase)."""
    if triton is None:
        return "Triton is not installed (pip install 'dormant-heads[gpu]')"
    if query.device.type == "cpu" and not INTERPRETED:
        return "the Triton kernel runs on CPU tensors only in Triton's interpreter (TRITON_INTERPRET=1 before start)"
    if query.device.type not in ("cuda", "cpu"):
        return f"the Triton kernel runs on CUDA (or in Triton's interpreter on CPU), not {query.device.type}"
    if query.dtype not in KERNEL_DTYPES:
        return f"the Triton kernel takes float32, bfloat16 or float16 queries, not {query.dtype}"
    if query.shape[-1] > MAX_HEAD_DIM:
        return f"the Triton kernel takes head dimensions up to {MAX_HEAD_DIM}, not {query.shape[-1]}"
    return None


if triton is not None:

    def _attention_stats_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        o_ptr,
        stats_ptr,
        gram_ptr,
        seq,
        n_heads,
        n_rep,
        scale,
        window,
        sq_b,
        sq_h,
        sq_s,
        sq_d,
        sk_b,
        sk_h,
        sk_s,
        sk_d,
        sv_b,
        sv_h,
        sv_s,
        sv_d,
        so_b,
        so_h,
        so_s,
        so_d,
        st_b,
        st_h,
        st_k,
        st_s,
        HEAD_DIM: tl.constexpr,
        D_PAD: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        ENTROPY: tl.constexpr,
        FIRST: tl.constexpr,
        NORM: tl.constexpr,
        FULL_NORM: tl.constexpr,
        LSE: tl.constexpr,
        IEEE: tl.constexpr,
        UPCAST: tl.constexpr,
        WINDOWED: tl.constexpr,
    ):
        block = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // n_heads
        h = bh % n_heads
        kv = h // n_rep  # GQA: the KV head this query head reads
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # [M] query positions
        dims = tl.arange(0, D_PAD)  # [D]
        row_ok = rows < seq
        dim_ok = dims < HEAD_DIM
        q = tl.load(
            q_ptr + b * sq_b + h * sq_h + rows[:, None] * sq_s + dims[None, :] * sq_d,
            mask=row_ok[:, None] & dim_ok[None, :],
            other=0.0,
        )  # [M, D] model dtype
        if UPCAST:
            q = q.to(tl.float32)
        # A finite start for the running maximum: the first block's rescale factor is then exp(-huge) = 0, never
        # the NaN of (-inf) * 0. A row that sees no key of a block (only with a window) keeps m = -1e30 and adds
        # exp(-inf) = 0 everywhere; every row sees its own key, so m is a real logit by its diagonal block.
        m = tl.full([BLOCK_M], -1.0e30, tl.float32)  # [M] running max of z
        l_sum = tl.zeros([BLOCK_M], tl.float32)  # [M] sum_j exp(z_ij - m_i)
        t_sum = tl.zeros([BLOCK_M], tl.float32)  # [M] sum_j exp(z_ij - m_i) (z_ij - m_i)
        z0 = tl.zeros([BLOCK_M], tl.float32)  # [M] z_i0
        acc = tl.zeros([BLOCK_M, D_PAD], tl.float32)  # [M, D] sum_j exp(z_ij - m_i) v_j
        stop = tl.minimum(seq, (block + 1) * BLOCK_M)  # causal: no key past the block's last query
        lo = 0
        if WINDOWED:  # key blocks wholly before the first query's window are skipped (row i sees j > i - window)
            lo = tl.maximum(block * BLOCK_M - window + 1, 0) // BLOCK_N * BLOCK_N
        for start in range(lo, stop, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)  # [N] key positions
            col_ok = cols < seq
            k_t = tl.load(
                k_ptr + b * sk_b + kv * sk_h + cols[None, :] * sk_s + dims[:, None] * sk_d,
                mask=col_ok[None, :] & dim_ok[:, None],
                other=0.0,
            )  # [D, N]
            if UPCAST:
                k_t = k_t.to(tl.float32)
            if IEEE:  # float32 models: full float32 products (no TF32), as the oracle computes them
                z = tl.dot(q, k_t, input_precision="ieee") * scale  # [M, N]
            else:  # 16-bit inputs: their products are exact in the float32 accumulator
                z = tl.dot(q, k_t) * scale  # [M, N]
            seen = (cols[None, :] <= rows[:, None]) & col_ok[None, :]  # [M, N]
            if WINDOWED:  # (rows past the input keep every key: never stored, and never a sum of nothing)
                seen = seen & ((rows[:, None] - cols[None, :] < window) | ~row_ok[:, None])
            z = tl.where(seen, z, float("-inf"))
            if FIRST:
                z0 += tl.sum(tl.where(cols[None, :] == 0, z, 0.0), 1)
            m_new = tl.maximum(m, tl.max(z, 1))  # [M]
            alpha = tl.exp(m - m_new)  # [M] rescales what was summed against the old maximum
            p = tl.exp(z - m_new[:, None])  # [M, N], 0 where unseen
            if ENTROPY:
                # sum p (z - m_new) over the old keys = alpha (t + (m - m_new) l); unseen keys add 0, not 0 * -inf
                z_rel = tl.where(seen, z - m_new[:, None], 0.0)  # [M, N]
                t_sum = alpha * (t_sum + (m - m_new) * l_sum) + tl.sum(p * z_rel, 1)
            l_sum = alpha * l_sum + tl.sum(p, 1)
            v = tl.load(
                v_ptr + b * sv_b + kv * sv_h + cols[:, None] * sv_s + dims[None, :] * sv_d,
                mask=col_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )  # [N, D] model dtype
            if IEEE:
                pv = tl.dot(p, v, input_precision="ieee")  # [M, D]
            else:
                # 16-bit values: the float32 weights as the sum of two 16-bit terms, two tensor-core products,
                # so the weights keep ~16 significant bits instead of the 8 of one bfloat16 rounding
                p_hi = p.to(v.dtype)
                p_lo = (p - p_hi.to(tl.float32)).to(v.dtype)
                if UPCAST:  # the same values and float32 accumulation as the two products below
                    v = v.to(tl.float32)
                    pv = tl.dot(p_hi.to(tl.float32), v) + tl.dot(p_lo.to(tl.float32), v)
                else:
                    pv = tl.dot(p_hi, v) + tl.dot(p_lo, v)
            acc = acc * alpha[:, None] + pv
            m = m_new
        log_l = tl.log(l_sum)  # [M]
        out = (acc / l_sum[:, None]).to(o_ptr.dtype.element_ty)  # [M, D] model dtype
        tl.store(
            o_ptr + b * so_b + h * so_h + rows[:, None] * so_s + dims[None, :] * so_d,
            out,
            mask=row_ok[:, None] & dim_ok[None, :],
        )
        st = stats_ptr + b * st_b + h * st_h + rows * st_s  # [M] pointers to statistic 0
        if ENTROPY:
            entropy = tl.maximum(log_l - t_sum / l_sum, 0.0)  # [M]
            tl.store(st + 0 * st_k, tl.where(rows == 0, 0.0, entropy), mask=row_ok)
        if LSE:
            tl.store(st + 4 * st_k, m + log_l, mask=row_ok)
        if FIRST:
            first = tl.exp(z0 - m - log_l)  # [M]
            if WINDOWED:  # key 0 outside the window (its block may not even have been read): exactly 0
                first = tl.where(rows < window, first, 0.0)
            tl.store(st + 1 * st_k, first, mask=row_ok)
        o32 = out.to(tl.float32)  # [M, D] the output as the next layer reads it
        if NORM:
            tl.store(st + 2 * st_k, tl.sqrt(tl.sum(o32 * o32, 1)), mask=row_ok)
        if FULL_NORM:
            g = tl.load(
                gram_ptr + h * HEAD_DIM * HEAD_DIM + dims[:, None] * HEAD_DIM + dims[None, :],
                mask=dim_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )  # [D, D] float32 G_h
            sq = tl.sum(tl.dot(o32, g, input_precision="ieee") * o32, 1)  # [M] o G_h o^T
            tl.store(st + 3 * st_k, tl.sqrt(tl.maximum(sq, 0.0)), mask=row_ok)

    _kernel = triton.jit(_attention_stats_kernel)  # an interpreted function under TRITON_INTERPRET=1


def _blocks(seq: int, head_dim: int, device: torch.device) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N). On CUDA 64 x 64 tiles keep q, k, v and the float32 accumulator of a 128-wide head in
    shared memory and registers with 4 warps; 256-wide heads take 32 x 32. The interpreter runs one numpy step per
    tile, so there the tiles cover a short input whole."""
    if device.type == "cpu":
        size = max(16, min(64, triton.next_power_of_2(seq)))
        return size, size
    return (64, 64) if head_dim <= 128 else (32, 32)


def attention_with_stats(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scaling: float,
    *,
    entropy: bool = False,
    first_weight: bool = False,
    norm: bool = False,
    gram: torch.Tensor | None = None,
    blocks: tuple[int, int] | None = None,
    window: int | None = None,
    lse: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of query [batch, head, seq, d] over key, value [batch, kv_head, seq, d]; with `window`,
    sliding-window causal attention (query i sees keys i - window < j <= i).

    Returns (out [batch, seq, head, d] in the query's dtype, stats [batch, head, N_STATS, seq] float32) with the rows
    STAT_ENTROPY, STAT_FIRST, STAT_NORM, STAT_LSE asked for and STAT_FULL_NORM when `gram` ([head, d, d] float32) is
    given.
    `blocks` (BLOCK_M, BLOCK_N), powers of two >= 16, overrides the tile sizes (tests use it to cross blocks)."""
    reason = unavailable_reason(query)
    if reason is not None:
        raise RuntimeError(reason)
    batch, n_heads, seq, head_dim = query.shape
    n_kv = key.shape[1]
    out = torch.empty((batch, seq, n_heads, head_dim), dtype=query.dtype, device=query.device)  # [b, s, h, d]
    stats = torch.empty((batch, n_heads, N_STATS, seq), dtype=torch.float32, device=query.device)  # [b, h, 5, s]
    if gram is not None:
        gram = gram.to(device=query.device, dtype=torch.float32).contiguous()  # [head, d, d]
    block_m, block_n = blocks or _blocks(seq, head_dim, query.device)
    grid = (triton.cdiv(seq, block_m), batch * n_heads)
    _kernel[grid](
        query,
        key,
        value,
        out,
        stats,
        stats if gram is None else gram,  # never read without FULL_NORM
        seq,
        n_heads,
        n_heads // n_kv,
        float(scaling),
        int(window or 0),  # never read without WINDOWED
        *query.stride(),
        *key.stride(),
        *value.stride(),
        out.stride(0),
        out.stride(2),
        out.stride(1),
        out.stride(3),
        *stats.stride(),
        HEAD_DIM=head_dim,
        D_PAD=max(16, triton.next_power_of_2(head_dim)),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        ENTROPY=entropy,
        FIRST=first_weight,
        NORM=norm,
        FULL_NORM=gram is not None,
        LSE=lse,
        IEEE=query.dtype == torch.float32,
        # Triton 3.9's interpreter multiplies bfloat16 dot operands as their raw 16-bit patterns: it gets them
        # in float32, which holds every bfloat16 value and product exactly (the GPU accumulates in float32 too).
        UPCAST=INTERPRETED and query.dtype == torch.bfloat16,
        WINDOWED=window is not None,
    )
    return out, stats


__all__ = [
    "N_STATS",
    "STATS",
    "STAT_ENTROPY",
    "STAT_FIRST",
    "STAT_FULL_NORM",
    "STAT_LSE",
    "STAT_NORM",
    "attention_with_stats",
    "unavailable_reason",
]
