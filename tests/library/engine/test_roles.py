"""The head-role functions (`attn_*`, dormant_tasks/engine/roles.py) against an eager `output_attentions` oracle.

The oracle is written from the definitions, apart from the engine: eager attention on one unpadded input gives the
last query's row A[h, S-1, :] with the model's own masks; the targets are found by scanning the tokens, the
baseline is drawn by Xu's loop, and a target outside a sliding layer's window (read from the config's
`layer_types`) is NaN. The engine scores a right-padded batch of inputs of different lengths on each of its paths:
the default (CPU: the fused kernel), the float32 query-block rows, and the Triton kernel (Triton's interpreter on
CPU). Models: the tiny OLMo-2, GPT-NeoX (Pythia's layout), Llama with grouped-query attention, OLMo-3 with
sliding windows of 6 tokens on its even layers (shorter than the inputs).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from dormant_tasks.engine import roles
from dormant_tasks.engine.score_functions import (
    ALL_IDS,
    ROLE_CLASSES,
    ROLE_IDS,
    ROLE_TARGETS,
    SINK_ID,
    TRACKED_IDS,
    parse_score_functions,
)
from dormant_tasks.engine.scoring import scoring_pass
from tests.builders.families import SHORT_WINDOW, make_model

HAS_TRITON = importlib.util.find_spec("triton") is not None
PATHS = {"default": {}, "query_block": {"query_block": 16}, "triton": {"kernel": "triton"}}
KINDS = ("olmo2", "gpt_neox", "llama", "olmo3")
LENGTHS = (64, 40, 9)  # 64: a full baseline of 50; 40: all 33 of its candidates; 9: two baseline positions


def _path(name):
    skip = name == "triton" and not HAS_TRITON
    return pytest.param(name, marks=pytest.mark.skipif(skip, reason="Triton is not installed"))


@pytest.fixture(scope="module")
def rows(tiny_tokenizer):
    """Token rows: an A B ... A induction pattern in the first two, and no earlier occurrence of the last token in
    the third (its induction and duplicate targets are undefined)."""
    rng = np.random.RandomState(7)
    vocab = len(tiny_tokenizer)
    out = []
    for n, at in zip(LENGTHS, (20, 5, None)):
        ids = list(rng.choice(np.arange(10, vocab), size=n, replace=False))  # distinct tokens
        if at is not None:
            ids[-1] = ids[at]  # A at `at`, B at `at + 1`, the last token A again
        out.append([int(x) for x in ids])
    return out


def oracle_baseline(length: int) -> list[int]:
    """Xu's draw, written out: randint(1, S-1) from RandomState(0), skipping 0, S-6 .. S-1 and repeats."""
    rng = np.random.RandomState(0)
    avoid = {0, length - 1, length - 2, length - 3, length - 4, length - 5, length - 6}
    want = min(50, len([p for p in range(1, length - 1) if p not in avoid]))
    sample: list[int] = []
    while len(sample) < want:
        p = rng.randint(1, length - 1)
        if p not in avoid and p not in sample:
            sample.append(int(p))
    return sample


def oracle_targets(ids: list[int]) -> dict[str, list[int] | None]:
    n = len(ids)
    last = n - 1
    earlier = [p for p in range(last) if ids[p] == ids[last]]
    return {
        "induction": [earlier[-1] + 1] if earlier else None,
        "duplicate": [earlier[-1]] if earlier else None,
        "previous": [last - 1] if last >= 1 else None,
        "self": [last],
        "first": [0],
        "local": [last - 2, last - 3, last - 4, last - 5] if last - 5 >= 0 else None,
        "baseline": oracle_baseline(n) or None,
    }


@torch.no_grad()
def oracle_roles(model, ids: list[int]) -> dict[str, np.ndarray]:
    """attn_<target> -> [layer, head] float64 for one unpadded input, from eager attention's last row."""
    text = model.config.get_text_config()
    types = getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(previous)
    last = len(ids) - 1
    targets = oracle_targets(ids)
    result = {f"attn_{t}": np.zeros((text.num_hidden_layers, text.num_attention_heads)) for t in ROLE_TARGETS}
    for layer, attn in enumerate(out.attentions):
        row = attn[0, :, last, :].double().numpy()  # [head, seq]
        window = text.sliding_window if types[layer] == "sliding_attention" else None
        for t, positions in targets.items():
            outside = window is not None and positions is not None and any(last - p >= window for p in positions)
            value = np.nan if positions is None or outside else row[:, positions].mean(-1)
            result[f"attn_{t}"][layer] = value
    return result


def padded(rows) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r), 1
    return ids, mask


@pytest.fixture(scope="module")
def oracles(tiny_tokenizer, rows):
    cache = {}

    def get(kind):
        if kind not in cache:
            model = make_model(kind, tiny_tokenizer)
            cache[kind] = model, [oracle_roles(model, r) for r in rows]
        return cache[kind]

    return get


@pytest.mark.parametrize("path", [_path(p) for p in PATHS])
@pytest.mark.parametrize("kind", KINDS)
def test_role_functions_equal_the_eager_oracle(oracles, rows, kind, path):
    model, want = oracles(kind)
    ids, mask = padded(rows)
    fns = ROLE_IDS + ("ahon_ln",)  # with a dormancy function in the same pass
    got = scoring_pass(model, ids, mask, fns, **PATHS[path]).scores  # [batch, fn, layer, head]
    for b, oracle in enumerate(want):
        for i, fn in enumerate(ROLE_IDS):
            np.testing.assert_allclose(got[b, i], oracle[fn], rtol=1e-5, atol=1e-9, err_msg=f"{fn}, input {b}")
    # the undefined targets are NaN, the defined ones finite
    assert np.isnan(got[2, ROLE_IDS.index("attn_induction")]).all()
    assert np.isfinite(got[0, ROLE_IDS.index("attn_induction"), 1]).all()  # layer 1: full attention in every kind
    if kind == "olmo3":  # the sliding (even) layers keep token 0 and most of the baseline from the last query
        first = got[:, ROLE_IDS.index("attn_first")]  # [batch, layer, head]
        assert np.isnan(first[:2, 0]).all() and np.isfinite(first[:, 1]).all()


def test_the_oracle_sees_the_windows_it_tests(tiny_tokenizer):
    """OLMo-3's tiny model slides on its even layers with a window shorter than every input but the last."""
    model = make_model("olmo3", tiny_tokenizer)
    assert model.config.layer_types[:2] == ["sliding_attention", "full_attention"]
    assert model.config.sliding_window == SHORT_WINDOW < min(LENGTHS[:2])


def test_role_functions_add_nothing_to_a_pass_that_does_not_ask(tiny_tokenizer, rows):
    """The dormancy functions' values are bitwise the same with and without the roles in the pass, and a pass
    without roles finds no targets."""
    model = make_model("olmo2", tiny_tokenizer)
    ids, mask = padded(rows)
    alone = scoring_pass(model, ids, mask, TRACKED_IDS).scores
    together = scoring_pass(model, ids, mask, TRACKED_IDS + ROLE_IDS).scores[:, : len(TRACKED_IDS)]
    assert np.array_equal(alone, together, equal_nan=True)
    assert not set(ROLE_IDS) & set(ALL_IDS) and not set(ROLE_IDS) & set(TRACKED_IDS)


def test_target_positions_follow_the_definitions(rows):
    ids, mask = padded(rows)
    table = roles.target_positions(ids, mask.sum(-1)).numpy()
    for b, r in enumerate(rows):
        for t, want in oracle_targets(r).items():
            cols = table[b, roles.TARGET_COLUMNS[t]]
            if want is None:
                assert (cols == -1).all(), (b, t)
            else:
                assert list(cols[: len(want)]) == want and (cols[len(want) :] == -1).all(), (b, t)
    assert len(roles.baseline_positions(256)) == 50 and roles.baseline_positions(7) == ()


def test_selectivity_is_the_ratio_of_means_and_the_role_the_best_class():
    """Xu's rule on made-up per-input values: selectivity = mean target / mean baseline over the inputs where each
    is defined; the role is the best class at >= 30, else unclassified; all NaN: undefined, with its reason."""
    rng = np.random.default_rng(0)
    values = {f"attn_{t}": rng.uniform(0.001, 0.002, (5, 1, 4)) for t in ROLE_TARGETS}
    values["attn_first"][:, 0, 0] = 0.5  # head 0: a first-token head, 0.5 / ~0.0015 >> 30
    values["attn_induction"][:, 0, 1] = 0.02  # head 1: ~13x at best: unclassified
    values["attn_induction"][0, 0, 1] = np.nan  # undefined on one input: left out of its mean
    values["attn_baseline"][:, 0, 3] = np.nan  # head 3: no baseline on any input
    found = roles.head_roles_of_inputs(values)
    base = values["attn_baseline"].mean(0)
    np.testing.assert_allclose(found.selectivity[ROLE_CLASSES.index("first"), 0, 0], 0.5 / base[0, 0])
    want = values["attn_induction"][1:, 0, 1].mean() / base[0, 1]
    np.testing.assert_allclose(found.selectivity[ROLE_CLASSES.index("induction"), 0, 1], want)
    assert list(found.role[0]) == ["first", "unclassified", "unclassified", roles.UNDEFINED]
    assert found.shares()["first"] == 0.25 and found.layer_shares()["unclassified"] == [0.5]
    assert not found.reasons  # every class is defined on some head
    values = {fn: np.full((5, 1, 4), np.nan) if fn == "attn_first" else v for fn, v in values.items()}
    assert "first" in roles.head_roles_of_inputs(values).reasons


@pytest.mark.parametrize("path", [_path(p) for p in PATHS])
@pytest.mark.parametrize("kind", ("olmo2", "olmo3"))
def test_gu_first_token_weight_is_the_mean_over_the_first_64_queries(tiny_tokenizer, kind, path):
    """awft_64 per input: the mean of A[h, i, 0] over queries 0 .. min(S, 64) - 1 (query 0 included), from eager
    attention; an input of 80 tokens is cut at 64 queries, one of 20 keeps all (OLMo-3's sliding layers give
    token 0 no attention past their window, and the mean counts those queries as 0)."""
    model = make_model(kind, tiny_tokenizer)
    rng = np.random.RandomState(3)
    rows = [[int(x) for x in rng.randint(10, len(tiny_tokenizer), n)] for n in (80, 20)]
    ids, mask = padded(rows)
    got = scoring_pass(model, ids, mask, (SINK_ID, "awft"), **PATHS[path]).scores  # [batch, fn, layer, head]
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        for b, r in enumerate(rows):
            with torch.no_grad():
                out = model(input_ids=torch.tensor([r]), output_attentions=True, use_cache=False)
            t = min(len(r), 64)
            want = np.stack([a[0, :, :t, 0].double().mean(-1).numpy() for a in out.attentions])  # [layer, head]
            np.testing.assert_allclose(got[b, 0], want, rtol=1e-5, atol=1e-9)
    finally:
        model.set_attn_implementation(previous)
    assert not np.allclose(got[0, 0], got[0, 1])  # past 64 queries it is not awft
    np.testing.assert_array_equal(got[1, 0], got[1, 1])  # within 64 it is


def test_sink_share_is_the_share_of_heads_over_eps_and_a_group_of_its_own():
    weights = np.array([[0.31, 0.3, 0.9, 0.0], [0.29, 0.5, np.nan, 0.2]])
    assert roles.sink_share(weights) == 3 / 8  # 0.3 itself is not over eps; NaN is never a sink
    assert roles.sink_share(weights, eps=0.1) == 6 / 8
    assert parse_score_functions(["sink"]) == [SINK_ID] and SINK_ID not in ALL_IDS + ROLE_IDS


def test_score_ids_refuses_ids_outside_the_vocabulary_and_rows_past_the_context(tiny_tokenizer):
    from dormant_tasks.engine import ScoringOptions, score_ids
    from dormant_tasks.errors import ScoringError

    model = make_model("olmo2", tiny_tokenizer)  # a vocabulary of 512 ids, a context of 1,024 tokens
    options = ScoringOptions(("attn_self",))
    with pytest.raises(ScoringError, match="outside the model's vocabulary of 512"):
        score_ids(model, [[1, 2], [3, 512]], options)
    with pytest.raises(ScoringError, match=r"longer than the model's context \(1024 tokens\)"):
        score_ids(model, [[1] * 1025], options)
    got = score_ids(model, [[5, 6, 7], [8, 9]], options)
    assert got.values.shape == (2, 1, 2, 4) and list(got.n_tokens) == [3, 2] and not got.first_boundary.any()
    alone = scoring_pass(model, torch.tensor([[8, 9]]), None, ("attn_self",)).scores[0, 0]  # unpadded, alone
    np.testing.assert_allclose(got.get("attn_self")[1], alone, rtol=1e-5)
