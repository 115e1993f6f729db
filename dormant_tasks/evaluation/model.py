"""lm-evaluation-harness as the task layer: `DormantLM`, an lm-eval `LM` whose forward passes are the score engine's.

lm-eval builds the requests and scores the answers; this model answers them with `scoring.scoring_pass`, so every
pass also yields the per-input scores and applies the current setting's zeroing (`DormantLM.zeroing`). It answers
as lm-eval's `HFLM` does for a causal model (context/continuation split, left truncation, the summed
log-probability and greedy check; greedy generation through the checkpoint's non-sampling logits processors,
`generation_adapter`), except, on purpose: right padding and no KV cache (the intervention sees every token, as in
the authors' runs), identical input rows run once (`DormantLM.record` counts the heads zeroed over the rows run),
and the BOS rule (`Bos`: `paper` encodes as lm-eval 0.4.5 did, `tokenizer` as 0.4.13 does). Importing this module
registers it in lm-eval's registry as `dormant`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import numpy as np
import torch

from dormant_tasks.engine import DEFAULT_FN, DynamicZeroing, StaticZeroing, batch_runs, padded_batch, scoring_pass
from dormant_tasks.errors import EvaluationError
from dormant_tasks.extras import require_extra

try:
    from lm_eval.api.model import TemplateLM
except ImportError:  # the core install (no eval extra): one line naming the extra rather than a traceback
    require_extra("eval", "the evaluation model (dormant_tasks.evaluation.model)")
    raise
from dormant_tasks.evaluation.chat_date_adapter import chat_day
from dormant_tasks.evaluation.generation_adapter import eos_token_ids, generation_config, logits_processors
from dormant_tasks.evaluation.request import Bos, parse_chat_date

DEFAULT_MAX_LENGTH = 2048  # HFLM's fallback when the model states no context length
MAX_GEN_TOKS = 256  # HFLM's default max_gen_toks
REGISTRY_NAME = "dormant"  # lm_eval.simple_evaluate(model="dormant", model_args="pretrained=...,zeroing=FN:TAU")


def _special_tokens_kwargs(tokenizer, text: str, bos: Bos, model_type: str) -> dict:
    if bos is Bos.PAPER:
        return {"add_special_tokens": "gemma" in (model_type or "")}
    bos_str = getattr(tokenizer, "bos_token", None)
    if bos_str and text.startswith(bos_str):
        return {"add_special_tokens": False}
    return {}


def encode_context(tokenizer, text: str, bos: Bos | str, model_type: str = "") -> list[int]:
    """Token ids of `text` under the BOS rule `bos` (HFLM's `tok_encode` with add_special_tokens unset)."""
    kwargs = _special_tokens_kwargs(tokenizer, text, Bos(bos), model_type)
    return list(tokenizer.encode(text, verbose=False, **kwargs))  # long few-shot prompts are cut by the caller


def encode_pair(tokenizer, context: str, continuation: str, bos: Bos | str, model_type: str = ""):
    """(context ids, continuation ids) as lm-eval's causal `_encode_pair`: trailing spaces of the context move to
    the continuation, the joined text is encoded once and split at the context's length."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = encode_context(tokenizer, context + continuation, bos, model_type)
    ctx = encode_context(tokenizer, context, bos, model_type)
    return ctx, whole[len(ctx) :]


def render_chat(
    tokenizer, chat_history: list[dict[str, str]], add_generation_prompt: bool = True, chat_date: date | None = None
) -> str:
    """As HFLM's apply_chat_template: the tokenizer's template rendered to text (lm-eval tokenises it later), on
    `chat_date` (default today) as the day the template sees."""
    if not getattr(tokenizer, "chat_template", None):
        raise EvaluationError(
            "the tokenizer has no chat template; use --chat-template off (or auto), or a tokenizer with one"
        )
    from jinja2 import TemplateError  # its SecurityError too: what the sandbox refuses

    try:
        with chat_day(tokenizer.chat_template, chat_date or date.today()) as date_variables:
            return tokenizer.apply_chat_template(
                chat_history,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=not add_generation_prompt,
                **date_variables,
            )
    except TemplateError as e:  # a template that the sandbox refuses, that does not parse, or that raises itself
        reason = " ".join(str(e).split())[:200] or "no message"
        raise EvaluationError(
            f"the tokenizer's chat template cannot be rendered ({type(e).__name__}: {reason}); "
            "use --chat-template off, or a tokenizer whose template renders"
        ) from None


@dataclass
class PassRecord:
    """What the forward passes of one setting did: rows run, heads zeroed, and (when kept) per-row scores."""

    score_fns: tuple[str, ...]
    keep_scores: bool
    n_rows: int = 0
    n_zeroed: int = 0  # (row, layer, head) triples zeroed
    n_slots: int = 0  # (row, layer, head) triples run
    scores: list[np.ndarray] = field(default_factory=list)  # float64 [rows, fn, layer, head] per pass

    @property
    def frac_zeroed(self) -> float:
        """Heads zeroed over the forward rows actually run: zeroed (row, layer, head) / all of them."""
        return self.n_zeroed / self.n_slots if self.n_slots else 0.0

    def scores_of(self, score_fn: str) -> np.ndarray:
        """[rows, layer, head] per-row scores of one function (rows in the order they ran)."""
        if not self.scores:
            raise EvaluationError("no scores were kept in this run; start the record with keep_scores=True")
        return np.concatenate([s[:, self.score_fns.index(score_fn)] for s in self.scores])


class DormantLM(TemplateLM):
    """An lm-eval causal LM run through the score engine (see the module docstring)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        bos: Bos | str = Bos.PAPER,
        batch_size: int = 16,
        max_batch_tokens: int = 65_536,
        score_fns=(),
        seed: int = 0,
        max_length: int | None = None,
        chat_date: date | None = None,
    ):
        super().__init__()
        if tokenizer is None or not callable(getattr(tokenizer, "encode", None)):
            raise EvaluationError("no tokenizer given; load the checkpoint's tokenizer with the model and pass it")
        if batch_size < 1:
            raise EvaluationError(f"--batch-size must be at least 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.bos = Bos(bos)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.score_fns = tuple(score_fns) or (DEFAULT_FN,)  # the engine scores at least one function
        self.seed = seed
        self.zeroing: DynamicZeroing | StaticZeroing | None = None
        config = model.config.get_text_config()
        self.model_type = getattr(config, "model_type", "") or ""
        self._max_length = max_length or getattr(config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH
        self._device = next(model.parameters()).device
        self._encodings: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
        self.record = PassRecord(self.score_fns, keep_scores=False)
        self.chat_date = chat_date or date.today()  # the day chat templates see (`chat_day`)

    # ------------------------------------------------------------------ lm-eval's model interface

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        return int(self._max_length)

    @property
    def max_gen_toks(self) -> int:
        return MAX_GEN_TOKS

    @property
    def device(self):
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return self.tokenizer.name_or_path.replace("/", "__")

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        if add_special_tokens is not None:
            return list(self.tokenizer.encode(string, add_special_tokens=add_special_tokens, verbose=False))
        return encode_context(self.tokenizer, string, self.bos, self.model_type)

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)

    def _encode_pair(self, context: str, continuation: str):
        key = (context, continuation)
        if key not in self._encodings:  # a sweep asks the same requests once per setting: tokenise once
            self._encodings[key] = encode_pair(self.tokenizer, context, continuation, self.bos, self.model_type)
        return self._encodings[key]

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return render_chat(self.tokenizer, chat_history, add_generation_prompt, self.chat_date)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise EvaluationError(
            "perplexity tasks (loglikelihood_rolling) are not supported by the intervention evaluation; "
            "pick a multiple-choice or generation task"
        )

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> DormantLM:
        """The model lm-eval builds for `simple_evaluate(model="dormant", model_args=...)`: `pretrained` (folder or
        Hub repo, required), `revision`, `dtype` (float32), `precision` (dtype or paper), `device` (auto), `bos`
        (paper), `batch_size` (16), `seed`, `chat_date` (YYYY-MM-DD; today), and `zeroing=FN:TAU` for a dynamic intervention (none: the model
        as is), e.g. "pretrained=allenai/OLMo-2-1124-7B,zeroing=ahon_ln:0.5"."""
        from lm_eval.utils import simple_parse_args_string

        from dormant_tasks.checkpoints import load_model_at
        from dormant_tasks.engine import DynamicZeroing
        from dormant_tasks.evaluation.precision import precision_for

        args = simple_parse_args_string(arg_string or "")
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None}
        known = {"pretrained", "revision", "dtype", "precision", "device", "bos", "batch_size", "seed", "zeroing"}
        known |= {"chat_date"}
        unknown = sorted(set(args) - known)
        if unknown or "pretrained" not in args:
            what = f"unknown model_args {unknown[0]!r}" if unknown else "model_args lack pretrained=PATH_OR_REPO"
            raise EvaluationError(f"dormant: {what}; it takes {', '.join(sorted(known))}")
        pretrained = str(args["pretrained"])
        dtype, int8 = precision_for(pretrained, args.get("precision", "dtype"), str(args.get("dtype", "float32")))
        device = str(args.get("device") or extra.get("device") or "auto")
        model, tokenizer = load_model_at(pretrained, args.get("revision"), dtype, device, int8=int8)
        zeroing = None
        if args.get("zeroing"):
            fn, _, tau = str(args["zeroing"]).partition(":")
            zeroing = DynamicZeroing(fn, float(tau))
        batch = extra.get("batch_size", args.get("batch_size", 16))
        lm = cls(
            model,
            tokenizer,
            bos=args.get("bos", Bos.PAPER),
            batch_size=int(batch) if str(batch).isdigit() else 16,  # lm-eval's "auto" batch size: ours
            score_fns=(zeroing.score_fn,) if zeroing else (),
            seed=int(args.get("seed", 0)),
            chat_date=parse_chat_date(args["chat_date"]) if args.get("chat_date") else None,
        )
        lm.zeroing = zeroing
        return lm

    # ------------------------------------------------------------------ the record of a setting

    def start_record(self, keep_scores: bool = False) -> PassRecord:
        """A fresh record for the next requests (keep_scores: keep each row's scores, for placing thresholds)."""
        self.record = PassRecord(self.score_fns, keep_scores=keep_scores)
        return self.record

    def _pass(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, row_ids) -> torch.Tensor:
        result = scoring_pass(
            self.model,
            input_ids.to(self._device),
            attention_mask.to(self._device),
            self.score_fns,
            zeroing=self.zeroing,
            seed=self.seed,
            input_indices=row_ids,
        )
        rec = self.record
        rec.n_rows += len(row_ids)
        rec.n_zeroed += int(result.zeroed.sum())
        rec.n_slots += result.zeroed.size
        if rec.keep_scores:
            rec.scores.append(result.scores)
        return result.logits

    # ------------------------------------------------------------------ log-likelihoods

    def row_batches(self, requests):
        """(spans, batches) of lm-eval's tokenised requests: spans[i] = (row, continuation ids) of request i;
        batches = [(row ids, input_ids [batch, seq], attention_mask [batch, seq])], right-padded, one row per
        distinct input, longest first (little padding), at most `batch_size` rows and `max_batch_tokens` tokens."""
        rows: dict[tuple[int, ...], int] = {}  # input row -> its index (first appearance)
        spans = []
        for _, context_enc, continuation_enc in requests:
            if not continuation_enc:
                raise EvaluationError("a request has an empty continuation; lm-eval gave nothing to score")
            whole = (list(context_enc) + list(continuation_enc))[-(self.max_length + 1) :]
            row = tuple(whole[:-1])
            spans.append((rows.setdefault(row, len(rows)), tuple(continuation_enc[-self.max_length :])))
        inputs = list(rows)
        order = sorted(range(len(inputs)), key=lambda i: -len(inputs[i]))
        batches = []
        for run in batch_runs([len(inputs[i]) for i in order], self.batch_size, self.max_batch_tokens):
            ids = [order[j] for j in run]
            input_ids, mask = padded_batch([inputs[i] for i in ids], self.tokenizer.pad_token_id)  # [batch, seq]
            batches.append((ids, input_ids, mask))
        return spans, batches

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        """[(summed log-prob of the continuation, greedy?)] per request; one forward row per distinct input."""
        spans, batches = self.row_batches(requests)
        needed: dict[int, int] = {}
        for row, cont in spans:
            needed[row] = max(needed.get(row, 0), len(cont))
        logprobs: dict[int, torch.Tensor] = {}
        for ids, input_ids, mask in batches:
            logits = self._pass(input_ids, mask, ids)  # [batch, seq, vocab]
            lengths = mask.sum(-1).tolist()
            for r, i in enumerate(ids):
                n, k = lengths[r], needed[i]
                logprobs[i] = torch.log_softmax(logits[r, n - k : n].float(), dim=-1).cpu()  # [k, vocab]
            del logits
        out = []
        for row, cont in spans:
            lp = logprobs[row][-len(cont) :]  # [len(cont), vocab]: the positions predicting the continuation
            target = torch.tensor(cont)
            greedy = bool(torch.equal(lp.argmax(-1), target))
            out.append((float(lp.gather(-1, target[:, None]).sum().double()), greedy))
        return out

    # ------------------------------------------------------------------ generation

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy generation, batched, no KV cache: each step is one scoring pass over the whole sequences. It
        stops and scores as `model.generate` under lm-eval's HFLM (`GenerationSettings`)."""
        out: list[str | None] = [None] * len(requests)
        by_kwargs: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            by_kwargs.setdefault(repr(sorted(req.args[1].items())), []).append(i)
        for indices in by_kwargs.values():
            kwargs = dict(requests[indices[0]].args[1])
            until = kwargs.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            eot = self.tok_decode([self.eot_token_id], skip_special_tokens=False)
            if eot not in until:
                until.append(eot)
            max_gen = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
            settings = GenerationSettings.of(self.model, kwargs, self._device)
            budget = self.max_length - max_gen
            contexts = {i: self.tok_encode(requests[i].args[0])[-budget:] for i in indices}
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                for i, text in zip(chunk, self._greedy({i: contexts[i] for i in chunk}, until, max_gen, settings)):
                    out[i] = text
        return out  # type: ignore[return-value]

    def _greedy(self, contexts: dict[int, list[int]], until: list[str], max_gen: int, settings) -> list[str]:
        seqs = {i: list(ids) for i, ids in contexts.items()}
        generated: dict[int, list[int]] = {i: [] for i in seqs}
        processors = {i: settings.processors(len(ids)) for i, ids in contexts.items()}
        stop_ids = settings.eos_ids | {self.eot_token_id}
        live = list(seqs)
        for _ in range(max_gen):
            if not live:
                break
            input_ids, mask = padded_batch([seqs[i] for i in live], self.tokenizer.pad_token_id)  # [batch, seq]
            logits = self._pass(input_ids, mask, live)
            still = []
            for r, i in enumerate(live):
                scores = logits[r, len(seqs[i]) - 1][None].float()  # [1, vocab], as generate takes the last logits
                seen = torch.tensor([seqs[i]], device=scores.device)  # [1, seq]: the prompt and what followed
                token = int(processors[i](seen, scores).argmax())
                seqs[i].append(token)
                generated[i].append(token)
                text = self.tok_decode(generated[i], skip_special_tokens=False)
                if token not in stop_ids and not any(s and s in text for s in until):
                    still.append(i)
            live = still
        texts = []
        for i in contexts:
            text = self.tok_decode(generated[i])
            for stop in until:
                if stop:
                    text = text.split(stop)[0]
            texts.append(text)
        return texts


@dataclass
class GenerationSettings:
    """What `model.generate` does at each greedy step under lm-eval's HFLM: the checkpoint's `generation_config` merged
    with a request's generation arguments, its end-of-text ids and its non-sampling logits processors, built by
    transformers as `generate` builds them."""

    model: object
    config: object  # transformers.GenerationConfig, special tokens prepared
    device: torch.device
    eos_ids: set[int]

    @classmethod
    def of(cls, model, kwargs: dict, device) -> GenerationSettings:
        """HFLM's arguments to `generate` (0.4.5 and 0.4.13 alike): temperature 0 unless given, then greedy
        (do_sample False) when it is 0 and do_sample is unset, and the temperature dropped under greedy."""
        kwargs = dict(kwargs)
        kwargs["temperature"] = kwargs.get("temperature", 0.0)
        if kwargs["temperature"] == 0.0 and kwargs.get("do_sample") is None:
            kwargs["do_sample"] = False
        if kwargs.get("do_sample") is False and kwargs["temperature"] == 0.0:
            kwargs.pop("temperature")
        try:
            config = generation_config(model, kwargs, device)
        except (ValueError, TypeError) as e:
            raise EvaluationError(f"the generation arguments {kwargs} do not make a generation config: {e}") from None
        if config.do_sample or (config.num_beams or 1) > 1:
            raise EvaluationError(
                "sampling or beam search (do_sample, num_beams in the task or the checkpoint's generation_config) "
                "is not supported; generation is greedy"
            )
        return cls(model, config, device, eos_token_ids(config))

    def processors(self, prompt_length: int):
        """The LogitsProcessorList `generate` builds for a prompt of this many tokens (greedy: no warpers)."""
        return logits_processors(self.model, self.config, prompt_length, self.device)


def _register() -> None:
    """`DormantLM` in lm-eval's model registry as "dormant" (its `register_model`, as its own models do). lm-eval's
    built-in names are loaded first: it fills only an empty registry with them, lazily."""
    import lm_eval.models  # noqa: F401
    from lm_eval.api.registry import register_model

    register_model(REGISTRY_NAME)(DormantLM)


_register()
