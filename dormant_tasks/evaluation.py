"""Interventions (docs/SCORES.md §6): WinoGrande accuracy with heads zeroed, the threshold sweep, the leaderboard metric.

One forward pass per (batch, setting) gives the logits (for the continuation log-likelihoods), the
per-input scores and the zeroed-head mask (`scoring.scoring_pass`), so the un-intervened run yields
the base accuracy and the pooled scores that place the thresholds at once.

Public API
- `evaluate_winogrande(model, tokenizer, requests, zeroing=None, score_fns=..., batch_size=16) -> ItemResults`
- `run_sweep(model, tokenizer, score_fns, quantiles=..., shots=0, limit=None, batch_size=16) -> SweepResult`
  (`SweepResult.rows` are ready for the store's `evaluations` table, less the checkpoint columns)
- `evaluate_static(model, tokenizer, heads, ...) -> dict` (one `evaluations` row, mode "static")
- `pct_zeroed_within_1pt(points, base) -> float`, `normalised_auc(points) -> float`
- `check_tau(score_fn, tau)`: the range of thresholds each function accepts.
- `chance_note(task, n_items, base_accuracy_pct)`, `item_step_note(n_items)`, `item_step_pct(n_items)`:
  the warnings printed with a leaderboard (chance from `TASK_CHOICES`).
An "input" is one (item, option) sequence, index 2 * item + option.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .calibration import load_winogrande_items
from .errors import EvaluationError, did_you_mean
from .masks import pooled_threshold
from .metric import WITHIN_POINTS, normalised_auc, pct_zeroed_within_1pt
from .requests import DEFAULT_QUANTILES
from .score_functions import get_score_function, parse_score_functions
from .scoring import DynamicZeroing, StaticZeroing, scoring_pass
from .winogrande import DEFAULT_FEWSHOT_SEED, EncodedOption, Request, encode_option, winogrande_requests

# Answer options per item of each task, the one place that knows them: chance accuracy is 1 / choices.
TASK_CHOICES = {"winogrande": 2}
TASKS = tuple(TASK_CHOICES)
# Thresholds a function accepts: awft is a mean attention weight and `random` a probability, both in
# [0, 1]; every other score (norms, entropies, ratios of them) is >= 0, so tau must be too.
UNIT_INTERVAL_FNS = ("awft", "random")


def check_tau(score_fn: str, tau: float) -> float:
    """`tau` as a float if it is a usable threshold for `score_fn`, else EvaluationError."""
    get_score_function(score_fn)
    tau = float(tau)
    upper = 1.0 if score_fn in UNIT_INTERVAL_FNS else math.inf
    if not (0.0 <= tau <= upper) or math.isnan(tau):
        allowed = "[0, 1]" if upper == 1.0 else ">= 0"
        raise EvaluationError(
            f"tau {tau} is outside the range of {score_fn} ({allowed}); pick a threshold in that range"
        )
    return tau


def item_step_pct(n_items: int) -> float:
    """Accuracy points that one item moves: 100 / n. Differences smaller than this cannot be measured."""
    return 100.0 / n_items


def item_step_note(n_items: int) -> str:
    """The line shown beside every leaderboard: the accuracy step of one item, flagged when it is as large as
    the metric's 1-point tolerance (then a single answer decides whether a point lies within 1 point)."""
    step = item_step_pct(n_items)
    line = f"one item = {step:.2f} accuracy points ({n_items} items)"
    if step >= WITHIN_POINTS:
        line += (
            f", >= the metric's {WITHIN_POINTS:g}-point tolerance: one answer can decide "
            f"'% zeroed within {WITHIN_POINTS:g} pt'; evaluate more items (--limit)"
        )
    return line


def chance_band_pct(task: str, n_items: int) -> tuple[float, float]:
    """(chance %, half-width in points) of the two-sided 95% band of a model that guesses uniformly.

    A guesser's accuracy on n items is Binomial(n, p)/n with p = 1 / choices; the band uses the normal
    approximation 1.96 * sqrt(p (1 - p) / n), whose ends lie within one item of the exact binomial
    2.5% and 97.5% quantiles for every n from 10 to all 1,267 WinoGrande dev items.
    """
    p = 1.0 / TASK_CHOICES[check_task(task)]
    return 100.0 * p, 100.0 * 1.96 * math.sqrt(p * (1.0 - p) / n_items)


def chance_note(task: str, n_items: int, base_accuracy_pct: float) -> str | None:
    """A warning when the un-intervened accuracy cannot be told from guessing on this many items: a
    leaderboard of such a model ranks noise, not how many heads it can spare. None otherwise."""
    chance, half = chance_band_pct(task, n_items)
    if abs(base_accuracy_pct - chance) > half:
        return None
    return (
        f"base accuracy {base_accuracy_pct:.2f}% is within the 95% binomial noise of chance for {task} "
        f"({chance:g}% +/- {half:.2f} points on {n_items} items, {TASK_CHOICES[task]} choices): the model may be "
        f"guessing, so the leaderboard ranks noise; evaluate a trained checkpoint, or more items if --limit "
        f"held them back"
    )


def check_task(task: str) -> str:
    if task not in TASKS:
        raise EvaluationError(f"unknown task {task!r}{did_you_mean(task, TASKS)}; available: {', '.join(TASKS)}")
    return task


# ---------------------------------------------------------------------------------------------------
# Batched log-likelihood of the continuations


@dataclass(frozen=True)
class Batch:
    """Whole items (both options, rows 2i and 2i+1) right-padded into one forward pass."""

    first_input: int  # global index of row 0 (inputs are contiguous: random seeds do not depend on batching)
    input_ids: torch.Tensor  # [batch, seq] long, right-padded
    attention_mask: torch.Tensor  # [batch, seq] long
    target_rows: torch.Tensor  # [n_cont_tokens] row of each continuation token
    target_positions: torch.Tensor  # [n_cont_tokens] position whose logits predict it
    target_ids: torch.Tensor  # [n_cont_tokens] the token


@dataclass(frozen=True)
class EncodedTask:
    requests: tuple[Request, ...]
    options: tuple[EncodedOption, ...]  # [input]: 2 * item + option
    batches: tuple[Batch, ...]

    @property
    def n_inputs(self) -> int:
        return len(self.options)


def encode_requests(tokenizer, requests, batch_size: int = 16, device="cpu") -> EncodedTask:
    """Tokenise once; `batch_size` sequences per pass, rounded down to whole items (at least one)."""
    if tokenizer is None or not callable(getattr(tokenizer, "encode", None)):
        raise EvaluationError(
            "no tokenizer given; load the checkpoint's tokenizer with the model "
            "(dormant_tasks.loading.load_model_and_tokenizer) and pass it"
        )
    if batch_size < 1:
        raise EvaluationError(f"batch_size must be at least 1, got {batch_size}")
    requests = tuple(requests)
    if not requests:
        raise EvaluationError("no WinoGrande items to evaluate; use a limit of at least 1")
    options = tuple(encode_option(tokenizer, ctx, r.continuation) for r in requests for ctx in r.contexts)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0  # never attended to
    items_per_batch = max(1, batch_size // 2)
    batches = []
    for first in range(0, len(options), 2 * items_per_batch):
        rows = options[first : first + 2 * items_per_batch]
        width = max(len(o.input_ids) for o in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # [batch, seq]
        mask = torch.zeros((len(rows), width), dtype=torch.long)  # [batch, seq]
        t_rows, t_pos, t_ids = [], [], []
        for r, o in enumerate(rows):
            ids[r, : len(o.input_ids)] = torch.tensor(o.input_ids)
            mask[r, : len(o.input_ids)] = 1
            n = len(o.continuation_ids)
            t_rows += [r] * n
            t_pos += range(o.n_context - 1, o.n_context - 1 + n)
            t_ids += o.continuation_ids
        batches.append(
            Batch(
                first,
                ids.to(device),
                mask.to(device),
                torch.tensor(t_rows, device=device),
                torch.tensor(t_pos, device=device),
                torch.tensor(t_ids, device=device),
            )
        )
    return EncodedTask(requests, options, tuple(batches))


def continuation_loglikelihoods(logits: torch.Tensor, batch: Batch) -> np.ndarray:
    """[batch] float64: summed log-probability of each row's continuation tokens."""
    picked = logits[batch.target_rows, batch.target_positions].float()  # [n_cont_tokens, vocab]
    logp = torch.log_softmax(picked, dim=-1).gather(-1, batch.target_ids[:, None])[:, 0]  # [n_cont_tokens]
    sums = torch.zeros(logits.shape[0], dtype=torch.float64, device=logits.device)  # [batch]
    return sums.index_add_(0, batch.target_rows, logp.double()).cpu().numpy()


# ---------------------------------------------------------------------------------------------------
# One evaluation: accuracy, per-input scores, zeroed mask


@dataclass(frozen=True)
class ItemResults:
    loglikelihoods: np.ndarray  # float64 [item, option]
    labels: np.ndarray  # int64 [item]
    score_fns: tuple[str, ...]
    scores: np.ndarray  # float64 [input, fn, layer, head], input = 2 * item + option
    zeroed: np.ndarray  # bool [input, layer, head]

    @property
    def n_items(self) -> int:
        return len(self.labels)

    @property
    def predictions(self) -> np.ndarray:
        """[item] the option with the higher log-likelihood (the first on a tie, as lm-eval's argmax)."""
        return np.argmax(self.loglikelihoods, axis=1)

    @property
    def accuracy(self) -> float:
        """% of items predicted correctly."""
        return 100.0 * float(np.mean(self.predictions == self.labels))

    @property
    def pct_zeroed(self) -> float:
        """Measured %: mean over layers of zeroed (input, head) pairs / (inputs x heads)."""
        return 100.0 * float(self.zeroed.mean(axis=(0, 2)).mean())

    def scores_of(self, score_fn: str) -> np.ndarray:
        """[input, layer, head] per-input scores of one function."""
        if score_fn not in self.score_fns:
            raise EvaluationError(f"{score_fn} was not scored in this run; scored: {', '.join(self.score_fns)}")
        return self.scores[:, self.score_fns.index(score_fn)]


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


def _evaluate_encoded(
    model, encoded: EncodedTask, score_fns: tuple[str, ...], zeroing, seed: int, progress=None
) -> ItemResults:
    """One pass over every batch; `progress` is a tqdm bar advanced once per batch (or None)."""
    lls, scores, zeroed = [], [], []
    for batch in encoded.batches:
        result = scoring_pass(
            model,
            batch.input_ids,
            batch.attention_mask,
            score_fns,
            zeroing=zeroing,
            seed=seed,
            input_offset=batch.first_input,
        )
        lls.append(continuation_loglikelihoods(result.logits, batch))
        scores.append(result.scores)
        zeroed.append(result.zeroed)
        del result
        if progress is not None:
            progress.update(1)
    return ItemResults(
        loglikelihoods=np.concatenate(lls).reshape(-1, 2),
        labels=np.array([r.label for r in encoded.requests], dtype=np.int64),
        score_fns=tuple(score_fns),
        scores=np.concatenate(scores),
        zeroed=np.concatenate(zeroed),
    )


def _progress_bar(enabled: bool, total: int, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch")


def evaluate_winogrande(
    model,
    tokenizer,
    requests,
    zeroing: DynamicZeroing | StaticZeroing | None = None,
    score_fns=("ahon_ln",),
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = False,
) -> ItemResults:
    """Accuracy of `model` on `requests` with `zeroing` applied, plus the per-input scores of `score_fns`.

    The scores are recorded from the same pass (each layer's own, before its zeroing); a dynamic
    zeroing function is scored whether listed or not, but only the listed ones are returned.
    """
    fns = tuple(parse_score_functions(score_fns))
    if isinstance(zeroing, DynamicZeroing):
        check_tau(zeroing.score_fn, zeroing.tau)
    encoded = encode_requests(tokenizer, requests, batch_size, _model_device(model))
    bar = _progress_bar(progress, len(encoded.batches), "winogrande")
    try:
        return _evaluate_encoded(model, encoded, fns, zeroing, seed, bar)
    finally:
        if bar is not None:
            bar.close()


# ---------------------------------------------------------------------------------------------------
# The sweep and the static evaluation


@dataclass(frozen=True)
class FunctionSummary:
    score_fn: str
    points: tuple[tuple[float, float], ...]  # (measured % zeroed, accuracy) per quantile, in quantile order
    within_1pt: float  # % of heads zeroed within 1 point of the base accuracy
    auc: float  # normalised AUC of the curve


@dataclass(frozen=True)
class SweepResult:
    task: str
    shots: int
    n_items: int
    base_accuracy: float
    base: ItemResults  # the un-intervened run (per-item predictions, pooled per-input scores)
    rows: tuple[dict, ...]  # one `evaluations` row per (score_fn, quantile), without the checkpoint columns
    summaries: dict[str, FunctionSummary]


def _requests_for(task: str, shots: int, fewshot_seed: int, limit: int | None) -> list[Request]:
    check_task(task)
    return winogrande_requests(load_winogrande_items(), shots=shots, seed=fewshot_seed, limit=limit)


def _row(task, shots, mode, score_fn, quantile, tau, result: ItemResults, base_accuracy: float) -> dict:
    """An `evaluations` row: the store keeps proportions as fractions in [0, 1] (this module computes in %)."""
    return {
        "task": task,
        "shots": shots,
        "mode": mode,
        "score_fn": score_fn,
        "quantile": quantile,
        "tau": tau,
        "frac_zeroed": result.pct_zeroed / 100.0,
        "accuracy": result.accuracy / 100.0,
        "n_items": result.n_items,
        "base_accuracy": base_accuracy / 100.0,
    }


def run_sweep(
    model,
    tokenizer,
    score_fns,
    *,
    task: str = "winogrande",
    quantiles=DEFAULT_QUANTILES,
    shots: int = 0,
    fewshot_seed: int = DEFAULT_FEWSHOT_SEED,
    limit: int | None = None,
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = True,
) -> SweepResult:
    """The threshold sweep of docs/SCORES.md §6 for each function: 1 un-intervened pass + len(quantiles) per function.

    Thresholds are the quantiles of the function's per-input scores of the un-intervened pass, pooled
    over layers, heads and inputs (">" functions use 1 - q); each point is measured (% zeroed, accuracy).
    """
    fns = tuple(parse_score_functions(score_fns))
    quantiles = tuple(float(q) for q in quantiles)
    bad = [q for q in quantiles if not 0.0 <= q <= 1.0]
    if not quantiles or bad:
        raise EvaluationError(f"quantiles must be a non-empty list of fractions in [0, 1], got {list(quantiles)}")
    encoded = encode_requests(
        tokenizer, _requests_for(task, shots, fewshot_seed, limit), batch_size, _model_device(model)
    )
    bar = _progress_bar(progress, len(encoded.batches) * (1 + len(fns) * len(quantiles)), "sweep")
    try:
        base = _evaluate_encoded(model, encoded, fns, None, seed, bar)
        rows, summaries = [], {}
        for fn in fns:
            direction = get_score_function(fn).direction
            points = []
            for q in quantiles:
                tau = pooled_threshold(base.scores_of(fn), q, direction)
                if math.isnan(tau):
                    raise EvaluationError(
                        f"{fn} gives no finite score on this model (all NaN), so no threshold "
                        f"can be placed; sweep another function"
                    )
                result = _evaluate_encoded(model, encoded, (fn,), DynamicZeroing(fn, tau), seed, bar)
                rows.append(_row(task, shots, "dynamic", fn, q, tau, result, base.accuracy))
                points.append((result.pct_zeroed, result.accuracy))
            summaries[fn] = FunctionSummary(
                fn, tuple(points), pct_zeroed_within_1pt(points, base.accuracy), normalised_auc(points)
            )
    finally:
        if bar is not None:
            bar.close()
    return SweepResult(task, shots, base.n_items, base.accuracy, base, tuple(rows), summaries)


def evaluate_static(
    model,
    tokenizer,
    heads,
    *,
    score_fn: str | None = None,
    tau: float | None = None,
    task: str = "winogrande",
    shots: int = 0,
    fewshot_seed: int = DEFAULT_FEWSHOT_SEED,
    limit: int | None = None,
    batch_size: int = 16,
    base_accuracy: float | None = None,
    progress: bool = False,
) -> dict:
    """One `evaluations` row (mode "static"): accuracy with the (layer, head) set `heads` zeroed on every input.

    `score_fn`/`tau` label the row (e.g. the tracker mask's function and tau); `base_accuracy` is
    measured with one extra un-intervened pass when not given.
    """
    heads = frozenset((int(layer), int(h)) for layer, h in heads)
    if score_fn is not None:
        get_score_function(score_fn)
    if tau is not None and score_fn is not None:
        tau = check_tau(score_fn, tau)
    encoded = encode_requests(
        tokenizer, _requests_for(task, shots, fewshot_seed, limit), batch_size, _model_device(model)
    )
    fns = (score_fn or "ahon_ln",)
    bar = _progress_bar(progress, len(encoded.batches) * (1 if base_accuracy is not None else 2), "static")
    try:
        if base_accuracy is None:
            base_accuracy = _evaluate_encoded(model, encoded, fns, None, 0, bar).accuracy
        result = _evaluate_encoded(model, encoded, fns, StaticZeroing(heads), 0, bar)
    finally:
        if bar is not None:
            bar.close()
    return _row(task, shots, "static", score_fn, None, tau, result, base_accuracy)
