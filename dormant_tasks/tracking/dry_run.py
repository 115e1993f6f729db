"""`dormant track --dry-run`: what a run would download, before it downloads anything, and nothing written.

Made from the series' state as the run would ask it (`series_state`, with `cache=False`): the listing, the
integrity audit (Hub: one tree listing per branch, which gives every file's size, and the small files it reads,
a shard index or a config, are kept out of the Hub cache; a folder: its files' sizes on disk) and what the
store holds. From it: the checkpoints the run scores (those stored already cost nothing), the bytes to
download (the files loading needs, `hub.ALLOW_PATTERNS`), the disk the run needs at once and the download time
at a stated bandwidth. A size the listing does not give is said to be unknown, never guessed.

What "at once" means is what a run does (`dormant_tasks/run.py`): on the local runner one checkpoint downloads
while the one before it loads, and a loaded checkpoint is evicted before it is scored (`load_checkpoint(...,
keep=False)`), so two consecutive downloads are on disk at most; `--keep-checkpoints` keeps every one; on Dask
each worker holds the one it scores. A new series scores its taus' checkpoint first (the reference of quantile
taus, which is downloaded even when the selection leaves it out, and stored only when selected).

With `--budget N` the run scores at most N checkpoints in all, the stored ones counted: the dry run names the
coarse pass (`budget.coarse_pass`, certain to be scored) and the most the refinement may add, whose checkpoints
depend on the scores and so are not known in advance (their bytes: the largest they could be).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dormant_tasks.checkpoints import Revision, format_tokens, source_for
from dormant_tasks.errors import ConfigError
from dormant_tasks.store import Table
from dormant_tasks.text import plural
from dormant_tasks.tracking.plan import SeriesState
from dormant_tasks.tracking.request import Runner
from dormant_tasks.tracking.series import stored_files
from dormant_tasks.tracking.series_taus import taus_checkpoint

SHOWN = 12  # a longer plan shows its first and last SHOWN // 2 checkpoints and a count of the rest
PER_CHECKPOINT_TABLES = (Table.checkpoints, Table.head_scores, Table.input_scores)  # what one scored checkpoint adds

# decimal (k, M, G, T) or binary (Ki, Mi, Gi, Ti) prefixes; B / byte: bytes, b / bit / bps: bits (1/8 byte)
_PREFIX = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_BITS = ("b", "bit", "bits", "bps")
_BANDWIDTH = re.compile(
    r"\s*(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<prefix>[kKmMgGtT]i?)?(?P<unit>bits?|bytes?|bps|Bps|B|b)(?:/s)?\s*"
)


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    text: str  # as the user wrote it

    def seconds(self, n_bytes: int) -> float:
        return n_bytes / self.bytes_per_s


def parse_bandwidth(text: str) -> Bandwidth:
    """`1Gbit/s`, `100MB/s`, `500 Mbit/s`, `1Gbps`, `50MiB/s`: B or byte is a byte, b, bit or bps a bit; ConfigError
    for anything else."""
    m = _BANDWIDTH.fullmatch(text) if isinstance(text, str) else None
    if m is None or float(m["value"]) <= 0 or m["unit"] in ("bps", "Bps") and text.rstrip().endswith("/s"):
        raise ConfigError(
            f"--bandwidth {text!r}: give a positive rate per second with its unit, bytes (B) or bits (bit), e.g. "
            "100MB/s or 1Gbit/s"
        )
    per_s = float(m["value"]) * _PREFIX[(m["prefix"] or "").lower()] / (8 if m["unit"] in _BITS else 1)
    return Bandwidth(per_s, text.strip())


def byte_size(n: int | None) -> str:
    """Decimal units, as the Hub shows sizes: 512 B, 3.4 MB, 29.1 GB; "unknown" for None."""
    if n is None:
        return "unknown"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.{1 if n >= 10 * scale else 2}f} {unit}"
    return f"{n} B"


def duration(seconds: float) -> str:
    """Hours and minutes (under a minute: said so)."""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


@dataclass(frozen=True)
class PlannedCheckpoint:
    revision: Revision
    size: int | None  # bytes of the files loading needs (Hub: the listing's sizes; a folder: on disk)
    why: str  # "selected", "coarse pass", "taus' reference (not stored: not selected)"
    remote: bool = True  # its source downloads it (`CheckpointSource.is_remote`); else it is read in place

    @property
    def download(self) -> int | None:
        """Bytes downloaded: a checkpoint read in place downloads none."""
        return self.size if self.remote else 0


@dataclass(frozen=True)
class DryRun:
    model_id: str
    source: str
    is_local: bool
    n_listed: int  # the series' checkpoints as listed (main only with --include-main)
    n_selected: int
    n_stored: int  # selected checkpoints already stored with the series' taus: nothing to do
    n_set_aside: int  # set aside or refused by the integrity audit: never downloaded
    scored: tuple[PlannedCheckpoint, ...]  # certain to be scored by this run, in the order the run takes them
    disk_at_once: int | None  # bytes on disk at the same time (None: a size unknown, or a cluster's workers)
    disk_rule: str  # how the flow keeps them, in words
    bandwidth: Bandwidth
    budget: int | None = None
    most: int | None = None  # with a budget: the most checkpoints this run scores (budget less stored)
    most_bytes: int | None = None  # ... and the most bytes they download (the largest candidates)
    store_growth: int | None = None  # bytes the store grows by, from its stored checkpoints' files
    cache: str | None = None  # the Hub cache folder the downloads go to (None: nothing downloaded)
    cache_free: int | None = None  # bytes free on its disk now
    notes: tuple[str, ...] = field(default_factory=tuple)
    kind: str = "Hub repo"  # its source's kind, in words (`CheckpointSource.kind`)

    @property
    def download_bytes(self) -> int | None:
        sizes = [c.download for c in self.scored]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    @property
    def n_unknown(self) -> int:
        return sum(c.download is None for c in self.scored)

    def as_json(self) -> dict:
        known = self.download_bytes
        return {
            "model_id": self.model_id,
            "source": self.source,
            "local": self.is_local,
            "listed": self.n_listed,
            "selected": self.n_selected,
            "stored": self.n_stored,
            "set_aside_or_refused": self.n_set_aside,
            "budget": self.budget,
            "at_most": self.most,
            "at_most_download_bytes": self.most_bytes,
            "checkpoints": [
                {
                    "revision": c.revision.name,
                    "step": c.revision.step,
                    "tokens": c.revision.tokens,
                    "bytes": c.size,
                    "download_bytes": c.download,
                    "why": c.why,
                }
                for c in self.scored
            ],
            "download_bytes": known,
            "unknown_sizes": self.n_unknown,
            "disk_at_once_bytes": self.disk_at_once,
            "disk_rule": self.disk_rule,
            "bandwidth": self.bandwidth.text,
            "bandwidth_bytes_per_s": self.bandwidth.bytes_per_s,
            "download_seconds": None if known is None else round(self.bandwidth.seconds(known), 1),
            "store_growth_bytes": self.store_growth,
            "cache": self.cache,
            "cache_free_bytes": self.cache_free,
            "notes": list(self.notes),
            "writes": "nothing",
        }


def plan_dry_run(
    state: SeriesState, bandwidth: Bandwidth, budget: int | None = None, workers: int | None = None
) -> DryRun:
    """The dry run of a track run whose state is `state` (asked with `series_state(request, cache=False)`).
    `workers`: the Dask workers that download at once (None with `--address`: the cluster's, not known here)."""
    request, plan = state.request, state.plan
    selected = list(plan.selected)
    size = plan.loading_bytes
    source = source_for(request.source)
    remote = source.is_remote  # what the run downloads, its source says

    def planned_as(revision, why: str) -> PlannedCheckpoint:
        return PlannedCheckpoint(revision, size.get(revision.name), why, remote)

    notes: list[str] = []
    if state.pending is not None:  # a stored series: its taus are fixed, the stored checkpoints skipped
        todo, why = list(state.pending), "not stored yet"
    else:  # a new series, or --retau: every selected checkpoint, its taus' checkpoint first
        todo, why = selected, "selected"
        if request.retau:
            notes.append(
                "--retau: a checkpoint whose per-input scores were kept is re-aggregated without a download, so this "
                "is the most it downloads"
            )
    n_stored = len(selected) - len(todo)
    candidates = [planned_as(r, why) for r in todo]
    first = taus_checkpoint(request, plan) if state.pending is None and selected else None  # scored before the rest
    planned, most = candidates, None
    if budget is not None:
        planned, most = _coarse(selected, candidates, budget, n_stored, first, planned_as)
    if first is not None:
        label = "the taus' checkpoint" + ("" if first in selected else " (scored for the taus, not stored)")
        planned = [planned_as(first, label), *(c for c in planned if c.revision != first)]
    disk, rule = _disk_at_once(request, planned, workers)
    most_bytes = None
    if most is not None:  # the refinement picks the rest among the candidates: the largest they could be
        chosen = {c.revision for c in planned}
        extra = max(0, most - sum(r in chosen for r in selected))
        rest = [c for c in candidates if c.revision not in chosen]
        largest = sorted(rest, key=lambda c: (c.download is None, c.download or 0), reverse=True)[:extra]
        sizes = [c.download for c in planned + largest]
        most_bytes = None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)
        if extra and largest and remote:
            more, how = _refinement_disk(request, largest, workers)
            keep = request.keep_checkpoints
            disk = None if disk is None or more is None else disk + more if keep else max(disk, more)
            rule += f"; the refinement: {how}"
    cache, free = None, None
    where = source.cache_free(request.cache_dir) if planned else None  # (None: nothing is downloaded)
    if where is not None:
        folder, free = where
        cache = str(folder)
        if disk is not None and disk > free:
            notes.append(
                f"the disk of {folder} has {byte_size(free)} free, less than the {byte_size(disk)} needed at once: "
                "pass --cache-dir on a larger disk, or free space (the run refuses a download that does not fit)"
            )
    unknown = sum(c.download is None for c in planned)
    if unknown:
        notes.append(
            f"the listing gives no size for {plural(unknown, 'checkpoint')}: the bytes, disk and time count "
            "only the others"
        )
    return DryRun(
        request.model_id,
        str(request.source),
        not remote and bool(plan.listed),
        len(plan.listed),
        len(selected),
        n_stored,
        len(plan.set_aside) + len(plan.refused),
        tuple(planned),
        disk,
        rule,
        bandwidth,
        budget,
        most,
        most_bytes,
        _store_growth(request, len(planned) if most is None else most),
        cache,
        free,
        tuple(notes),
        source.kind,
    )


def _coarse(selected, candidates, budget, n_stored, first, planned_as) -> tuple[list[PlannedCheckpoint], int]:
    """`--budget`: (the coarse pass's checkpoints still to score, the most this run scores of the selection). The
    stored checkpoints count, and so does a new series' taus' checkpoint, stored before the search starts."""
    from dormant_tasks.tracking.budget import available_positions, first_pass  # the budgeted search (`--budget`)

    pending = {c.revision for c in candidates}
    positions, one_step = available_positions(list(selected))
    before = [i for i, r in enumerate(selected) if r not in pending or r == first]
    coarse = [selected[i] for i in first_pass(positions, budget, before, one_step)]
    return [planned_as(r, "coarse pass") for r in coarse], min(len(candidates), max(0, budget - n_stored))


def _refinement_disk(request, largest: list[PlannedCheckpoint], workers: int | None) -> tuple[int | None, str]:
    """The most the budgeted search's refinement keeps on disk at once when it picks the `largest` candidates
    (which ones it picks is not known in advance), and how: one a round on the local runner, one per worker a
    round on Dask (`dormant_tasks/run.py`, `_run_budgeted`); with --keep-checkpoints, what it adds to the coarse pass's."""
    sizes = [c.download for c in largest]  # (asked only when the source downloads)
    if any(s is None for s in sizes):
        return None, "a size is not listed"
    known = [s for s in sizes if s is not None]
    if request.keep_checkpoints:
        return sum(known), "every one kept"
    if request.runner is Runner.DASK:
        if workers is None:
            return None, "one a worker, each round"
        return sum(known[:workers]), f"one a worker ({plural(workers, 'worker')}), each round"
    return known[0], "one checkpoint a round"


def _disk_at_once(request, planned: list[PlannedCheckpoint], workers: int | None) -> tuple[int | None, str]:
    """What the flow keeps on disk at the same time, downloading `planned` in this order, and the rule, in words
    (module docstring)."""
    downloads = [c.download for c in planned if c.remote]
    if not downloads:
        return 0, "nothing is downloaded: local checkpoint folders are read in place"
    if any(s is None for s in downloads):
        return None, "unknown: a size is not listed"
    sizes = [s for s in downloads if s is not None]
    if request.keep_checkpoints:
        return sum(sizes), "--keep-checkpoints: every downloaded checkpoint stays in the Hub cache"
    if request.runner is Runner.DASK:
        if workers is None:
            return None, f"one checkpoint per worker of the cluster at --address (the largest: {byte_size(max(sizes))})"
        return sum(sorted(sizes, reverse=True)[:workers]), (
            f"one checkpoint per Dask worker ({plural(workers, 'worker')}), evicted once loaded"
        )
    pairs = [a + b for a, b in zip(sizes, sizes[1:])] or sizes
    return max(pairs), "two at most: one loading while the next downloads; each is evicted once loaded"


def _store_growth(request, n: int) -> int | None:
    """Bytes the store grows by for `n` more checkpoints: its stored checkpoints' files per checkpoint (None
    when the series has none yet: its first checkpoint's files are the first measure)."""
    from dormant_tasks.store import is_store, stored_checkpoint_keys

    if not n or not is_store(request.store):
        return None if n else 0
    stored = {key.revision for key in stored_checkpoint_keys(request.store, request.model_id)}
    if not stored:
        return None
    total = sum(
        p.stat().st_size for t in PER_CHECKPOINT_TABLES for p in stored_files(request.store, t, request.model_id)
    )
    return round(total / len(stored) * n)


def format_dry_run(dry: DryRun, shown: int = SHOWN) -> list[str]:
    """The dry run as text: one line per checkpoint (a long plan: its first and last few and a count), totals."""
    lines = [
        f"dry run: {dry.model_id} ({dry.kind} {dry.source}): {dry.n_selected} of {dry.n_listed} checkpoints selected, "
        f"{dry.n_stored} already stored" + (f", {dry.n_set_aside} set aside by the audit" if dry.n_set_aside else "")
    ]
    if dry.budget is not None:
        lines.append(
            f"--budget {dry.budget}: certain, the coarse pass below; then the refinement, which picks from the scores: "
            f"{plural(dry.most or 0, 'checkpoint')} of the selection in all at most (the budget less the {dry.n_stored} "
            "stored)"
        )
    rows = [("checkpoint", "step", "tokens", "size", "")]
    picked = list(dry.scored)
    cut = len(picked) > shown
    half = shown // 2
    for c in picked[:half] + picked[-half:] if cut else picked:
        r = c.revision
        size = byte_size(c.size) + (" (on disk)" if not c.remote and c.size is not None else "")
        rows.append((r.name, "?" if r.is_main else str(r.step), format_tokens(r.tokens), size, c.why))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    text = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:4], widths)), row[4]]).rstrip() for row in rows]
    if cut:
        text.insert(1 + half + 1, f"... {len(picked) - 2 * half} more ...")
    lines += ["  " + t for t in text] if picked else ["  nothing to score: the store holds what this run would score"]
    total = dry.download_bytes
    known = sum(c.download or 0 for c in dry.scored)
    if total is None:
        said = f"to download: {byte_size(known)} + {plural(dry.n_unknown, 'checkpoint')} of unknown size"
    elif picked and not known and dry.is_local:
        on_disk = sum(c.size or 0 for c in picked)
        said = f"nothing to download (local folders, read in place: {byte_size(on_disk)} on disk)"
    else:
        said = f"to download: {byte_size(total)}"
    certain = " for certain" if dry.budget is not None else ""
    lines.append(f"to score{certain}: {plural(len(picked), 'checkpoint')}; {said}")
    if dry.most is not None:
        most_said = "" if dry.is_local else f", {byte_size(dry.most_bytes)} to download"
        lines.append(f"at most (the whole budget): {plural(dry.most, 'checkpoint')}{most_said}")
    lines.append(f"disk at once: {byte_size(dry.disk_at_once)} ({dry.disk_rule})")
    if dry.cache is not None:
        lines.append(f"free now where the downloads go ({dry.cache}): {byte_size(dry.cache_free)}")
    if known:
        t = duration(dry.bandwidth.seconds(known))
        most = dry.most_bytes
        t += f" (at most {duration(dry.bandwidth.seconds(most))})" if most is not None and most > known else ""
        lines.append(f"download time at {dry.bandwidth.text}: {t}; scoring overlaps the downloads")
    if dry.store_growth is not None:
        lines.append(f"the store grows by about {byte_size(dry.store_growth)} (its stored checkpoints' files)")
    lines += [f"note: {n}" for n in dry.notes]
    lines.append("nothing was downloaded or written (a dry run); run it without --dry-run to track")
    return lines
