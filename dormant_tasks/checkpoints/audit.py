"""The integrity audit of a series: what each branch holds, compared with every other branch, before a byte of
weights is downloaded (docs/CHECKPOINTS.md §9: the verdicts, which copy is genuine, what it cannot see).

A Hub branch is read from one tree listing (each file's LFS sha256 or git blob id and size;
`hub.list_branch_files`), a local checkpoint folder from its files' sha256 (the shared hash cache); a branch's
shard index is read once per distinct index (by its blob id, pinned to a commit).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from dormant_tasks.checkpoints.hub import LISTING_WORKERS, is_loading_file
from dormant_tasks.checkpoints.naming import Listing, Revision
from dormant_tasks.checkpoints.sources import WEIGHTS as _WEIGHTS
from dormant_tasks.checkpoints.sources import BranchFile as BranchFile  # (its files, as their source lists them)
from dormant_tasks.checkpoints.sources import list_revisions, source_for

DUPLICATE = "duplicate"  # set aside: the weights of another step
DUPLICATE_STEP = "duplicate step"  # set aside: a second branch at one step
PARTIAL = "partial duplicate"  # recorded as failed: a weight file of another step
INCOMPLETE = "incomplete"  # recorded as failed: something loading needs is missing or empty
TOKENS = "tokens"  # flagged: the name's token count disagrees with the series
CONFIG = "config"  # flagged: another architecture than the series'
MAIN_IS = "main"  # said: the step `main` equals
SET_ASIDE_KINDS = (DUPLICATE, DUPLICATE_STEP)
FAILED_KINDS = (PARTIAL, INCOMPLETE)
WARNED_KINDS = (*SET_ASIDE_KINDS, *FAILED_KINDS, TOKENS, CONFIG)

_SHARD = re.compile(r"(?P<stem>.+)-(?P<index>\d+)-of-(?P<total>\d+)\.(?P<ext>safetensors|bin)")
_ARCHITECTURE = ("model_type", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size")


@dataclass(frozen=True)
class Flag:
    kind: str
    text: str  # one line, naming the other branch or the file where there is one
    other: str | None = None  # the branch it duplicates or shares a file with
    file: str | None = None  # the shared or missing file


@dataclass(frozen=True)
class BranchAudit:
    revision: Revision
    n_files: int
    weight_bytes: int | None
    flags: tuple[Flag, ...] = ()
    # the bytes of the files loading needs (what `dormant track` downloads: `hub.ALLOW_PATTERNS`), from the
    # listing's sizes (a folder: on disk); None when a size is not known
    loading_bytes: int | None = None

    @property
    def verdict(self) -> str:
        warned = [f.kind for f in self.flags if f.kind in WARNED_KINDS]
        return warned[0] if warned else (MAIN_IS if self.flags else "ok")


@dataclass(frozen=True)
class SeriesAudit:
    source: str
    is_local: bool
    branches: tuple[BranchAudit, ...]
    tokens_source: str = ""  # where the tokens per step came from (`tokens.TokenAxis.source`)
    tokens_per_step: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    how: str = ""  # how its source listed the files, in words (`CheckpointSource.audited_by`)

    def flagged(self, kinds: tuple[str, ...]) -> dict[str, Flag]:
        """{branch: its first flag of one of `kinds`}, in series order."""
        out = {}
        for b in self.branches:
            hit = next((f for f in b.flags if f.kind in kinds), None)
            if hit is not None:
                out[b.revision.name] = hit
        return out

    def set_aside(self) -> dict[str, Flag]:
        """The branches never scored as points of training: full duplicates and second branches at a step."""
        return self.flagged(SET_ASIDE_KINDS)

    def failed(self) -> dict[str, Flag]:
        """The branches recorded as failed without a download: partial duplicates and incomplete branches."""
        return {k: v for k, v in self.flagged(FAILED_KINDS).items() if k not in self.set_aside()}

    def rows(self) -> list[dict]:
        """One plain row per branch (the JSON and CSV forms of `dormant checkpoints --audit`)."""
        return [
            {
                "revision": b.revision.name,
                "stage": b.revision.stage,
                "step": b.revision.step,
                "tokens": b.revision.tokens,
                "verdict": b.verdict,
                "other": "; ".join(f.other for f in b.flags if f.other) or None,
                "file": "; ".join(f.file for f in b.flags if f.file) or None,
                "note": " | ".join(f.text for f in b.flags) or None,
                "files": b.n_files,
                "weight_bytes": b.weight_bytes,
            }
            for b in self.branches
        ]


def audit_series(
    source: str | Path,
    tokens_per_step: int | None = None,
    workers: int = LISTING_WORKERS,
    listing: Listing | None = None,
    cache: bool = True,
) -> SeriesAudit:
    """The audit of every branch of `source` (`main` included): one listing per Hub branch (`workers` at a
    time) or the hashes of each local folder's files; no weight file is downloaded. `cache=False` (a dry run):
    the small files it reads (configs, shard indexes) are not kept in the Hub cache (`hub.read_small_file`)."""
    start = time.monotonic()
    listing = listing or list_revisions(source, include_main=True, tokens_per_step=tokens_per_step)
    revisions = listing.revisions
    origin = source_for(source)
    held = origin.audit_listing(revisions, workers, cache)  # a Hub branch's tree, a folder's hashes
    axis = listing.tokens
    branches = compare_branches(revisions, held.files, held.configs, held.indexes, axis.disagreements if axis else {})
    return SeriesAudit(
        listing.source,
        listing.is_local,
        branches,
        axis.source if axis else "",
        dict(axis.tokens_per_step) if axis else {},
        time.monotonic() - start,
        origin.audited_by,
    )


def compare_branches(
    revisions: list[Revision],
    files: dict[str, list[BranchFile]],
    configs: dict[str, dict | None],
    indexes: dict[str, set[str]],
    token_disagreements: dict[str, str],
) -> tuple[BranchAudit, ...]:
    """The audit's verdicts (docs/CHECKPOINTS.md §9) from each branch's files, config and shard index."""
    flags: dict[str, list[Flag]] = defaultdict(list)
    by_name = {r.name: r for r in revisions}
    weights = {
        r.name: {f.path: f.digest for f in files.get(r.name, []) if _WEIGHTS.fullmatch(f.path)} for r in revisions
    }
    for r in revisions:
        flag = _incomplete(files.get(r.name, []), weights[r.name], indexes.get(r.name))
        if flag is not None:
            flags[r.name].append(flag)
    # full duplicates: one group per identical set of weight files
    groups: dict[tuple[str, ...], list[Revision]] = defaultdict(list)
    for r in revisions:
        if weights[r.name]:
            groups[tuple(sorted(weights[r.name].values()))].append(r)
    main_group: set[str] = set()
    at_step = Counter((r.stage, r.ingredient, r.step) for r in revisions if not r.is_main)

    def doubtful(m: Revision) -> tuple[bool, bool]:  # a name that disagrees, a step that another branch holds
        return m.name in token_disagreements, at_step[(m.stage, m.ingredient, m.step)] > 1

    for members in groups.values():
        steps = [m for m in members if not m.is_main]
        if not steps:
            continue
        has_main = len(steps) < len(members)
        genuine = (
            max(steps, key=lambda m: m.sort_key) if has_main else min(steps, key=lambda m: (doubtful(m), m.sort_key))
        )
        if has_main:
            main_group = {m.name for m in members}
            flags["main"].append(Flag(MAIN_IS, f"main is {genuine.name} (the final model, as expected)", genuine.name))
        rule = (
            "main's step" if has_main else "the earliest step of its copies whose name and step agree with the series"
        )
        for m in steps:
            if m is genuine:
                continue
            same_step = (m.stage, m.ingredient, m.step) == (genuine.stage, genuine.ingredient, genuine.step)
            kind = DUPLICATE_STEP if same_step else DUPLICATE
            flags[m.name].append(
                Flag(
                    kind,
                    f"every weight file identical to {genuine.name}'s ({genuine.name} is kept: {rule}); not a point "
                    "of training",
                    genuine.name,
                )
            )
    if "main" in by_name and not main_group and weights.get("main"):
        flags["main"].append(Flag(MAIN_IS, "main equals none of the step branches (its weights are its own)"))
    set_aside = {name for name, fl in flags.items() if any(f.kind in SET_ASIDE_KINDS for f in fl)}
    _duplicate_steps(revisions, set_aside, token_disagreements, flags)
    _partial_duplicates(revisions, weights, set_aside, main_group, flags)
    for name, text in token_disagreements.items():
        flags[name].append(Flag(TOKENS, text))
    _config_changes(revisions, configs, flags)
    return tuple(
        BranchAudit(
            r,
            len(files.get(r.name, [])),
            sum(f.size or 0 for f in files.get(r.name, []) if _WEIGHTS.fullmatch(f.path)) or None,
            tuple(flags.get(r.name, [])),
            _loading_bytes(files.get(r.name, [])),
        )
        for r in revisions
    )


def _loading_bytes(files: list[BranchFile]) -> int | None:
    sizes = [f.size for f in files if is_loading_file(f.path)]
    return None if not sizes or any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


def _incomplete(files: list[BranchFile], weights: dict[str, str], index: set[str] | None) -> Flag | None:
    names = {f.path for f in files}
    if not weights:
        return Flag(INCOMPLETE, "no weight files: nothing to load")
    if "config.json" not in names:
        return Flag(INCOMPLETE, "no config.json: it cannot be loaded", file="config.json")
    empty = sorted(f.path for f in files if f.size == 0 and (is_loading_file(f.path) or f.path in weights))
    if empty:
        return Flag(INCOMPLETE, f"{empty[0]} is empty (0 bytes)", file=empty[0])
    missing = sorted((index or set()) - names)
    for path in weights:
        m = _SHARD.fullmatch(path)
        if m is not None:
            width, total = len(m["index"]), int(m["total"])
            missing += [
                shard
                for i in range(1, total + 1)
                if (shard := f"{m['stem']}-{i:0{width}d}-of-{m['total']}.{m['ext']}") not in names
            ]
    if missing:
        first = sorted(set(missing))[0]
        return Flag(INCOMPLETE, f"{first} is absent ({len(set(missing))} shard(s) missing)", file=first)
    return None


def _duplicate_steps(
    revisions: list[Revision], set_aside: set[str], disagreements: dict[str, str], flags: dict[str, list[Flag]]
) -> None:
    """Two branches of different weights at one step: the one whose token count agrees with the series is kept
    (else the first in series order); the other is set aside."""
    at: dict[tuple, list[Revision]] = defaultdict(list)
    for r in revisions:
        if not r.is_main and r.name not in set_aside:
            at[(r.stage, r.ingredient, r.step)].append(r)
    for (_, _, step), branches in at.items():
        if len(branches) < 2:
            continue
        kept = min(branches, key=lambda r: (r.name in disagreements, r.sort_key))
        rule = (
            "its token count agrees with the series"
            if any(b.name in disagreements for b in branches)
            else ("the first in series order")
        )
        for b in branches:
            if b is not kept:
                text = (
                    f"a second branch at step {step}, with other weights than {kept.name} ({kept.name} is kept: {rule})"
                )
                flags[b.name].append(Flag(DUPLICATE_STEP, text, kept.name))
                set_aside.add(b.name)


def _partial_duplicates(
    revisions: list[Revision],
    weights: dict[str, dict[str, str]],
    set_aside: set[str],
    main_group: set[str],
    flags: dict[str, list[Flag]],
) -> None:
    """A weight file shared with a branch at another step: of the two, the one not genuine is flagged (the
    final model's group is genuine, else the earlier step)."""
    rank = {r.name: (r.name not in main_group, r.sort_key) for r in revisions}
    holders: dict[str, list[tuple[Revision, str]]] = defaultdict(list)
    for r in revisions:
        if r.name in set_aside or (r.is_main and main_group):  # main's files are its genuine branch's
            continue
        for path, digest in weights[r.name].items():
            holders[digest].append((r, path))
    shared: dict[str, tuple[str, Revision]] = {}
    for held in holders.values():
        if len(held) < 2:
            continue
        genuine, _ = min(held, key=lambda h: rank[h[0].name])
        for r, path in held:
            if r is not genuine and r.name not in shared:
                shared[r.name] = (path, genuine)
    for r in revisions:
        if r.name in shared:
            path, other = shared[r.name]
            n = sum(1 for d in weights[r.name].values() if any(d == od for od in weights[other.name].values()))
            text = (
                f"{path} is identical to a weight file of {other.name} ({n} of {len(weights[r.name])} weight files "
                "shared): a partial copy, not downloaded"
            )
            flags[r.name].append(Flag(PARTIAL, text, other.name, path))


def _architecture(config: dict | None) -> tuple | None:
    return None if not config else tuple(config.get(k) for k in _ARCHITECTURE)


def _config_changes(revisions: list[Revision], configs: dict[str, dict | None], flags: dict[str, list[Flag]]) -> None:
    shapes = {r.name: _architecture(configs.get(r.name)) for r in revisions}
    known = Counter(s for s in shapes.values() if s is not None)
    if len(known) < 2:
        return
    series_shape = known.most_common(1)[0][0]
    for r in revisions:
        shape = shapes[r.name]
        if shape is not None and shape != series_shape:
            differs = ", ".join(
                f"{k} {a} (series {b})" for k, a, b in zip(_ARCHITECTURE, shape, series_shape) if a != b
            )
            flags[r.name].append(Flag(CONFIG, f"another architecture than the series': {differs}", file="config.json"))


def format_audit(audit: SeriesAudit) -> list[str]:
    """The audit as text: one line per branch (name, step, tokens, verdict, note), then a summary line."""
    from dormant_tasks.checkpoints.tokens import format_tokens

    rows = [("name", "step", "tokens", "verdict", "note")]
    for b in audit.branches:
        r = b.revision
        note = " | ".join(f.text for f in b.flags)
        rows.append((r.name, "?" if r.is_main else str(r.step), format_tokens(r.tokens), b.verdict, note))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(row[:4], widths)), row[4]]).rstrip() for row in rows]
    counts = Counter(b.verdict for b in audit.branches)
    said = ", ".join(f"{n} {kind}" for kind, n in counts.items() if kind not in ("ok", MAIN_IS)) or "nothing flagged"
    lines.append(
        f"{len(audit.branches)} branches of {audit.source} audited in {audit.seconds:.1f} s "
        f"({audit.how}): {said}; "
        f"{len(audit.set_aside())} set aside, {len(audit.failed())} not downloaded by `dormant track`"
    )
    return lines
