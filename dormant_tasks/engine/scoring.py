"""The score engine's driver: one forward pass gives logits, every docs/SCORES.md §2 score and the zeroed-head mask.

Public API
- `scoring_pass(model, input_ids, attention_mask, score_fns, zeroing=None, seed=0, input_offset=0, input_indices=None)
  -> PassResult(logits [batch, seq, vocab], scores float64 [batch, fn, layer, head], zeroed bool [batch, layer, head])`:
  one forward pass under `torch.no_grad()` with the scoring attention (`dormant_tasks.engine.attention`) installed for
  the duration of the call only. Inputs must be RIGHT-padded (`attention_mask` rows are 1s then 0s).
  `zeroing` is a `DynamicZeroing(score_fn, tau)` or `StaticZeroing(heads)` (or None). The `random` baseline of
  input b is seeded by (seed, input_offset + b), so it does not depend on batching.
- `score_texts(model, tokenizer, texts, options=ScoringOptions(score_fns, batch_size, max_tokens, max_batch_tokens,
  seed), progress=False) -> InputScores`: tokenises each text as `tokenizer(text)` does, keeps its first
  `max_tokens` tokens (default and upper bound: the model's `max_position_embeddings`; one warning line names
  the inputs cut and about how many tokens were left out, `InputScores.n_truncated` counts them), batches
  right-padded inputs in input order, cutting a batch at `batch_size` inputs or where padded length x batch
  size would exceed `max_batch_tokens` (an input longer than that goes alone; defaults: 8 inputs and 65,536
  tokens, or on CUDA with no `batch_size` named, 16,384 tokens and no input limit: engine.batching), and collects
  per-input scores in input order; `InputScores.to_table()` is the docs/DATA_CONTRACT.md `input_scores` layout.
A model whose attention does not go through `transformers.AttentionInterface`, whose family has no adapter in
`dormant_tasks.engine.adapters`, or which uses an attention feature the engine does not implement raises
`ScoringError` (one line) before any forward pass.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from dormant_tasks.engine.adapters import adapter_for
from dormant_tasks.engine.attention import (
    ATTENTION_NAME,
    KERNELS,
    DynamicZeroing,
    ScoringSession,
    StaticZeroing,
    random_baseline,
    scoring_attention,
)
from dormant_tasks.engine.attention_impl_adapter import attention_implementation, goes_through_attention_interface
from dormant_tasks.engine.batching import batch_runs, device_batching, padded_batch
from dormant_tasks.engine.options import ScoringOptions
from dormant_tasks.engine.roles import target_positions
from dormant_tasks.engine.score_functions import SCORE_FUNCTIONS, parse_score_functions
from dormant_tasks.errors import ConfigError, NonFiniteScores, ScoringError

__all__ = [
    "DynamicZeroing",
    "InputScores",
    "PassResult",
    "ScoringOptions",
    "StaticZeroing",
    "score_ids",
    "score_texts",
    "scoring_pass",
]

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    logits: torch.Tensor  # [batch, seq, vocab], on the model's device
    score_fns: tuple[str, ...]
    scores: np.ndarray  # float64 [batch, fn, layer, head]
    zeroed: np.ndarray  # bool [batch, layer, head]


@dataclass
class InputScores:
    """Per-input scores of one model over a list of texts."""

    score_fns: tuple[str, ...]
    values: np.ndarray  # float64 [n_inputs, n_fns, n_layers, n_heads]
    n_tokens: np.ndarray  # int64 [n_inputs], after truncation
    n_truncated: int = 0  # inputs cut to the token limit
    first_boundary: np.ndarray | None = None  # bool [n_inputs]: the first token is the tokenizer's BOS or EOS

    def get(self, score_fn: str) -> np.ndarray:
        """[n_inputs, n_layers, n_heads] values of one function."""
        if score_fn not in self.score_fns:
            raise ConfigError(f"score function {score_fn!r} was not computed; computed: {', '.join(self.score_fns)}")
        return self.values[:, self.score_fns.index(score_fn)]

    def to_table(self) -> pa.Table:
        """Long table (the store's `input_scores`): input_index, score_fn, layer, head_index, score (float32, NaN kept)."""
        idx = np.indices(self.values.shape).reshape(4, -1)  # [4, n_inputs * n_fns * n_layers * n_heads]
        return pa.table(
            {
                "input_index": pa.array(idx[0], pa.int32()),
                "score_fn": pa.array(np.asarray(self.score_fns, dtype=object)[idx[1]], pa.string()),
                "layer": pa.array(idx[2], pa.int32()),
                "head_index": pa.array(idx[3], pa.int32()),
                "score": pa.array(self.values.reshape(-1).astype(np.float32), pa.float32()),
            }
        )


def _shape(model) -> tuple[int, int]:
    config = model.config.get_text_config()
    return config.num_hidden_layers, config.num_attention_heads


@contextlib.contextmanager
def scoring_attention_installed(model):
    """Set the model's attention implementation to the scoring function for the block, then restore it.
    Yields the model's family adapter (ScoringError for a model the engine cannot score)."""
    from transformers import AttentionInterface

    if not goes_through_attention_interface(model):
        raise ScoringError(
            f"{type(model).__name__}'s attention does not go through transformers' AttentionInterface, "
            "so its heads cannot be scored; use a model such as OLMo-2, Llama, Qwen2, Mistral, Pythia or GPT-2"
        )
    adapter = adapter_for(model)
    AttentionInterface.register(ATTENTION_NAME, scoring_attention)
    previous = attention_implementation(model)
    model.set_attn_implementation(ATTENTION_NAME)
    try:
        yield adapter
    finally:
        model.set_attn_implementation(previous)


def _validate_zeroing(zeroing, n_layers: int, n_heads: int) -> None:
    if zeroing is None or isinstance(zeroing, DynamicZeroing):
        return
    if not isinstance(zeroing, StaticZeroing):
        raise ConfigError(f"zeroing must be DynamicZeroing, StaticZeroing or None, got {type(zeroing).__name__}")
    bad = [(layer, h) for layer, h in zeroing.heads if not (0 <= layer < n_layers and 0 <= h < n_heads)]
    if bad:
        raise ConfigError(
            f"static zeroing names heads outside the model's {n_layers} layers x {n_heads} heads: "
            f"{sorted(bad)[:5]}; use 0-based (layer, head) pairs"
        )


def input_lengths(attention_mask: torch.Tensor) -> torch.Tensor:
    """[batch] token counts of a right-padded 0/1 mask; ScoringError for left padding or an empty row."""
    mask = attention_mask.bool()  # [batch, seq]
    lengths = mask.sum(-1)  # [batch]
    right_padded = torch.arange(mask.shape[1], device=mask.device) < lengths[:, None]  # [batch, seq]
    if not torch.equal(mask, right_padded):
        raise ScoringError(
            "inputs must be right-padded (attention_mask rows of 1s then 0s); "
            "pad on the right, e.g. tokenizer.padding_side = 'right'"
        )
    if (lengths == 0).any():
        raise ScoringError(f"input {int((lengths == 0).nonzero()[0])} has no tokens; every input needs at least one")
    return lengths


@torch.no_grad()
def scoring_pass(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    score_fns=None,
    zeroing: DynamicZeroing | StaticZeroing | None = None,
    seed: int = 0,
    input_offset: int = 0,
    query_block: int | None = None,
    input_indices=None,
    kernel: str = "auto",
) -> PassResult:
    """One forward pass: logits, per-input scores [batch, fn, layer, head] and the zeroed mask [batch, layer, head].

    `query_block` forces the float32 query-block path (used where the CPU log-sum-exp kernel is absent).
    `kernel` "auto" runs the Triton kernel (engine/triton_attention.py) on CUDA where Triton is installed and
    torch's kernels elsewhere; "triton" always (on CPU in Triton's interpreter, TRITON_INTERPRET=1), "torch" never.
    `input_indices` (one int per row) seed the `random` baseline instead of `input_offset + row`, for callers
    that batch their inputs out of order.
    """
    fns = tuple(parse_score_functions(score_fns))
    if kernel not in KERNELS:
        raise ConfigError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    n_layers, n_heads = _shape(model)
    if n_layers < 1 or n_heads < 1:
        raise ScoringError(f"{type(model).__name__} has {n_layers} layers of {n_heads} heads: no head to score")
    _validate_zeroing(zeroing, n_layers, n_heads)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    lengths = input_lengths(attention_mask)  # [batch]
    batch = input_ids.shape[0]
    rows = range(input_offset, input_offset + batch) if input_indices is None else list(input_indices)
    session = ScoringSession(
        lengths=lengths, score_fns=fns, random_u=None, zeroing=zeroing, query_block=query_block, kernel=kernel
    )
    if "random" in session.needed():  # a generator per input: not paid by passes that do not ask for it
        session.random_u = torch.from_numpy(random_baseline(seed, rows, n_layers, n_heads))
    if any(SCORE_FUNCTIONS[fn].role for fn in session.needed()):  # the role functions' targets, from the tokens
        session.targets = target_positions(input_ids, lengths)
    with scoring_attention_installed(model) as adapter:
        session.adapter = adapter
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, dormant_session=session)
    if sorted(session.scores) != list(range(n_layers)):
        raise ScoringError(
            f"only {len(session.scores)} of {n_layers} layers of {type(model).__name__} reported "
            "scores: its attention does not go through transformers' AttentionInterface"
        )
    _refuse_non_finite(session, batch * n_heads)
    scores = torch.stack([session.scores[layer] for layer in range(n_layers)], dim=2)  # [batch, fn, layer, head]
    zeroed = torch.stack([session.zeroed[layer] for layer in range(n_layers)], dim=1)  # [batch, layer, head]
    return PassResult(out.logits, fns, scores.cpu().numpy(), zeroed.cpu().numpy())


def _refuse_non_finite(session, n_pairs: int) -> None:
    """ScoringError naming the first layer and raw score with NaN or infinite values (one read of the counts)."""
    if not session.nonfinite:
        return
    layers = sorted(session.nonfinite)
    counts = torch.stack([session.nonfinite[layer][1] for layer in layers]).cpu()  # [layer, name]
    if not counts.any():
        return
    i, j = (int(x) for x in torch.nonzero(counts)[0])
    name = session.nonfinite[layers[i]][0][j]
    raise NonFiniteScores(
        f"{name} is NaN or infinite at layer {layers[i]} on {int(counts[i, j])} of {n_pairs} (input, head) pairs: "
        "the model's activations are not finite (overflow in a low-precision dtype, or broken weights), so no head "
        "is scored; check the weights, or score in float32 (--dtype float32)"
    )


def _context_length(model) -> int | None:
    value = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    return int(value) if value else None


_PREFIX_MARGIN = 64  # tokens past the limit that a character prefix must give before it stands in for the text


def _tokenize(tokenizer, text: str) -> list[int]:
    # verbose=False: transformers' own "longer than the maximum" line would double the one warning given here
    return tokenizer(text, verbose=False)["input_ids"]


def _encode(tokenizer, text: str, limit: int | None) -> tuple[list[int], int]:
    """(`tokenizer(text)` ids cut to `limit`, tokens cut). A text far longer than `limit` is tokenised from a
    character prefix (doubled until it gives `limit` + a margin of tokens), so its cost does not grow with its
    length: a pre-tokenizing BPE or Unigram tokenizer changes only the last tokens of a cut text, which the
    margin keeps out of the first `limit`. Its tokens cut are then estimated at the prefix's tokens per character."""
    if limit is not None:
        chars = 8 * (limit + _PREFIX_MARGIN)
        while len(text) > chars:
            ids = _tokenize(tokenizer, text[:chars])
            if len(ids) >= limit + _PREFIX_MARGIN:
                return ids[:limit], len(ids) - limit + round((len(text) - chars) * len(ids) / chars)
            chars *= 2
    ids = _tokenize(tokenizer, text)
    if limit is None or len(ids) <= limit:
        return ids, 0
    return ids[:limit], len(ids) - limit


def _warn_truncated(cut: list[int], limit: int, source: str, level: int) -> None:
    """One log line for the whole call: how many inputs were cut, which, and about how many tokens."""
    which = [i for i, n in enumerate(cut) if n]
    shown = ", ".join(map(str, which[:5])) + (", ..." if len(which) > 5 else "")
    log.log(
        level,
        "%d of %d inputs (%s) were cut to their first %d tokens (%s), about %s tokens left out; "
        "set --max-tokens to choose the limit",
        len(which),
        len(cut),
        shown,
        limit,
        source,
        f"{sum(cut):,}",
    )


def score_texts(
    model, tokenizer, texts, options: ScoringOptions | None = None, progress: bool = False, warn_truncated: bool = True
) -> InputScores:
    """Per-input scores of `model` over `texts` (`options`: which functions, the inputs' limits and batches; default
    every function, the device's batching), each tokenised as `tokenizer(text)` does and cut to the first
    `options.max_tokens` tokens (at most the model's context). Cut inputs are one WARNING line, or one INFO line
    with `warn_truncated=False` (the tracker, whose run summary warns once for the whole series instead of once per
    checkpoint; `InputScores.n_truncated` has the count)."""
    options = options or ScoringOptions()
    texts = list(texts)
    if not texts:
        raise ScoringError("no texts to score; give at least one text")
    encoded, n_truncated = _encode_texts(model, tokenizer, texts, options.max_tokens, warn_truncated)
    values = _score_batches(model, tokenizer.pad_token_id, encoded, options, progress)
    boundary = {t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id) if t is not None}
    first = np.array([ids[0] in boundary for ids in encoded], dtype=bool)  # the sink the scores look at
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    return InputScores(tuple(options.score_fns or ()), values, lengths, n_truncated, first)


def _encode_texts(model, tokenizer, texts: list[str], max_tokens: int | None, warn: bool) -> tuple[list, int]:
    """(each text's token ids, cut to `max_tokens` and the model's context; how many were cut), one log line for
    the cut ones (WARNING, or INFO when `warn` is False)."""
    context = _context_length(model)
    limits = [x for x in (max_tokens, context) if x is not None]
    limit = min(limits) if limits else None  # None: a model that states no context length
    encoded, cut = zip(*(_encode(tokenizer, text, limit) for text in texts))
    for i, ids in enumerate(encoded):
        if not ids:
            raise ScoringError(f"text {i} ({texts[i][:40]!r}) tokenises to zero tokens; remove it or change it")
    n_truncated = sum(n > 0 for n in cut)
    if n_truncated:
        source = "--max-tokens" if limit == max_tokens else "the model's max_position_embeddings"
        assert limit is not None  # an input was cut, so there is a limit
        _warn_truncated(list(cut), limit, source, logging.WARNING if warn else logging.INFO)
    return list(encoded), n_truncated


def score_ids(
    model, rows, options: ScoringOptions | None = None, pad_id: int | None = None, progress=False
) -> InputScores:
    """Per-input scores of `model` over token rows given as ids (the induction probe: no tokenizer, no special
    tokens, nothing cut). ScoringError when a row is longer than the model's context or holds an id its
    vocabulary does not."""
    options = options or ScoringOptions()
    encoded = [[int(x) for x in row] for row in rows]
    context, vocab = _context_length(model), model.config.get_text_config().vocab_size
    longest = max(map(len, encoded), default=0)
    if not encoded or not longest:
        raise ScoringError("no token rows to score; give at least one row of ids")
    if context is not None and longest > context:
        raise ScoringError(f"token rows of {longest} ids are longer than the model's context ({context} tokens)")
    if max(max(r) for r in encoded if r) >= vocab or min(min(r) for r in encoded if r) < 0:
        raise ScoringError(f"token rows hold ids outside the model's vocabulary of {vocab}")
    values = _score_batches(model, pad_id, encoded, options, progress)
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    return InputScores(tuple(options.score_fns or ()), values, lengths, 0, np.zeros(len(encoded), dtype=bool))


def _score_batches(model, pad_id, encoded: list, options: ScoringOptions, progress: bool) -> np.ndarray:
    """Scores [input, fn, layer, head] float64 of right-padded batches of `encoded`, in input order."""
    fns = tuple(options.score_fns or ())
    device = next(model.parameters()).device
    batch_size, budget = device_batching(device, options.batch_size, options.max_batch_tokens)
    n_layers, n_heads = _shape(model)
    values = np.empty((len(encoded), len(fns), n_layers, n_heads), dtype=np.float64)
    batches = batch_runs([len(ids) for ids in encoded], batch_size, budget)
    if progress:
        from dormant_tasks.progress import progress_bar

        batches = progress_bar(batches, desc="scoring", unit="batch")  # plain lines on a pipe (dormant_tasks.progress)
    for run in batches:
        input_ids, mask = padded_batch(encoded[run.start : run.stop], pad_id)  # [batch, seq]
        result = scoring_pass(
            model,
            input_ids.to(device),
            mask.to(device),
            fns,
            seed=options.seed,
            input_offset=run.start,
            query_block=options.query_block,
        )
        values[run.start : run.stop] = result.scores
    return values
