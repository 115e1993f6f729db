"""The tiny OLMo-2 used offline: its byte-level BPE tokenizer, its config, and (issue 3) its pretraining run.

Every sequence starts with the document-boundary token `<|endoftext|>`, which is also the pad token:
`nn.Embedding(padding_idx=pad_token_id)` keeps its embedding at zero, so every sequence begins with a
zero-value "sink" (the first token that the attention-sink scores look at).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import cast

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import Olmo2Config, PreTrainedTokenizerFast

from dormant_tasks.atomic import atomic_file
from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking import DEMO_CORPUS

BOUNDARY = "<|endoftext|>"


def train_tokenizer(texts, vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    """A deterministic byte-level BPE trained on `texts`; `tokenizer(text)` prepends the boundary token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOUNDARY],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    boundary_id = tok.token_to_id(BOUNDARY)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOUNDARY} $A", pair=f"{BOUNDARY} $A {BOUNDARY} $B", special_tokens=[(BOUNDARY, boundary_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOUNDARY, eos_token=BOUNDARY, pad_token=BOUNDARY, model_max_length=4096
    )


def tiny_config(
    tokenizer: PreTrainedTokenizerFast,
    n_layers: int = 4,
    n_heads: int = 8,
    hidden_size: int = 128,
    max_positions: int = 512,
) -> Olmo2Config:
    boundary_id = cast(int, tokenizer.convert_tokens_to_ids(BOUNDARY))  # one token: one id
    return Olmo2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        max_position_embeddings=max_positions,
        pad_token_id=boundary_id,
        bos_token_id=boundary_id,
        eos_token_id=boundary_id,
        tie_word_embeddings=False,
    )


# --- the pretraining run (issue 3) -------------------------------------------------------------------

# Checkpoint steps: dense early (where heads first fall dormant), sparser later; the last step is always saved.
# The CPU code paths pinned for pretraining, so that any x86-64 machine computes the same weights: MKL's
# conditional numerical reproducibility (the SSE2-compatible path, whatever the CPU), ATen's scalar kernels and
# oneDNN's oldest x86-64 ISA. Read when torch and its libraries initialise: a process that imported torch
# without them pretrains in a child process that has them (`pretrain_tiny`); see benchmarks/tiny_determinism.py.
REPRODUCIBLE_ENV = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}
EARLY_CHECKPOINTS = (0, 10, 25, 50, 100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000)
LATE_CHECKPOINT_EVERY = 1000
MANIFEST = "series.json"
TRAINER_STATE = "trainer_state.json"
RECIPE_VERSION = 2  # bump when the training loop changes what a given config produces
# The default length, short so that `make demo` takes minutes: at lr 5e-3 heads fall dormant from step 25 and
# one settles by step 250 (at the earlier 1e-3 a 600-step run ended with no head dormant; 2,000 steps were needed).
DEFAULT_STEPS = 600


@dataclass(frozen=True)
class TinyRunConfig:
    """Everything that determines the weights of a tiny run; saved in `series.json` beside the checkpoints."""

    steps: int = DEFAULT_STEPS  # optimizer steps; the last one is always a checkpoint
    seed: int = 0  # torch seed for init and data order
    n_layers: int = 4
    n_heads: int = 8
    hidden_size: int = 128  # model width; head_dim = hidden_size / n_heads
    vocab_size: int = 2048  # byte-level BPE trained on the corpus
    seq_len: int = 64  # tokens per training sequence, the boundary token included
    batch_size: int = 8  # sequences per step
    lr: float = 5e-3  # AdamW peak learning rate (gradients clipped at norm 1)
    warmup_steps: int = 100  # linear warmup, then cosine decay to min_lr_ratio * lr
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    corpus_sha256: str = ""  # content hash of the training corpus, filled in by pretrain_tiny

    def __post_init__(self):
        positive = ("steps", "n_layers", "n_heads", "hidden_size", "vocab_size", "batch_size")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.seq_len < 2:
            raise ConfigError(f"seq_len must be at least 2 (the boundary token + one text token), got {self.seq_len}")
        if self.hidden_size % self.n_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not divisible by n_heads {self.n_heads}; "
                "pick a width that is a multiple of the head count"
            )
        if not self.lr > 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if self.warmup_steps < 0 or not 0 <= self.min_lr_ratio <= 1 or self.weight_decay < 0:
            raise ConfigError("warmup_steps and weight_decay must be >= 0 and min_lr_ratio in [0, 1]")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


@dataclass(frozen=True)
class TinyCheckpoint:
    name: str  # OLMo-2 branch convention, e.g. "stage1-step250-tokens128K"
    step: int
    tokens: int  # exact number of training tokens seen, boundary tokens included
    loss: float  # mean training loss of the steps since the previous checkpoint (step 0: initial loss)


@dataclass(frozen=True)
class TinyRun:
    out: Path
    config: TinyRunConfig
    checkpoints: tuple[TinyCheckpoint, ...]  # in training order
    trained: bool  # False when every checkpoint already existed (a no-op rerun)
    seconds: float


def checkpoint_steps(steps: int) -> list[int]:
    """The steps saved for a run of `steps` steps: EARLY_CHECKPOINTS, then every 1000, then the last step."""
    late = range(EARLY_CHECKPOINTS[-1] + LATE_CHECKPOINT_EVERY, steps, LATE_CHECKPOINT_EVERY)
    return sorted({s for s in (*EARLY_CHECKPOINTS, *late) if s < steps} | {steps})


def branch_name(step: int, tokens: int) -> str:
    """`stage1-step{S}-tokens{T}K`, T = tokens in thousands, rounded (the exact count is in trainer_state.json)."""
    return f"stage1-step{step}-tokens{round(tokens / 1000)}K"


def training_sequences(tokenizer: PreTrainedTokenizerFast, texts, seq_len: int) -> torch.Tensor:
    """All documents joined by the boundary token, cut into windows that each start with the boundary token.

    [n_sequences, seq_len]. The boundary token opens every window (the zero-value "sink") and also
    separates documents inside a window, as an end-of-text token does in OLMo-2's own data.
    """
    boundary_id = cast(int, tokenizer.convert_tokens_to_ids(BOUNDARY))  # one token: one id
    stream: list[int] = []
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        stream.append(boundary_id)
    body = seq_len - 1
    n = len(stream) // body
    if n < 1:
        raise ConfigError(
            f"the corpus holds {len(stream)} tokens, fewer than one sequence of {seq_len}; "
            "use a larger corpus or a shorter seq_len"
        )
    windows = torch.tensor(stream[: n * body], dtype=torch.long).view(n, body)  # [sequence, seq_len - 1]
    starts = torch.full((n, 1), boundary_id, dtype=torch.long)  # [sequence, 1]
    return torch.cat([starts, windows], dim=1)  # [sequence, seq_len]


def learning_rate(config: TinyRunConfig, step: int) -> float:
    """Linear warmup over warmup_steps, then cosine decay to min_lr_ratio * lr at the last step (step is 1-based)."""
    if step <= config.warmup_steps:
        return config.lr * step / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    floor = config.min_lr_ratio * config.lr
    return floor + (config.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def _batches(sequences: torch.Tensor, config: TinyRunConfig):
    """Deterministic data order: a fresh permutation of the sequences per epoch from a seeded generator."""
    generator = torch.Generator().manual_seed(config.seed)
    while True:
        order = torch.randperm(len(sequences), generator=generator)  # [sequence]
        for start in range(0, len(order) - config.batch_size + 1, config.batch_size):
            yield sequences[order[start : start + config.batch_size]]  # [batch, seq_len]


def _check_out_dir(out: Path, config: TinyRunConfig) -> None:
    """`out` must be empty, missing, or hold a series made with exactly this config."""
    manifest = out / MANIFEST
    if manifest.is_file():
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        mine = asdict(config) | {"recipe_version": RECIPE_VERSION}
        theirs = saved.get("config", {})
        diff = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        if diff:
            shown = ", ".join(f"{k}={theirs.get(k)!r} there vs {mine.get(k)!r} asked" for k in diff)
            raise ConfigError(
                f"{out} holds a tiny series made with a different config ({shown}); "
                "use another --model folder or rerun with the same options"
            )
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty and holds no {MANIFEST}; pass an empty or new --model folder")


def _write_json_atomic(path: Path, payload: dict) -> None:
    with atomic_file(path) as f:
        f.write((json.dumps(payload, indent=2) + "\n").encode("utf-8"))


@contextmanager
def _quiet_saving():
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    bars_on, hub_bars_on = hf_logging.is_progress_bar_enabled(), not are_progress_bars_disabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars_on:
            hf_logging.enable_progress_bar()
        (enable_progress_bars if hub_bars_on else disable_progress_bars)()


def _save_checkpoint(out: Path, model, tokenizer, config: TinyRunConfig, ckpt: TinyCheckpoint) -> None:
    """Save into a temp folder inside `out`, then rename: a checkpoint folder is complete or absent."""
    tmp = out / f".tmp-{ckpt.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with _quiet_saving():  # one bar per save would break the run's own bar
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = {
        "step": ckpt.step,
        "tokens": ckpt.tokens,
        "loss": ckpt.loss,
        "seed": config.seed,
        "tokens_per_step": config.tokens_per_step,
    }
    (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out / ckpt.name)


def _existing_checkpoint(out: Path, name: str) -> TinyCheckpoint | None:
    state_file = out / name / TRAINER_STATE
    if not state_file.is_file():
        return None
    state = json.loads(state_file.read_text(encoding="utf-8"))
    return TinyCheckpoint(name, state["step"], state["tokens"], state["loss"])


def _plan(out, steps, seed, corpus, recipe) -> tuple[Path, TinyRunConfig, bytes, list[int], dict[int, str], dict]:
    """The run's config and which of its checkpoints `out` already holds (refusing an incompatible folder)."""
    out = Path(out)
    corpus = Path(corpus)
    unknown = set(recipe) - {f.name for f in fields(TinyRunConfig)} | ({"corpus_sha256"} & set(recipe))
    if unknown:
        raise ConfigError(f"unknown recipe option(s) {sorted(unknown)}; use fields of TinyRunConfig")
    if not corpus.is_file():
        raise ConfigError(f"corpus file {str(corpus)!r} does not exist; pass a UTF-8 file with one document per line")
    corpus_bytes = corpus.read_bytes()
    config = TinyRunConfig(steps=steps, seed=seed, corpus_sha256=hashlib.sha256(corpus_bytes).hexdigest(), **recipe)
    _check_out_dir(out, config)
    save_at = checkpoint_steps(config.steps)
    names = {s: branch_name(s, s * config.tokens_per_step) for s in save_at}
    existing = {s: _existing_checkpoint(out, names[s]) for s in save_at}
    return out, config, corpus_bytes, save_at, names, existing


def is_complete(
    out: str | Path, steps: int = DEFAULT_STEPS, seed: int = 0, *, corpus: str | Path = DEMO_CORPUS, **recipe
) -> bool:
    """True when `out` already holds every checkpoint of this run (so `pretrain_tiny` would do nothing)."""
    return all(_plan(out, steps, seed, corpus, recipe)[-1].values())


def pretrain_tiny(
    out: str | Path,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    *,
    corpus: str | Path = DEMO_CORPUS,
    threads: int = 2,
    progress: bool = True,
    **recipe,
) -> TinyRun:
    """Pretrain a tiny OLMo-2 on `corpus` and save branch-named checkpoints into `out` (a local series).

    `recipe` overrides other `TinyRunConfig` fields (n_layers, n_heads, hidden_size, seq_len, batch_size,
    lr, ...). Same config -> bitwise-identical weights at every checkpoint, on any x86-64 machine: training
    runs under `REPRODUCIBLE_ENV` (in a child process when this one started without it, since torch reads it
    at start-up), whose code paths give the same floats whatever the CPU's instruction set or `threads`
    (measured: benchmarks/tiny_determinism.py). A rerun into a folder that already holds every checkpoint of
    this config is a no-op; missing checkpoints (an interrupted run) are recomputed by replaying the
    deterministic run. `threads` only sets torch's CPU thread count, so it is not part of the config.
    """
    started = time.perf_counter()
    if threads < 1:
        raise ConfigError(f"threads must be at least 1, got {threads}")
    out, config, corpus_bytes, save_at, names, existing = _plan(out, steps, seed, corpus, recipe)
    if all(existing.values()):
        return TinyRun(out, config, tuple(existing[s] for s in save_at), False, time.perf_counter() - started)

    if not reproducible_process():
        _pretrain_in_child(out, steps, seed, corpus, threads, progress, recipe)
        made = [_existing_checkpoint(out, names[s]) for s in save_at]
        return TinyRun(out, config, tuple(c for c in made if c), True, time.perf_counter() - started)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".tmp-*"):  # left by an interrupted run of this series
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    _write_json_atomic(
        out / MANIFEST,
        {
            "config": asdict(config) | {"recipe_version": RECIPE_VERSION},
            "checkpoints": [names[s] for s in save_at],
            "complete": False,
        },
    )

    saved_threads, saved_deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        checkpoints = _train(out, config, corpus_bytes.decode("utf-8"), save_at, names, existing, progress)
    finally:
        torch.set_num_threads(saved_threads)
        torch.use_deterministic_algorithms(saved_deterministic)
    _write_json_atomic(
        out / MANIFEST,
        {
            "config": asdict(config) | {"recipe_version": RECIPE_VERSION},
            "checkpoints": [c.name for c in checkpoints],
            "complete": True,
        },
    )
    return TinyRun(out, config, tuple(checkpoints), True, time.perf_counter() - started)


def reproducible_process() -> bool:
    """Whether this process started with the CPU code paths pinned (`REPRODUCIBLE_ENV`)."""
    return all(os.environ.get(k) == v for k, v in REPRODUCIBLE_ENV.items())


def _pretrain_in_child(out: Path, steps, seed, corpus, threads, progress, recipe) -> None:
    """`pretrain_tiny` in a fresh Python with `REPRODUCIBLE_ENV` (its progress on this stderr); its error, if
    any, raised here as the same DormantError class with the same one line."""
    import subprocess
    import sys
    import tempfile

    from dormant_tasks import errors

    package_root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, **REPRODUCIBLE_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="dormant-pretrain-") as tmp:
        error_file = Path(tmp) / "error.json"
        args = {"out": str(out), "steps": steps, "seed": seed, "corpus": str(corpus), "threads": threads}
        args |= {"progress": progress, "recipe": recipe, "error_file": str(error_file)}
        done = subprocess.run([sys.executable, "-m", "dormant_tasks.tiny", json.dumps(args)], env=env)
        if error_file.is_file():
            failed = json.loads(error_file.read_text(encoding="utf-8"))
            raise getattr(errors, failed["class"], errors.DormantError)(failed["message"])
        if done.returncode:
            raise errors.DormantError(f"the pretraining process exited with status {done.returncode}; see above")


def _child_main(argv: list[str]) -> int:
    """The child of `_pretrain_in_child`: one `pretrain_tiny` call, its DormantError written for the parent."""
    from dormant_tasks.errors import DormantError

    args = json.loads(argv[0])
    try:
        pretrain_tiny(
            args["out"],
            args["steps"],
            args["seed"],
            corpus=args["corpus"],
            threads=args["threads"],
            progress=args["progress"],
            **args["recipe"],
        )
    except DormantError as e:
        Path(args["error_file"]).write_text(json.dumps({"class": type(e).__name__, "message": str(e)}), "utf-8")
        return 2
    return 0


def _train(out, config, corpus_text, save_at, names, existing, progress) -> list[TinyCheckpoint]:
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.progress import progress_bar

    texts = [line for line in corpus_text.splitlines() if line.strip()]
    tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
    sequences = training_sequences(tokenizer, texts, config.seq_len)  # [n_sequences, seq_len]
    torch.manual_seed(config.seed)
    model_config = tiny_config(
        tokenizer, config.n_layers, config.n_heads, config.hidden_size, max_positions=max(512, config.seq_len)
    )
    model = Olmo2ForCausalLM(model_config)
    model.train()
    # No weight decay on norms (as in OLMo-2); the boundary token's embedding row gets no gradient either way.
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=(0.9, 0.95),
        fused=True,
    )  # one kernel per step instead of one per tensor: ~15% faster here
    batches = _batches(sequences, config)
    last = max(s for s in save_at if existing[s] is None)  # replaying past it would change nothing on disk
    checkpoints: list[TinyCheckpoint] = []
    losses: list[float] = []

    def checkpoint(step: int, loss: float) -> None:
        ckpt = existing[step] or TinyCheckpoint(names[step], step, step * config.tokens_per_step, loss)
        if existing[step] is None:
            _save_checkpoint(out, model, tokenizer, config, ckpt)
        checkpoints.append(ckpt)

    batch = next(batches)  # [batch, seq_len]
    with torch.no_grad():
        initial_loss = model(input_ids=batch, labels=batch).loss.item()
    checkpoint(0, initial_loss)
    # A bar on a terminal, a plain line at least every 20 s on a pipe or file (`make demo > log`, CI).
    bar = progress_bar(range(1, last + 1), desc="pretrain-tiny", unit="step", enabled=progress)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        loss = model(input_ids=batch, labels=batch).loss  # labels are shifted inside the model
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if step in names:
            checkpoint(step, sum(losses) / len(losses))
            losses.clear()
        batch = next(batches)
    bar.close()
    return checkpoints + [existing[s] for s in save_at if s > last]


if __name__ == "__main__":  # `_pretrain_in_child`'s child
    import sys

    sys.exit(_child_main(sys.argv[1:]))
