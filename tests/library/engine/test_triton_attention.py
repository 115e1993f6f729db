"""The Triton score kernel (dormant_tasks/engine/triton_attention.py) against brute force and the oracle.

On CPU the kernel runs in Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before triton is
imported), so the shapes are tiny; with DORMANT_TEST_DEVICE=cuda the same tests run the compiled kernel
(benchmarks/gpu_check.sh). Without Triton (the optional extra `dormant-heads[gpu]`) every test here skips.
Tolerances are those of tests/builders/oracle.py: float32 1e-5, bfloat16 0.03 (relative).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install 'dormant-heads[gpu]' (make test does)")


from dormant_tasks.engine import attention  # noqa: E402
from dormant_tasks.engine import triton_attention as tri  # noqa: E402
from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS  # noqa: E402
from dormant_tasks.engine.scoring import DynamicZeroing, score_texts, scoring_pass  # noqa: E402
from dormant_tasks.errors import ScoringError  # noqa: E402
from dormant_tasks.tracking.calibration import DEMO_CORPUS  # noqa: E402
from tests.builders.families import make_model  # noqa: E402
from tests.builders.oracle import DTYPES, assert_scores_close, oracle_dynamic, oracle_run  # noqa: E402

SWEEP_FNS = ("ahon_ln", "lthon_ln", "awft")  # the intervention sweep's functions
MAX_TOKENS = 48  # the interpreter takes ~10 ms per tile step: inputs of one 64-query tile keep the file fast


def ids_of(tokenizer, text, device="cpu", n=MAX_TOKENS) -> torch.Tensor:
    """[1, seq]: the text's first `n` tokens."""
    return torch.tensor([tokenizer(text)["input_ids"][:n]], device=device)


@pytest.fixture(scope="module")
def texts():
    return [line for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()][:40]


def brute_force(q, k, v, scale, gram, window=None):
    """Float64 causal attention from the definitions: (o [b, s, h, d], entropy, A_i0, ||o_i||, ||o_i W_O^T||);
    with `window`, query i sees keys i - window < j <= i (transformers' sliding_window_overlay)."""
    n_rep = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.double().repeat_interleave(n_rep, 1), v.double().repeat_interleave(n_rep, 1)
    seq = q.shape[2]
    i, j = torch.arange(seq)[:, None], torch.arange(seq)
    unseen = (j > i) | (i - j >= window if window is not None else False)  # [s, s]
    z = (scale * q @ k.transpose(-1, -2)).masked_fill(unseen, -torch.inf)
    a = z.softmax(-1)  # [b, h, s, s]
    o = a @ v  # [b, h, s, d]
    full = torch.einsum("bhsd,hde,bhse->bhs", o, gram.double(), o).sqrt()
    return o.transpose(1, 2), -torch.special.xlogy(a, a).sum(-1), a[..., 0], o.norm(dim=-1), full


# (batch, heads, kv heads, seq, head dim, tiles): MHA, GQA 2 and 1 KV head, tiles smaller than the input (several
# query blocks, key blocks past some rows' diagonal, a ragged tail), a padded head dim (80 -> 128)
SHAPES = [(2, 4, 4, 50, 16, (16, 16)), (2, 4, 2, 37, 32, None), (1, 4, 1, 64, 16, (32, 16)), (1, 2, 1, 20, 80, None)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"b{s[0]}h{s[1]}kv{s[2]}s{s[3]}d{s[4]}")
def test_kernel_matches_brute_force(shape, dtype, torch_device):
    torch_dtype, _ = DTYPES[dtype]
    batch, heads, kv, seq, d, tiles = shape
    gen = torch.Generator().manual_seed(seq)
    # [b, s, h, d] transposed, as the model hands queries over: the kernel reads strides, not a contiguous copy
    q = (2 * torch.randn(batch, seq, heads, d, generator=gen)).to(torch_device, torch_dtype).transpose(1, 2)
    k = (2 * torch.randn(batch, kv, seq, d, generator=gen)).to(torch_device, torch_dtype)
    v = torch.randn(batch, kv, seq, d, generator=gen).to(torch_device, torch_dtype)
    w = torch.randn(heads, d, d, generator=gen)
    gram = (w @ w.transpose(-1, -2)).to(torch_device)  # [h, d, d] positive semi-definite
    out, stats = tri.attention_with_stats(
        q, k, v, d**-0.5, entropy=True, first_weight=True, norm=True, gram=gram, blocks=tiles
    )
    assert out.shape == (batch, seq, heads, d) and out.dtype == torch_dtype and stats.dtype == torch.float32
    o, entropy, first, norm, full = (x.cpu() for x in brute_force(q.cpu(), k.cpu(), v.cpu(), d**-0.5, gram.cpu()))
    stats = stats.cpu().double()
    if torch_dtype is torch.float32:
        torch.testing.assert_close(out.cpu().double(), o, rtol=1e-5, atol=1e-5)
        out_tol = dict(rtol=1e-5, atol=1e-6)
    else:  # the output is rounded to bfloat16 (eps 2^-8)
        torch.testing.assert_close(out.cpu().double(), o, rtol=0.03, atol=0.03)
        out_tol = dict(rtol=0.03, atol=1e-3)
    # entropy and A_i0 come from the float32 statistics, whatever the inputs' dtype (they are exact in float32)
    torch.testing.assert_close(stats[:, :, tri.STAT_ENTROPY], entropy, rtol=1e-5, atol=2e-5)
    assert (stats[:, :, tri.STAT_ENTROPY, 0] == 0).all()  # query 0 sees only itself
    torch.testing.assert_close(stats[:, :, tri.STAT_FIRST], first, rtol=1e-5, atol=1e-7)
    # the norms are those of the output as stored, i.e. as the output projection receives it
    stored = out.cpu().double().transpose(1, 2)  # [b, h, s, d]
    torch.testing.assert_close(stats[:, :, tri.STAT_NORM], stored.norm(dim=-1), rtol=1e-5, atol=1e-6)
    want_full = torch.einsum("bhsd,hde,bhse->bhs", stored, gram.cpu().double(), stored).sqrt()
    torch.testing.assert_close(stats[:, :, tri.STAT_FULL_NORM], want_full, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(stats[:, :, tri.STAT_NORM], norm, **out_tol)
    torch.testing.assert_close(stats[:, :, tri.STAT_FULL_NORM], full, **out_tol)


# (window, tiles): a window of 1 (each query sees itself), windows shorter and longer than a key tile (key blocks
# wholly outside the window are skipped), one longer than the input (no key masked)
WINDOWS = [(1, (16, 16)), (5, (16, 16)), (23, (16, 32)), (9, None), (60, (16, 16))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window,tiles", WINDOWS)
def test_windowed_kernel_matches_brute_force(window, tiles, dtype, torch_device):
    torch_dtype, _ = DTYPES[dtype]
    batch, heads, kv, seq, d = 2, 4, 2, 50, 16
    gen = torch.Generator().manual_seed(window)
    q = (2 * torch.randn(batch, seq, heads, d, generator=gen)).to(torch_device, torch_dtype).transpose(1, 2)
    k = (2 * torch.randn(batch, kv, seq, d, generator=gen)).to(torch_device, torch_dtype)
    v = torch.randn(batch, kv, seq, d, generator=gen).to(torch_device, torch_dtype)
    w = torch.randn(heads, d, d, generator=gen)
    gram = (w @ w.transpose(-1, -2)).to(torch_device)  # [h, d, d]
    out, stats = tri.attention_with_stats(
        q, k, v, d**-0.5, entropy=True, first_weight=True, norm=True, gram=gram, blocks=tiles, window=window
    )
    o, entropy, first, _, _ = brute_force(q.cpu(), k.cpu(), v.cpu(), d**-0.5, gram.cpu(), window)
    stats = stats.cpu().double()
    tol = dict(rtol=1e-5, atol=1e-5) if torch_dtype is torch.float32 else dict(rtol=0.03, atol=0.03)
    torch.testing.assert_close(out.cpu().double(), o, **tol)
    torch.testing.assert_close(stats[:, :, tri.STAT_ENTROPY], entropy, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(stats[:, :, tri.STAT_FIRST], first, rtol=1e-5, atol=1e-7)
    assert (stats[:, :, tri.STAT_FIRST, window:] == 0).all()  # key 0 outside the window: exactly 0
    if window == 1:
        assert (stats[:, :, tri.STAT_ENTROPY] == 0).all()  # each query sees only itself
    stored = out.cpu().double().transpose(1, 2)  # [b, h, s, d]
    torch.testing.assert_close(stats[:, :, tri.STAT_NORM], stored.norm(dim=-1), rtol=1e-5, atol=1e-6)
    want_full = torch.einsum("bhsd,hde,bhse->bhs", stored, gram.cpu().double(), stored).sqrt()
    torch.testing.assert_close(stats[:, :, tri.STAT_FULL_NORM], want_full, rtol=1e-5, atol=1e-6)


def engine_scores(model, ids, fns=DETERMINISTIC_IDS, **kwargs) -> dict[str, np.ndarray]:
    result = scoring_pass(model, ids, torch.ones_like(ids), fns, kernel="triton", **kwargs)
    return {fn: result.scores[0, i] for i, fn in enumerate(result.score_fns)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["olmo2", "llama", "qwen2"])
def test_every_function_matches_the_oracle(kind, dtype, torch_device, tiny_tokenizer, texts):
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model(kind, tiny_tokenizer, device=torch_device, dtype=torch_dtype)
    ids = ids_of(tiny_tokenizer, texts[3], torch_device)
    assert_scores_close(engine_scores(model, ids), oracle_run(model, ids[0]).scores, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sweep_functions_match_the_oracle(dtype, torch_device, tiny_tokenizer, texts):
    """The sweep's three functions alone: the kernel computes only the output norms and the first-token weight."""
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model("llama", tiny_tokenizer, device=torch_device, dtype=torch_dtype)
    ids = ids_of(tiny_tokenizer, texts[5], torch_device)
    got = engine_scores(model, ids, SWEEP_FNS)
    assert_scores_close(got, oracle_run(model, ids[0]).scores, rtol=rtol, fns=SWEEP_FNS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_padded_batch_matches_the_oracle_and_the_torch_path(dtype, torch_device, tiny_tokenizer, texts):
    """Right-padded inputs of different lengths in one batch (GQA): each row equals the oracle on that input alone,
    and the whole batch equals the engine's torch path."""
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model("llama", tiny_tokenizer, device=torch_device, dtype=torch_dtype)
    rows = [tiny_tokenizer(t)["input_ids"][:n] for t, n in zip(texts[7:10], (MAX_TOKENS, 23, 34))]
    assert [len(r) for r in rows] == [MAX_TOKENS, 23, 34], "inputs must differ in length"
    ids = torch.zeros(3, max(map(len, rows)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r), 1
    ids, mask = ids.to(torch_device), mask.to(torch_device)
    got = scoring_pass(model, ids, mask, DETERMINISTIC_IDS, kernel="triton")
    for i, r in enumerate(rows):
        want = oracle_run(model, torch.tensor(r, device=torch_device)).scores
        assert_scores_close(dict(zip(got.score_fns, got.scores[i])), want, rtol=rtol)
    torch_path = scoring_pass(model, ids, mask, DETERMINISTIC_IDS, kernel="torch")
    np.testing.assert_allclose(got.scores, torch_path.scores, rtol=rtol, atol=0)
    if torch_dtype is torch.float32:  # (bfloat16 logits differ by the two kernels' roundings, through the layers)
        for i, r in enumerate(rows):  # real positions only: padded positions' logits are never read
            torch.testing.assert_close(got.logits[i, : len(r)], torch_path.logits[i, : len(r)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,score_fn", [("olmo2", "ahon_ln"), ("qwen2", "aeqd")])
def test_dynamic_zeroing_matches_the_layer_by_layer_oracle(kind, score_fn, torch_device, tiny_tokenizer, texts):
    """Zeroing acts on the kernel's [batch, seq, head, d] output: the zeroed heads, scores and logits are the oracle's."""
    model = make_model(kind, tiny_tokenizer, n_layers=3, device=torch_device)
    ids = ids_of(tiny_tokenizer, texts[5], torch_device)
    tau = float(np.median(oracle_run(model, ids[0]).scores[score_fn]))  # selects about half of the heads
    want_scores, want_zeroed, want_logits = oracle_dynamic(model, ids[0], score_fn, tau)
    assert 0 < want_zeroed.sum() < want_zeroed.size
    result = scoring_pass(
        model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, DynamicZeroing(score_fn, tau), kernel="triton"
    )
    np.testing.assert_array_equal(result.zeroed[0], want_zeroed)
    assert_scores_close({fn: result.scores[0, i] for i, fn in enumerate(result.score_fns)}, want_scores)
    torch.testing.assert_close(result.logits[0], want_logits, rtol=1e-5, atol=1e-5)


def test_logits_equal_the_plain_sdpa_forward(torch_device, tiny_tokenizer, texts):
    model = make_model("olmo2", tiny_tokenizer, device=torch_device)
    ids = ids_of(tiny_tokenizer, texts[6], torch_device)
    with torch.no_grad():
        want = model(input_ids=ids).logits
    torch.testing.assert_close(scoring_pass(model, ids, kernel="triton").logits, want, rtol=1e-5, atol=1e-5)


def test_single_token_input(tiny_tokenizer):
    model = make_model("olmo2", tiny_tokenizer)
    ids = torch.tensor([[7]])
    got = engine_scores(model, ids)
    assert (got["aeqd"] == 0).all() and np.isnan(got["aeqd_ln"]).all()
    want = oracle_run(model, ids[0]).scores
    assert_scores_close(got, want, fns=[fn for fn in DETERMINISTIC_IDS if fn != "aeqd_ln"])


def test_auto_keeps_the_cpu_path_and_cuda_takes_the_kernel(monkeypatch, tiny_tokenizer, texts):
    """kernel="auto" (every caller's default) never runs the interpreter on CPU; on CUDA it runs the kernel."""
    model = make_model("olmo2", tiny_tokenizer)
    ids = ids_of(tiny_tokenizer, texts[2])
    calls = []
    real = tri.attention_with_stats
    monkeypatch.setattr(tri, "attention_with_stats", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    scoring_pass(model, ids)
    assert calls == []
    scoring_pass(model, ids, kernel="triton")
    assert len(calls) == model.config.num_hidden_layers
    session = attention.ScoringSession(lengths=torch.tensor([3]), score_fns=(), random_u=None)
    cuda_query = torch.empty(1, 4, 3, 16, device="meta")  # stands in for a CUDA tensor: no GPU here
    monkeypatch.setattr(tri, "unavailable_reason", lambda query: None)
    monkeypatch.setattr(tri, "INTERPRETED", False)
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda")))
    assert attention._use_triton(session, cuda_query)
    assert not attention._use_triton(attention.ScoringSession(torch.tensor([3]), (), None, query_block=4), cuda_query)
    assert not attention._use_triton(attention.ScoringSession(torch.tensor([3]), (), None, kernel="torch"), cuda_query)


def test_kernel_that_cannot_run_is_one_line(monkeypatch, tiny_tokenizer):
    model = make_model("olmo2", tiny_tokenizer)
    monkeypatch.setattr(tri, "unavailable_reason", lambda query: "Triton is not installed")
    with pytest.raises(ScoringError, match="^the Triton score kernel cannot run here: Triton is not installed$"):
        scoring_pass(model, torch.tensor([[5, 6, 7]]), kernel="triton")
    # the default path does not need it
    assert np.isfinite(score_texts(model, tiny_tokenizer, ["a b c"]).values[:, 0]).all()
