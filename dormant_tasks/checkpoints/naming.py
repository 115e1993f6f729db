"""Parse, order and select the checkpoints (revisions) of a series, whatever its source (docs/CHECKPOINTS.md §2, §5,
§6, §8: the name forms, the series order, the selection).

A token count is parsed from the name (never built from a step; suffix K, M, B, T or none); names without one
(Pythia's `step{S}`, LLM360's `ckpt_{N}`, OLMo-3's `stage{N}-step{S}`) get step x tokens per step
(`--tokens-per-step`, else `KNOWN_TOKENS_PER_STEP`), else listing is refused in one line. `main` has `UNKNOWN` (-1)
stage, step and tokens and sorts after every other revision.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from dormant_tasks.checkpoints.tokens import (
    TOKEN_UNITS,
    UNKNOWN,
    TokenAxis,
    TokensPerStep,
    stage_tokens_per_step,
)
from dormant_tasks.checkpoints.tokens import format_tokens as format_tokens  # the one format, said here as before
from dormant_tasks.errors import ConfigError, did_you_mean

MAIN = "main"

_NAME = re.compile(
    r"(?:stage(?P<stage>\d+)-(?:ingredient(?P<ingredient>\d+)-)?)?"
    r"step(?P<step>\d+)-tokens(?P<tokens>\d+(?:\.\d+)?)(?P<unit>[KMBT]?)",
    re.IGNORECASE,
)
# Names that carry a step but no token count: Pythia's `step{S}`, LLM360's `ckpt_{N}`, and OLMo-3's stage names.
_STEP_ONLY = re.compile(r"(?:step|ckpt_)(?P<step>\d+)", re.IGNORECASE)
_STAGE_STEP = re.compile(r"stage(?P<stage>\d+)-(?:ingredient(?P<ingredient>\d+)-)?step(?P<step>\d+)", re.IGNORECASE)

# Tokens per optimizer step of public series whose names carry none, by repo id pattern (fnmatch, lower case).
# Pythia: 1,024 sequences x 2,048 tokens per batch, for every size and the deduped runs alike. OLMo-3: the global
# batch sizes of OLMo-core's official scripts (src/scripts/official/OLMo3/): 7B stage 1 8,192 x 512, stage 2
# (midtraining) 2**21, stage 3 (long context) 65,536 x 64; 32B 2**23, 2**22 (each ingredient), 2**23. They give the
# model cards' totals: 7B 1,413,814 steps x 4,194,304 = 5.93T, 32B 656,000 x 8,388,608 = 5.50T.
KNOWN_TOKENS_PER_STEP: dict[str, TokensPerStep] = {
    "eleutherai/pythia-*": 2_097_152,
    "allenai/olmo-3-1025-7b": {1: 4_194_304, 2: 2_097_152, 3: 4_194_304},
    "allenai/olmo-3-1125-32b": {1: 8_388_608, 2: 4_194_304, 3: 8_388_608},
}


@dataclass(frozen=True)
class Revision:
    """One checkpoint of a series. `commit` is the Hub commit sha (None for local folders, whose
    content hash is computed when loaded); `path` is set for local checkpoint folders."""

    name: str
    stage: int
    step: int
    tokens: int
    ingredient: int | None = None
    commit: str | None = None
    path: Path | None = None

    @property
    def is_main(self) -> bool:
        return self.name == MAIN

    @property
    def sort_key(self) -> tuple:
        """The series order (`series_sort_key`) of this revision."""
        return series_sort_key(self.name, self.stage, self.ingredient, self.step, self.tokens)


def series_sort_key(name: str, stage: int, ingredient: int | None, step: int, tokens: int) -> tuple:
    """The one series order, for a `Revision` or a stored row alike: stage 1 by step, then each later stage's
    ingredients by (ingredient, step), then `main`. Main is ranked last by its name, not by its stored
    stage, which is UNKNOWN (-1) and would otherwise put it first. Ties fall to tokens, then the name."""
    return (name == MAIN, stage, ingredient or 0, step, tokens, name)


def parse_revision_name(name: str, tokens_per_step: TokensPerStep | None = None) -> Revision | None:
    """The Revision a branch/folder name stands for, or None when it follows none of the known forms. A name
    without a token count (`step{S}`, `ckpt_{N}`, `stage{N}-step{S}`) has tokens S x its stage's
    `tokens_per_step`, or UNKNOWN without it."""
    if name == MAIN:
        return Revision(MAIN, stage=UNKNOWN, step=UNKNOWN, tokens=UNKNOWN)
    m = _NAME.fullmatch(name)
    if m is None:
        m = _STAGE_STEP.fullmatch(name) or _STEP_ONLY.fullmatch(name)
        if m is None:
            return None
        groups = m.groupdict()
        stage, step = int(groups.get("stage") or 1), int(m["step"])
        ingredient = int(groups["ingredient"]) if groups.get("ingredient") is not None else None
        per_step = stage_tokens_per_step(tokens_per_step, stage)
        tokens = UNKNOWN if per_step is None else step * per_step
        return Revision(name, stage=stage, step=step, tokens=tokens, ingredient=ingredient)
    tokens = int(Decimal(m["tokens"]) * TOKEN_UNITS[m["unit"].upper()])
    ingredient = int(m["ingredient"]) if m["ingredient"] is not None else None
    return Revision(name, stage=int(m["stage"] or 1), step=int(m["step"]), tokens=tokens, ingredient=ingredient)


def name_token_unit(name: str) -> int | None:
    """The rounding unit of the token count a name carries (`tokens128K` -> 1,000, `tokens4.2B` -> 100M); None
    for a name without one."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    decimals = len(m["tokens"].partition(".")[2])
    return max(1, TOKEN_UNITS[m["unit"].upper()] // 10**decimals)


@dataclass
class Listing:
    """The revisions of one source in training order, and the names that were not checkpoints; `tokens` says
    where the token axis' tokens per step came from and which names disagreed with it (`tokens.token_axis`)."""

    source: str
    is_local: bool
    revisions: list[Revision]
    skipped: list[str]
    tokens: TokenAxis | None = None
    kind: str = ""  # its source's kind, in words ("Hub repo", "local folder": `CheckpointSource.kind`)


def known_tokens_per_step(repo: str | Path) -> TokensPerStep | None:
    """The tokens per step (one number, or one per stage) of a public series whose names carry no token count
    (`KNOWN_TOKENS_PER_STEP`, by Hub repo id: a folder's name, which has no "/", matches none)."""
    repo = str(repo).lower()
    return next((n for pattern, n in KNOWN_TOKENS_PER_STEP.items() if fnmatch.fnmatchcase(repo, pattern)), None)


def check_tokens_per_step(tokens_per_step: int | None) -> int | None:
    if tokens_per_step is not None and (isinstance(tokens_per_step, bool) or int(tokens_per_step) < 1):
        raise ConfigError(
            f"--tokens-per-step {tokens_per_step}: must be a positive integer (the training tokens that one unit of "
            "the names' number stands for)"
        )
    return None if tokens_per_step is None else int(tokens_per_step)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_steps(steps: str | tuple[int | None, int | None] | None) -> tuple[int | None, int | None] | None:
    """'A:B' (inclusive, either side optional) or 'A' (exactly A) -> (A, B)."""
    if isinstance(steps, list):
        steps = tuple(steps)
    if isinstance(steps, tuple) and len(steps) == 2 and all(_is_int(s) or s is None for s in steps):
        return steps
    if steps is None:
        return steps
    if not isinstance(steps, str):
        raise ConfigError(f"--steps {steps!r:.60}: expected A:B or [A, B] with integer steps (either side optional)")
    text = steps.strip()
    lo, sep, hi = text.partition(":")
    try:
        bounds = (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None) if sep else (int(text), int(text))
    except ValueError:
        raise ConfigError(
            f"--steps {steps!r}: expected A:B with integer steps (either side optional), "
            "e.g. 1000:50000, :20000 or 5000:"
        ) from None
    return bounds


@dataclass(frozen=True)
class Selection:
    """Which checkpoints of a listing to analyse, filtered in this order: `revisions_glob` (fnmatch on the name, any of
    several), `steps` (inclusive range), `every` (every K-th of what is left, from the first), `max_n` (that many, first
    and last included, the rest nearest to evenly spaced points of log(tokens + one step's tokens), which keeps step 0
    finite and one step before step 1). `main`, when listed, is kept by every filter but the glob and stays last."""

    revisions_glob: tuple[str, ...] = ()
    steps: tuple[int | None, int | None] | None = None
    every: int | None = None
    max_n: int | None = None

    def __post_init__(self):
        if isinstance(self.revisions_glob, str):
            object.__setattr__(self, "revisions_glob", (self.revisions_glob,))
        globs = self.revisions_glob or ()
        if not isinstance(globs, list | tuple) or not all(isinstance(g, str) for g in globs):
            raise ConfigError(f"--revisions {globs!r:.60}: expected a list of fnmatch patterns, e.g. ['stage1-*']")
        object.__setattr__(self, "revisions_glob", tuple(globs))
        object.__setattr__(self, "steps", parse_steps(self.steps))
        for flag, value in (("--every", self.every), ("--max", self.max_n)):
            if value is not None and not _is_int(value):
                raise ConfigError(f"{flag} {value!r:.60}: must be a positive integer")
        if self.steps is not None and any(s is not None and s < 0 for s in self.steps):
            lo, hi = ("" if s is None else s for s in self.steps)
            raise ConfigError(f"--steps {lo}:{hi}: steps count from 0; give A:B with A and B 0 or more")
        if self.steps is not None and None not in self.steps and self.steps[0] > self.steps[1]:
            raise ConfigError(f"--steps {self.steps[0]}:{self.steps[1]}: the first step is after the last; swap them")
        if self.every is not None and self.every < 1:
            raise ConfigError(f"--every {self.every}: must be a positive integer (1 keeps every checkpoint)")
        if self.max_n is not None and self.max_n < 1:
            raise ConfigError(f"--max {self.max_n}: must be a positive integer")

    def describe(self) -> str:
        parts = [f"--revisions {g}" for g in self.revisions_glob]
        if self.steps is not None:
            parts.append(
                f"--steps {'' if self.steps[0] is None else self.steps[0]}:"
                f"{'' if self.steps[1] is None else self.steps[1]}"
            )
        parts += [f"--every {self.every}"] if self.every else []
        parts += [f"--max {self.max_n}"] if self.max_n else []
        return " ".join(parts) or "(everything)"

    def apply(self, revisions: list[Revision]) -> list[Revision]:
        """The selected revisions, in training order; ConfigError when nothing is left."""
        ordered = ordered_all = sorted(revisions, key=lambda r: r.sort_key)
        if self.revisions_glob:
            ordered = [r for r in ordered if any(fnmatch.fnmatchcase(r.name, g) for g in self.revisions_glob)]
        main = [r for r in ordered if r.is_main]
        kept = [r for r in ordered if not r.is_main]
        if self.steps is not None:
            lo, hi = self.steps
            kept = [r for r in kept if (lo is None or r.step >= lo) and (hi is None or r.step <= hi)]
        if self.every:
            kept = kept[:: self.every]
        if self.max_n and len(kept) > self.max_n:
            kept = _spread_in_log_tokens(kept, self.max_n)
        selected = kept + main
        if not selected:
            names = [r.name for r in revisions]
            hint = did_you_mean(self.revisions_glob[0], names) if len(self.revisions_glob) == 1 else ""
            span = f" ({ordered_all[0].name} ... {ordered_all[-1].name})" if revisions else ""
            raise ConfigError(
                f"the selection {self.describe()} matches none of the {len(revisions)} revisions"
                f"{span}{hint}; widen it or run `dormant checkpoints` to see the names"
            )
        return selected


def select_revisions(
    revisions: list[Revision],
    revisions_glob: str | tuple[str, ...] | list[str] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    every: int | None = None,
    max_n: int | None = None,
) -> list[Revision]:
    """`Selection(...).apply(revisions)`: see `Selection` for the meaning and order of the filters."""
    return Selection(
        tuple([revisions_glob] if isinstance(revisions_glob, str) else revisions_glob or ()),
        parse_steps(steps),
        every,
        max_n,
    ).apply(revisions)


def training_positions(revisions: list[Revision]) -> list[int]:
    """Cumulative tokens seen at each revision of an ordered list. A stage or ingredient whose token count
    restarts (counts tokens since its own start: below the position reached) is placed after the end of the
    group before it; compared with the position, not the last count, so OLMo-3's stage 3 (50B) still follows
    a stage 2 selected only up to its first 2B tokens."""
    positions, offset, prev_group, prev_pos = [], 0, None, 0
    for r in revisions:
        group = (r.stage, r.ingredient)
        if prev_group is not None and group != prev_group and r.tokens < prev_pos:
            offset = prev_pos
        positions.append(offset + max(r.tokens, 0))
        prev_group, prev_pos = group, positions[-1]
    return positions


def _spread_in_log_tokens(revisions: list[Revision], n: int) -> list[Revision]:
    """`n` revisions whose log(tokens + one step's tokens) are closest to n evenly spaced targets, first and
    last included (see `Selection`: log1p spent most targets on the first few steps)."""
    return [revisions[i] for i in log_spread(training_positions(revisions), n, step_tokens(revisions))]


def log_spread(positions: list[int] | list[float], n: int, shift: float) -> list[int]:
    """The indices (sorted) of `n` of the increasing `positions` whose log(position + shift) are closest to n
    evenly spaced targets, first and last included; ties to the earlier index. Positions that do not increase
    (no token counts) are spread by index instead. Every index once, so n >= len(positions) takes them all."""
    count = len(positions)
    if n >= count:
        return list(range(count))
    if n == 1:
        return [count - 1]
    x = [math.log(p + shift) for p in positions] if positions[-1] > positions[0] else [float(i) for i in range(count)]
    targets = [x[0] + (x[-1] - x[0]) * i / (n - 1) for i in range(n)]
    chosen = {0, count - 1}
    for t in targets[1:-1]:
        free = [i for i in range(count) if i not in chosen]
        chosen.add(min(free, key=lambda i: (abs(x[i] - t), i)))
    return sorted(chosen)


def step_tokens(revisions: list[Revision]) -> float:
    """One step's tokens: the smallest tokens/step among revisions past step 0 (names round their token
    counts, so the ratios differ a little); 1 token when no revision has both."""
    return min((r.tokens / r.step for r in revisions if r.step > 0 and r.tokens > 0), default=1.0)
