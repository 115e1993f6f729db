"""WinoGrande as lm-evaluation-harness scores it ("partial evaluation", docs/SCORES.md §6), as token sequences.

With k = index of "_" in the sentence: context_c = sentence[:k] + option_c, continuation =
" " + sentence[k+1:].strip(); the predicted option is the one whose context gives the continuation
the higher summed log-likelihood. Few-shot examples (lm-eval's format: `context_answer + " " +
continuation`, joined by "\\n\\n") come from the bundled dev set itself, never the scored item, drawn
as lm-eval's default sampler draws them (one `random.Random(seed)` advanced item by item, n+1 drawn,
copies of the scored item removed), so a k-shot run matches lm-eval's on the same split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .errors import EvaluationError

TARGET_DELIMITER = " "  # lm-eval: between a few-shot example's context and its continuation
FEWSHOT_DELIMITER = "\n\n"  # lm-eval: after each few-shot example
DEFAULT_FEWSHOT_SEED = 1234  # lm-eval's default fewshot_random_seed


@dataclass(frozen=True)
class Request:
    """One WinoGrande item: two contexts (one per option) sharing one continuation."""

    index: int  # position of the item in the list it was built from
    contexts: tuple[str, str]  # few-shot prefix + sentence[:k] + option_c
    continuation: str  # " " + sentence[k+1:].strip()
    label: int  # 0 or 1: the correct option


@dataclass(frozen=True)
class EncodedOption:
    """One (item, option) sequence as the model sees it: lm-eval's (context + continuation)[:-1]."""

    input_ids: tuple[int, ...]  # context tokens + continuation tokens, last one dropped (never a query)
    n_context: int  # tokens of the context; continuation token t is predicted at position n_context - 1 + t
    continuation_ids: tuple[int, ...]


def _split(sentence: str) -> tuple[str, str]:
    k = sentence.find("_")
    if k < 0:
        raise EvaluationError(f"WinoGrande sentence has no blank '_': {sentence!r}; every item needs one")
    return sentence[:k], sentence[k + 1 :].strip()


def _answer(item: dict) -> int:
    try:
        return {"1": 0, "2": 1}[str(item["answer"])]
    except KeyError:
        raise EvaluationError(f"WinoGrande item has answer {item.get('answer')!r}; it must be '1' or '2'") from None


def fewshot_example(item: dict) -> str:
    """A solved example as lm-eval renders it in a few-shot prompt."""
    head, tail = _split(item["sentence"])
    option = (item["option1"], item["option2"])[_answer(item)]
    return head + option + TARGET_DELIMITER + tail + FEWSHOT_DELIMITER


def sample_shots(items: list[dict], shots: int, seed: int = DEFAULT_FEWSHOT_SEED) -> list[list[int]]:
    """For every item (in order) the indices of its `shots` examples, never the item itself."""
    if shots < 0:
        raise EvaluationError(f"shots must be 0 or more, got {shots}")
    if shots == 0:
        return [[] for _ in items]
    if shots >= len(items):
        raise EvaluationError(f"{shots}-shot needs more than {shots} items, got {len(items)}; lower --shots")
    rnd = random.Random(seed)
    pool = list(range(len(items)))
    out = []
    for item in items:
        drawn = [j for j in rnd.sample(pool, shots + 1) if items[j] != item][:shots]
        if len(drawn) < shots:  # the item has identical copies in the pool: draw again without them
            drawn = rnd.sample([j for j in pool if items[j] != item], shots)
        out.append(drawn)
    return out


def winogrande_requests(
    items: list[dict], shots: int = 0, seed: int = DEFAULT_FEWSHOT_SEED, limit: int | None = None
) -> list[Request]:
    """The first `limit` items as requests; few-shot examples are drawn from all of `items`."""
    if limit is not None and limit < 1:
        raise EvaluationError(f"limit must be at least 1, got {limit}; leave it out to use every item")
    shot_indices = sample_shots(items, shots, seed)
    n = len(items) if limit is None else min(limit, len(items))
    requests = []
    for i in range(n):
        item = items[i]
        head, tail = _split(item["sentence"])
        prefix = "".join(fewshot_example(items[j]) for j in shot_indices[i])
        contexts = (prefix + head + item["option1"], prefix + head + item["option2"])
        requests.append(Request(i, contexts, TARGET_DELIMITER + tail, _answer(item)))
    return requests


def encode_option(tokenizer, context: str, continuation: str) -> EncodedOption:
    """Tokenise as lm-eval's HFLM `_encode_pair` does for a causal model.

    Trailing whitespace of the context moves to the continuation; the whole text is encoded once
    (the tokenizer's own special-token convention) and the context's token count splits it, so the
    continuation's tokens are those of the joined text.
    """
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = tokenizer.encode(context + continuation)
    n_context = len(tokenizer.encode(context))
    cont = whole[n_context:]
    if n_context == 0 or not cont:
        raise EvaluationError(
            f"context {context!r} / continuation {continuation!r} encode to "
            f"{n_context} / {len(cont)} tokens; both need at least one"
        )
    return EncodedOption(tuple(whole[:-1]), n_context, tuple(cont))
