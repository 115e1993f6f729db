"""A series' token axis checked against what the series knows (docs/CHECKPOINTS.md §9, "Tokens per step"): the best
record gives the tokens per step (a checkpoint's `trainer_state.json`, else `--tokens-per-step` or the known value,
else the median of the names' count / step per stage); a name that disagrees beyond its rounding and 1% is flagged
and takes the record's count, never rescaling the others. Counts that fall while steps rise, with nothing to
correct them, refuse the axis (`TokenAxis.refusal`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dormant_tasks.text import plural

UNKNOWN = -1  # stage/step/tokens of `main`, whose name carries none of them
TOKEN_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
# Tokens per optimizer step: one number, or one per stage where the batch size changes between stages.
TokensPerStep = int | dict[int, int]

RECORD = "trainer_state.json"  # a checkpoint's own record of its step and tokens (the tiny series writes it)
RELATIVE_SLACK = 0.01  # besides the name's rounding unit: a Hub name rounds its count, sometimes down
MIN_MAJORITY = 3  # named checkpoints needed before the names' majority says anything


class Checkpoint(NamedTuple):
    """What the token axis reads of a checkpoint (a `naming.Revision` has these fields)."""

    name: str
    stage: int
    step: int
    tokens: int  # as its name says (UNKNOWN: none)
    path: Path | None  # a local checkpoint's folder


@dataclass(frozen=True)
class TokenAxis:
    """The token count the series takes for each checkpoint, how it knows its tokens per step, and the names
    whose count disagreed ({name: one line})."""

    tokens: dict[str, int]
    tokens_per_step: dict[int, int]  # stage -> tokens per step (stages the series could tell)
    source: str  # where the tokens per step came from: "record", "option", "names", "" (nothing)
    disagreements: dict[str, str]
    refusal: str | None = None  # why these names cannot be the axis (their counts fall while steps rise)


def stage_tokens_per_step(tokens_per_step: TokensPerStep | None, stage: int) -> int | None:
    """The tokens of one step of `stage`: the one number, or the stage's entry (None when it has none)."""
    return tokens_per_step.get(stage) if isinstance(tokens_per_step, dict) else tokens_per_step


def format_tokens(tokens: float) -> str:
    """The one token-count format (CLI, report, figures): 256000 -> '256K', 4001e9 -> '4.001T', 1024000 ->
    '1.024M'; UNKNOWN -> '?'."""
    if tokens < 0:
        return "?"
    for unit in ("T", "B", "M", "K"):
        if tokens >= TOKEN_UNITS[unit]:
            return f"{tokens / TOKEN_UNITS[unit]:.4g}{unit}"
    return f"{tokens:.4g}"  # a float tick (512.0) reads as 512


def read_record(folder: Path | None) -> dict | None:
    """A local checkpoint's `trainer_state.json` as {"step", "tokens", "tokens_per_step"}; None when absent or
    unreadable (the record is a help, never a requirement)."""
    if folder is None:
        return None
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and all(isinstance(data.get(k), int) for k in ("step", "tokens"))
    return data if ok else None


def _consistent(named: int, expected: int, unit: int) -> bool:
    return abs(named - expected) <= unit + RELATIVE_SLACK * expected


def token_axis(
    revisions: list[Checkpoint], units: dict[str, int], given: TokensPerStep | None, given_source: str = "option"
) -> TokenAxis:
    """The checkpoints' token counts, checked (module docstring). `units`: {name: the rounding unit of the count
    its name carries} (names without a count are absent); `given`: --tokens-per-step or the known value."""
    records = {r.name: read_record(r.path) for r in revisions}  # a checkpoint not on disk has none
    per_stage: dict[int, int] = {}
    source = ""
    recorded = [
        rec["tokens_per_step"] for rec in records.values() if rec and isinstance(rec.get("tokens_per_step"), int)
    ]
    if recorded:
        per_stage, source = {1: statistics.mode(recorded)}, "record"
    elif given is not None:
        per_stage = dict(given) if isinstance(given, dict) else {1: given}
        source = given_source
    out: dict[str, int] = {}
    disagreements: dict[str, str] = {}
    exact = set(per_stage)  # stages whose tokens per step are known, not voted: step x it is exact
    for stage in sorted({r.stage for r in revisions if r.stage != UNKNOWN}):
        if stage not in per_stage:
            majority = _names_majority([r for r in revisions if r.stage == stage], units)
            if majority is not None:
                per_stage[stage] = majority
                source = source or "names"
    for r in revisions:
        record = records.get(r.name)
        tokens = r.tokens
        if record is not None and record["step"] == r.step:
            tokens = record["tokens"]  # exact, where the name rounds
        per_step = stage_tokens_per_step(per_stage, r.stage) if r.stage != UNKNOWN else None
        unit = units.get(r.name)
        if per_step is not None and unit is not None and r.step >= 0:
            expected = tokens if record is not None and record["step"] == r.step else r.step * per_step
            if not _consistent(r.tokens, expected, unit):
                disagreements[r.name] = (
                    f"its name says {format_tokens(r.tokens)} tokens, but step {r.step} x {per_step:,} tokens per step "
                    f"({_said(source)}) is {format_tokens(expected)}: taken as {format_tokens(expected)}, the other "
                    "checkpoints unchanged"
                )
            tokens = expected if r.stage in exact or r.name in disagreements else tokens
        out[r.name] = tokens
    falls = _falls(revisions, out, units)
    for earlier, later in falls:
        disagreements.setdefault(
            later.name,
            f"its name says {format_tokens(later.tokens)} tokens at step {later.step}, fewer than {earlier.name}'s "
            f"{format_tokens(earlier.tokens)} at step {earlier.step}: token counts that fall while steps rise cannot "
            "be the token axis",
        )
    refusal = None
    if falls:
        earlier, later = falls[0]
        refusal = (
            f"the token counts of {plural(len(falls), 'name')} fall while steps rise ({earlier.name}, then "
            f"{later.name}), and neither a {RECORD} nor a known tokens per step gives the axis instead"
        )
    return TokenAxis(out, per_stage, source, disagreements, refusal)


def _falls(revisions: list[Checkpoint], tokens: dict[str, int], units: dict[str, int]) -> list[tuple]:
    """The (earlier, later) named checkpoints of one stage whose counts in `tokens` fall while the step rises, by
    more than the two names' rounding and 1% (each later checkpoint once, against the largest count before it)."""
    out = []
    for stage in sorted({r.stage for r in revisions if r.stage != UNKNOWN}):
        named = sorted(
            (r for r in revisions if r.stage == stage and r.step >= 0 and r.name in units and tokens[r.name] >= 0),
            key=lambda r: r.step,
        )
        top = None
        for r in named:
            if top is not None and r.step > top.step:
                slack = units[top.name] + units[r.name] + RELATIVE_SLACK * tokens[top.name]
                if tokens[top.name] - tokens[r.name] > slack:
                    out.append((top, r))
            if top is None or tokens[r.name] > tokens[top.name]:
                top = r
    return out


def _said(source: str) -> str:
    return {
        "record": f"the checkpoints' {RECORD}",
        "option": "--tokens-per-step or the series' known value",
        "names": "the majority of its names",
    }.get(source, source)


def _names_majority(revisions: list[Checkpoint], units: dict[str, int]) -> int | None:
    """Tokens per step that most named checkpoints of one stage agree on (the median ratio, then the most
    precise consistent name's ratio); None with fewer than MIN_MAJORITY named or no strict majority."""
    named = [(r, units[r.name]) for r in revisions if r.step > 0 and r.tokens > 0 and r.name in units]
    if len(named) < MIN_MAJORITY:
        return None
    median = statistics.median(r.tokens / r.step for r, _ in named)
    agree = [(r, unit) for r, unit in named if _consistent(r.tokens, round(r.step * median), unit)]
    if 2 * len(agree) <= len(named):
        return None
    best = max(agree, key=lambda pair: pair[0].step)[0]  # the largest count: the smallest relative rounding
    return round(best.tokens / best.step)
