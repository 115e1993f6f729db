"""The Parquet store of docs/DATA_CONTRACT.md: table schemas, atomic writes, reads, a per-series lock.

Layout (hive-partitioned, so pyarrow, pandas, polars and DuckDB read it without this project):

    <store>/_store.json                                  {"schema_version": 4, "created_by": ...}
    <store>/checkpoints/series=<slug>/checkpoints.parquet  the series' manifest: one row per stored result
    <store>/<table>/series=<slug>/<file_key>.parquet     head_scores/input_scores: one file per result;
                                                         derived tables: one file per taus_id; evaluations: per run
    <store>/failed_checkpoints/series=<slug>/failed.parquet  checkpoints that failed and were not stored since
    <store>/requests/series=<slug>/<request_id>.json     the request of every run that wrote rows
    <store>/_locks/<slug>.lock                           `series_lock` (readers ignore "_" and "." names)

The partition key is `series` (a filesystem-safe form of model_id, see `series_slug`); `model_id` stays a
real column with its "/" in every file. `read_table` returns exactly the columns of `SCHEMAS[table]`
(the `series` partition column is dropped: model_id carries the same information).

The `checkpoints` table is the manifest of a series (schema version 4): one file per series, rewritten
atomically, one row per stored result, whose `file_key` names that result's head_scores (and, when
`input_scores_kept`, input_scores) file. A result exists when, and only when, its row is in the manifest:
- `commit_checkpoint` writes the result's files first, then rewrites the manifest with its row, all under
  `series_lock`: a killed writer leaves at most files that no row names, which readers never see
  (`dormant store repair` deletes them);
- reads of head_scores/input_scores open only the files the manifest names, pruned by the filters on the
  columns the manifest shares (revision, step, taus_id, ...): no glob, no footer scan, no dedupe pass;
- a manifest row whose file is missing (deleted by hand) is a StoreError that names the fix
  (`dormant store repair`, which drops such rows so that the next `dormant track` scores them again), and so
  is a series with head_scores files but no manifest (deleted by hand: `check_manifest`;
  each head_scores file keeps its manifest row in its metadata, `MANIFEST_ROW_KEY`, and repair rebuilds from it);
- a result with the same `CheckpointKey` replaces the older row (the newer `analyzed_at` wins; its files
  have the same `file_key`); results of the same revision under other taus stay (`SeriesView` counts them
  stale); of several rows of one revision, calibration set and taus, reads take the newest.

Every file is written to a hidden temp file in its destination folder and renamed over its final name
(`os.replace`), so a reader sees either no file or a whole one; a temp file left by a killed writer is
hidden from readers and swept by the next write to that series folder from the same host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dormant_tasks import __version__
from dormant_tasks.errors import USER_ERRNOS, ConfigError, StoreError, did_you_mean

SCHEMA_VERSION = 4
MARKER = "_store.json"
REQUESTS = "requests"  # <store>/requests/series=<slug>/<request_id>.json: the request of every run
SOURCES = "sources"  # <store>/sources/series=<slug>.json: the source a series is tracked from (its identity)


def _f(name: str, type_: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


# Every table starts with these: which series and which checkpoint a row belongs to.
COMMON: list[pa.Field] = [
    _f("model_id", pa.string()),
    _f("revision", pa.string()),
    _f("stage", pa.int32()),
    _f("step", pa.int64()),
    _f("tokens", pa.int64()),
]

SCHEMAS: dict[str, pa.Schema] = {
    "checkpoints": pa.schema(
        COMMON
        + [
            _f("commit", pa.string()),
            _f("n_layers", pa.int32()),
            _f("n_heads", pa.int32()),
            _f("calibration_id", pa.string()),
            _f("n_inputs", pa.int32()),
            _f("dtype", pa.string()),
            _f("device", pa.string()),
            _f("seconds", pa.float64()),
            _f("analyzed_at", pa.timestamp("us", tz="UTC")),
            _f("code_version", pa.string()),
            _f("taus_id", pa.string()),
            _f("scoring_version", pa.string()),
            _f("ingredient", pa.int32(), nullable=True),
            _f("request_id", pa.string(), nullable=True),
            # the manifest (schema version 4): the name of this result's head_scores/input_scores files
            _f("file_key", pa.string()),
            _f("input_scores_kept", pa.bool_()),
            # the content checksum (sha256 of the file's bytes) and size of the files the row names (added
            # within version 4; null: written before, checked by their Parquet page checksums only)
            _f("head_scores_sha256", pa.string(), nullable=True),
            _f("head_scores_bytes", pa.int64(), nullable=True),
            _f("input_scores_sha256", pa.string(), nullable=True),
            _f("input_scores_bytes", pa.int64(), nullable=True),
        ]
    ),
    "head_scores": pa.schema(
        COMMON
        + [
            _f("score_fn", pa.string()),
            _f("layer", pa.int32()),
            _f("head_index", pa.int32()),
            _f("score", pa.float64()),
            # score_std, length_slope and boundary_gap are float32 from schema version 4: descriptive statistics
            # of float32 scores, never compared with tau (score stays float64: masks are score vs tau)
            _f("score_std", pa.float32()),
            _f("tau", pa.float64()),
            _f("direction", pa.string()),
            _f("dormant_rate", pa.float64()),
            _f("dormant", pa.bool_()),
            # the 95% Wilson interval of dormant_rate (null: rows upgraded from schema version 3)
            _f("dormant_rate_low", pa.float64(), nullable=True),
            _f("dormant_rate_high", pa.float64(), nullable=True),
            # how the score depends on the input (docs/SCORES.md, "Input dependence"); null: upgraded rows
            _f("length_slope", pa.float32(), nullable=True),  # score change per doubling of the input length
            _f("boundary_gap", pa.float32(), nullable=True),  # mean score, first token BOS/EOS minus not
            # per-input inactive indicators, bit i = input i (little-endian bytes): the paired test of a
            # transition (tracking/confidence.py); null in results stored before it was kept
            _f("inactive_inputs", pa.binary(), nullable=True),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    "input_scores": pa.schema(
        COMMON
        + [
            _f("input_index", pa.int32()),
            _f("score_fn", pa.string()),
            _f("layer", pa.int32()),
            _f("head_index", pa.int32()),
            _f("score", pa.float32()),  # float32 from schema version 4 (half the bytes; scores are float32 on GPU)
            _f("calibration_id", pa.string()),
        ]
    ),
    "transitions": pa.schema(
        COMMON
        + [
            _f("score_fn", pa.string()),
            _f("tau", pa.float64()),
            _f("layer", pa.int32()),
            _f("head_index", pa.int32()),
            _f("from_revision", pa.string()),
            _f("to_revision", pa.string()),
            _f("from_step", pa.int64()),
            _f("to_step", pa.int64()),
            _f("from_tokens", pa.int64()),
            _f("to_tokens", pa.int64()),
            _f("from_state", pa.string()),
            _f("to_state", pa.string()),
            # the paired test's BH q-value < 0.05, else (no indicators) both checkpoints' rate intervals exclude
            # 0.5 (null: an interval is unknown); undone at the next one
            _f("confident", pa.bool_(), nullable=True),
            _f("blip", pa.bool_()),
            # the exact McNemar p of the paired per-input indicators (null: not kept; confident then
            # falls back to both intervals excluding 0.5)
            _f("confident_p", pa.float64(), nullable=True),
            # its Benjamini-Hochberg q-value over every (head, interval) test of the series' function and
            # calibration set (null: no p, or a file written before q-values were stored)
            _f("confident_q", pa.float64(), nullable=True),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    "head_histories": pa.schema(
        COMMON
        + [
            _f("score_fn", pa.string()),
            _f("tau", pa.float64()),
            _f("layer", pa.int32()),
            _f("head_index", pa.int32()),
            _f("first_dormant_step", pa.int64(), nullable=True),
            _f("first_dormant_tokens", pa.int64(), nullable=True),
            _f("first_dormant_revision", pa.string(), nullable=True),
            _f("n_changes", pa.int32()),
            _f("final_state", pa.string()),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    # One row per (checkpoint of >= 2 calibration sets, score function, pair of sets): how far the sets'
    # current dormancy masks agree (dormant_tasks/tracking/agreement.py); one file per series.
    "calibration_agreement": pa.schema(
        COMMON
        + [
            _f("score_fn", pa.string()),
            _f("calibration_a", pa.string()),  # the earlier set of the pair in the series' set order
            _f("calibration_b", pa.string()),
            _f("n_heads", pa.int32()),  # heads scored under score_fn on both sets
            _f("n_dormant_a", pa.int32()),
            _f("n_dormant_b", pa.int32()),
            _f("n_both", pa.int32()),  # dormant on both
            _f("jaccard", pa.float64()),  # n_both / |A u B|; NaN when both masks are empty
            _f("n_sets", pa.int32()),  # sets scored under score_fn at this checkpoint (>= 2)
            _f("n_dormant_all", pa.int32()),  # dormant on every one of those n_sets sets
            _f("n_dormant_any", pa.int32()),  # dormant on at least one of them
        ]
    ),
    "taus": pa.schema(
        COMMON
        + [
            _f("score_fn", pa.string()),
            _f("tau", pa.float64()),
            _f("direction", pa.string()),
            _f("source", pa.string()),
            _f("quantile", pa.float64(), nullable=True),
            _f("reference_revision", pa.string(), nullable=True),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    "evaluations": pa.schema(
        COMMON
        + [
            _f("task", pa.string()),
            _f("shots", pa.int32()),
            _f("mode", pa.string()),
            _f("score_fn", pa.string()),
            _f("quantile", pa.float64(), nullable=True),
            _f("tau", pa.float64(), nullable=True),
            _f("frac_zeroed", pa.float64()),
            _f("accuracy", pa.float64()),
            _f("n_items", pa.int32()),
            _f("base_accuracy", pa.float64()),
            _f("code_version", pa.string()),
            _f("request_id", pa.string(), nullable=True),
            # the protocol (schema version 3): which lm-eval metric, prompt format and data the accuracy is of
            _f("metric", pa.string()),  # lm-eval's key, e.g. "acc,none" or "exact_match,strict-match"
            _f("chat_template", pa.bool_()),
            _f("bos", pa.string()),  # "paper" (lm-eval 0.4.5's rule) or "tokenizer"
            _f("fewshot_split", pa.string(), nullable=True),  # the split few-shot examples were drawn from
            _f("data_source", pa.string()),  # "hub" or "bundled"
            _f("lm_eval_version", pa.string(), nullable=True),
            _f("chance", pa.float64(), nullable=True),  # mean 1 / choices over the items (null: generation)
            _f("evaluated_at", pa.timestamp("us", tz="UTC")),  # when the run wrote its rows (the newest run wins)
            # how the paper's protocol was followed (null: rows written before these columns existed)
            _f("rendering", pa.string(), nullable=True),  # chat rendering: "paper" (lm-eval 0.4.5) or "lm-eval"
            _f("precision", pa.string(), nullable=True),  # e.g. "float32", or "paper:int8" / "paper:bfloat16"
            _f("threshold_source", pa.string(), nullable=True),  # "own" (base-run quantiles) or "authors"
            _f("chat_date", pa.date32(), nullable=True),  # the day the chat template saw (null: none, or not recorded)
            # what a reader of this curve's numbers must know ("; "-joined): a base accuracy within chance noise,
            # a curve that dips below base - 1 point and rises back (null: none, or rows written before it)
            _f("warnings", pa.string(), nullable=True),
        ]
    ),
    # One row per checkpoint of the series that could not be downloaded, loaded or scored and was not stored
    # since (one file per series, rewritten; a checkpoint stored later drops its row). Added in schema version
    # 4 without a bump: a store without it has no failed checkpoint.
    "failed_checkpoints": pa.schema(
        COMMON
        + [
            _f("commit", pa.string(), nullable=True),  # unknown when a Hub revision failed before its download
            _f("reason", pa.string()),  # the error, as `dormant track` printed it
            _f("failed_at", pa.timestamp("us", tz="UTC")),
            _f("request_id", pa.string(), nullable=True),
        ]
    ),
    # One row per (item, setting) of an evaluation run with --log-samples (lm-eval's --log_samples).
    "evaluation_items": pa.schema(
        COMMON
        + [
            _f("task", pa.string()),  # the lm-eval leaf task (e.g. mmlu_anatomy)
            _f("shots", pa.int32()),
            _f("mode", pa.string()),
            _f("score_fn", pa.string(), nullable=True),  # null: the un-intervened base run
            _f("quantile", pa.float64(), nullable=True),
            _f("tau", pa.float64(), nullable=True),
            _f("doc_id", pa.int64()),
            _f("prediction", pa.string()),  # the chosen option's index, or the filtered generated answer
            _f("target", pa.string()),
            _f("correct", pa.bool_()),
            _f("loglikelihoods", pa.list_(pa.float64()), nullable=True),  # per choice, summed (multiple choice)
            _f("generated", pa.string(), nullable=True),  # the raw generated text (generation tasks)
            _f("request_id", pa.string()),
        ]
    ),
}
TABLES: tuple[str, ...] = tuple(SCHEMAS)
RESULT_TABLES: tuple[str, ...] = ("head_scores", "input_scores")  # one file per manifest row
MANIFEST_KEY = "checkpoints"  # file key of the one `checkpoints` file (the manifest) of a series
MANIFEST_ROW_KEY = "dormant.manifest_row"  # head_scores metadata: its manifest row as JSON (`store repair` rebuilds)


class CheckpointKey(NamedTuple):
    """What identifies one stored scoring result of a checkpoint within a series (a stored result is skipped without loading its model)."""

    revision: str
    commit: str
    calibration_id: str
    taus_id: str
    scoring_version: str


_CHECKPOINT_KEY_COLUMNS = ("model_id",) + CheckpointKey._fields
# Per-checkpoint rows that belong to one result; several files with the same group are duplicates.
_RESULT_GROUP = ("model_id", "revision", "calibration_id", "taus_id")

_SAFE = re.compile(r"[A-Za-z0-9._-]+")


def series_slug(model_id: str) -> str:
    """model_id as a folder name: "allenai/OLMo-2-1124-7B" -> "allenai--OLMo-2-1124-7B".

    Allowed: letters, digits, ".", "_", "-" and "/" (which becomes "--"). "--" and ".." are refused (as on
    the Hugging Face Hub), so the slug maps back to exactly one model_id (`model_id_of_slug`).
    """
    parts = model_id.split("/") if isinstance(model_id, str) else [""]
    if not all(_SAFE.fullmatch(p) for p in parts) or "--" in model_id or ".." in model_id:
        raise StoreError(
            f"model id {model_id!r} cannot name a store series: use letters, digits, '.', '_', '-' and '/' "
            "(no '--' or '..', no empty part), e.g. 'allenai/OLMo-2-1124-7B' or 'tiny-olmo2'"
        )
    return "--".join(parts)


def model_id_of_slug(slug: str) -> str:
    return slug.replace("--", "/")


def _safe_file_key(file_key: str) -> str:
    """Unsafe characters become "_"; a leading "." or "_" is dropped (readers skip such files)."""
    key = re.sub(r"[^A-Za-z0-9._=-]", "_", str(file_key)).lstrip("._")
    if not key:
        raise StoreError(f"file key {file_key!r} is empty once made filesystem-safe: name the file by revision and run")
    return key


def checkpoint_file_key(key: CheckpointKey) -> str:
    """A file key that depends only on the result's identity: a rerun replaces its own files."""
    digest = hashlib.sha256("\0".join(key[1:]).encode()).hexdigest()[:12]
    return f"{_safe_file_key(key.revision)}-{digest}"


# ---------------------------------------------------------------------------------------------- store


def open_store(path, create: bool = False, allow_old: bool = False) -> Path:
    """The store folder, checked for its schema version; with create=True, made (with its marker) if needed.
    `allow_old` is for `store_upgrade` alone: it opens a store of an older schema version."""
    root = Path(path)
    marker = root / MARKER
    if not marker.is_file():
        if not create:
            what = "does not exist" if not root.exists() else f"has no {MARKER} (not a dormant store)"
            raise StoreError(f"store {str(root)!r} {what}: run `dormant track` to fill it, or pass the right --store")
        with _writing(root):
            root.mkdir(parents=True, exist_ok=True)
        write_marker(root)
        return root
    try:
        version = json.loads(marker.read_text(encoding="utf-8"))["schema_version"]
    except (ValueError, KeyError, TypeError) as e:
        raise StoreError(
            f"store marker {str(marker)!r} is unreadable ({e}): restore it or use a new --store folder"
        ) from None
    if version != SCHEMA_VERSION and not allow_old:
        if isinstance(version, int) and version < SCHEMA_VERSION:
            raise StoreError(
                f"store {str(root)!r} has schema_version {version}, this dormant-heads reads {SCHEMA_VERSION}: "
                f"run `dormant store upgrade --store {root}` once (it rewrites the store in place)"
            )
        raise StoreError(
            f"store {str(root)!r} has schema_version {version}, newer than this dormant-heads reads "
            f"({SCHEMA_VERSION}): upgrade dormant-heads, or use another --store folder"
        )
    return root


def store_version(path) -> int:
    """The schema version written in a store's marker (StoreError when there is none)."""
    root = open_store(path, allow_old=True)
    return json.loads((root / MARKER).read_text(encoding="utf-8"))["schema_version"]


def write_marker(root: Path) -> None:
    content = {"schema_version": SCHEMA_VERSION, "created_by": f"dormant-heads {__version__}"}
    with atomic_file(root / MARKER) as f:
        f.write((json.dumps(content, indent=1) + "\n").encode())


def check_store(path, writable: bool = False) -> None:
    """Validate an existing store's schema version before any work; a missing store is fine (the first
    write creates it), so a run that fails early leaves no empty store behind. With `writable`, also
    probe that the store (or the folder it will be created in) takes a file: a read-only or full disk is
    then refused before any model is loaded."""
    root = Path(path)
    if root.is_dir() and any(p.name != "_locks" for p in root.iterdir()) or root.is_file():
        open_store(root)  # a folder with only `_locks`: a store whose first run holds its lock, nothing stored yet
    if writable:
        folder = root
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise StoreError(f"--store {str(root)!r}: {str(folder)!r} is a file, not a folder; choose another --store")
        with _writing(folder), tempfile.TemporaryFile(dir=folder, prefix=".dormant-probe-") as probe:
            probe.write(b"probe")
            probe.flush()
            os.fsync(probe.fileno())


def _schema(table: str) -> pa.Schema:
    if table not in SCHEMAS:
        raise StoreError(f"unknown table {table!r}{did_you_mean(table, SCHEMAS)}; tables: {', '.join(TABLES)}")
    return SCHEMAS[table]


def _series_dir(root: Path, table: str, model_id: str) -> Path:
    return root / table / f"series={series_slug(model_id)}"


def _is_data_file(p: Path) -> bool:
    return p.suffix == ".parquet" and not p.name.startswith((".", "_"))


def _data_files(root: Path, table: str, model_id: str | None) -> list[Path]:
    base = root / table
    dirs = [_series_dir(root, table, model_id)] if model_id is not None else sorted(base.glob("series=*"))
    return [p for d in dirs if d.is_dir() for p in sorted(d.iterdir()) if _is_data_file(p)]


def series_files(store, table: str, model_id: str) -> list[Path]:
    """Every data file of one series in one table (stale results included): for fingerprints of a series'
    state (the report's reuse stamp), not for reading rows (`read_table` reads through the manifest)."""
    return _data_files(Path(store), table, model_id)


def is_store(path) -> bool:
    """True when `path` holds a store's marker file (written by the first write), without raising."""
    return (Path(path) / MARKER).is_file()


def list_models(store) -> list[str]:
    """Model ids with at least one file in any table, sorted."""
    root = open_store(store)
    slugs = {p.parent.name.removeprefix("series=") for t in TABLES for p in _data_files(root, t, None)}
    return sorted(model_id_of_slug(s) for s in slugs)


@contextlib.contextmanager
def series_lock(store, model_id: str) -> Iterator[None]:
    """Exclusive lock on one series around one check-then-write, released on exit.

    Inside `hold_series` (a whole run of this process holds the series) it only orders this process's
    threads; otherwise it takes the series' lock file as `hold_series` does, for this write alone.
    Re-entrant within a thread.
    """
    root = open_store(store, create=True)
    path = _lock_path(root, model_id)
    held = _held()
    if path in held:  # re-entered by the thread that holds it (a second flock would wait for itself)
        yield
        return
    run = _RUNS.get(path)
    with contextlib.ExitStack() as stack:
        if run is not None:
            stack.enter_context(run.threads)
        else:
            try:
                stack.enter_context(_flock(root, model_id, path, wait=True))
            except _CannotLock as e:
                cause = e.__cause__
                why = cause.strerror if isinstance(cause, OSError) else "cannot make its lock file"
                raise StoreError(
                    f"cannot write to {str(path.parent)!r}: {why}; free space, fix its permissions, or choose "
                    "another folder (what was written before is intact)"
                ) from None
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)


@dataclasses.dataclass
class _Run:
    """A series this process holds for a whole run (`hold_series`): its writes are ordered by `threads`."""

    depth: int = 0
    threads: threading.Lock = dataclasses.field(default_factory=threading.Lock)


_RUNS: dict[Path, _Run] = {}
_RUNS_LOCK = threading.Lock()


@contextlib.contextmanager
def hold_series(store, model_id: str, *, wait: bool = True) -> Iterator[None]:
    """Hold one series for a whole run, from its consistency checks to its last write (`dormant track`, `--retau`,
    `store repair`, `store gc`): one writer per series.

    The lock is `fcntl.flock` on <store>/_locks/<slug>.lock, which works between the processes of one host and
    is released by the kernel when its holder ends, however it ends (SIGINT, SIGKILL: no stale lock). The
    holder writes its pid into the file. Another run waits, with a line on stderr at once and at least every
    20 s ("waiting for another run on SERIES (pid N)"), or with `wait=False` is refused in one line.
    Re-entrant within the process (the flow inside the CLI's run). A store that does not exist yet gets only
    its lock folder, removed again (with the store folder it made) when the run stored nothing; a read-only store is not locked (it cannot
    be written). `series_lock` inside it orders this process's threads.
    """
    root = Path(store)
    path = _lock_path(root, model_id)
    with _RUNS_LOCK:
        run = _RUNS.get(path)
        if run is not None:
            run.depth += 1
    if run is not None:
        try:
            yield
        finally:
            with _RUNS_LOCK:
                run.depth -= 1
        return
    try:
        check_store(root)
    except StoreError:  # a store this release cannot write (another schema version): the run's own checks refuse it
        yield
        return
    new = not root.exists()
    try:
        lock = _flock(root, model_id, path, wait=wait)
        lock.__enter__()
    except _CannotLock:
        yield  # nothing can be written there: the run refuses any write in one line (`check_store(writable=True)`)
        return
    try:
        with _RUNS_LOCK:
            _RUNS[path] = _Run(depth=1)
        yield
    finally:
        with _RUNS_LOCK:
            _RUNS.pop(path, None)
        if not (root / MARKER).is_file():  # nothing stored: no lock folder (nor a store folder it made) left behind
            path.unlink(missing_ok=True)
            for folder in (path.parent, root) if new else (path.parent,):
                with contextlib.suppress(OSError):
                    folder.rmdir()
        lock.__exit__(None, None, None)


class _CannotLock(Exception):
    """The lock file cannot be made: a read-only store, a path that is no folder."""


def _lock_path(root: Path, model_id: str) -> Path:
    return (root / "_locks" / f"{series_slug(model_id)}.lock").absolute()


@contextlib.contextmanager
def _flock(root: Path, model_id: str, path: Path, wait: bool) -> Iterator[None]:
    """flock on the series' lock file, its holder's pid in it. A file removed by its last holder (a store that
    was never written) is taken again: the lock held is always the file at `path`."""
    from dormant_tasks.progress import LogProgress

    waiting = None
    try:
        while True:
            f = _open_lock(path)
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(path)
                if not wait:
                    f.close()
                    raise StoreError(
                        f"another run is writing series {model_id} of {str(root)!r} ({holder}); wait for it to end, "
                        "or run without --no-wait to wait for it"
                    ) from None
                if waiting is None:
                    waiting = LogProgress(desc=f"waiting for another run on {model_id} ({holder})", unit="")
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                same = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            f.close()  # its holder removed it: take the file there now
    finally:
        if waiting is not None:
            waiting.close()
    try:
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n".encode())
        f.flush()
    except OSError:
        pass  # the pid is a courtesy for the waiting run's message
    try:
        yield
    finally:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        f.close()


def _open_lock(path: Path):
    """The lock file, opened (made, with its folder, when missing). _CannotLock when the store cannot take it:
    nothing can be written there (the caller's own check refuses the run in one line)."""
    for _ in range(10):  # a last holder may remove the folder between mkdir and open
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return open(path, "a+b")  # noqa: SIM115 (closed by _flock); not inherited by child processes
        except FileNotFoundError:
            continue
        except OSError as e:
            raise _CannotLock from e
    raise _CannotLock


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"


_LOCAL = threading.local()


def _held() -> set[Path]:
    """The series locks the current thread holds."""
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = set()
    return _LOCAL.held


# ---------------------------------------------------------------------------------------------- writes


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _temp_path(final: Path) -> Path:
    # Hidden (readers skip "."), names its writer so that a leftover of a dead writer can be swept.
    return final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _sweep_dead_temps(folder: Path) -> None:
    """Remove temp files that writers on this host left when killed (their pid no longer runs)."""
    host = _host()
    for p in folder.glob(".*.tmp"):
        parts = p.name.rsplit(".", 4)  # [.name, host, pid, rand, tmp]
        if len(parts) != 5 or parts[1] != host or not parts[2].isdigit():
            continue
        try:
            os.kill(int(parts[2]), 0)
        except ProcessLookupError:
            p.unlink(missing_ok=True)
        except PermissionError:  # alive, another user's
            pass


@contextlib.contextmanager
def atomic_file(final: Path) -> Iterator:
    """An open binary file that becomes `final` only when the block ends without error (temp file in the
    same folder, fsync, os.replace): readers see no file or a whole one, never a partial one."""
    final = Path(final)
    tmp = _temp_path(final)
    try:
        with _writing(final.parent), open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with _writing(final.parent):
            os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _writing(folder: Path) -> Iterator[None]:
    """OS errors of a write as a StoreError that names the folder and the fix (a full disk is not retried)."""
    try:
        yield
    except OSError as e:
        if e.errno not in USER_ERRNOS:
            raise
        raise StoreError(
            f"cannot write to {str(folder)!r}: {e.strerror}; free space, fix its permissions, "
            "or choose another folder (what was written before is intact)"
        ) from e


def _from_rows(rows: list[dict], table: str) -> pa.Table:
    if not rows:
        return _schema(table).empty_table()
    names = list(dict.fromkeys(k for r in rows for k in r))  # every key of any row, first-seen order
    columns = {}
    for name in names:
        try:
            columns[name] = pa.array([r.get(name) for r in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise StoreError(
                f"table {table!r}: column {name!r} has values of mixed or unsupported types ({e})"
            ) from None
    return pa.table(columns)


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_null(src) or src == dst:
        return True
    if pa.types.is_integer(dst):
        return pa.types.is_integer(src)
    if pa.types.is_floating(dst):
        return pa.types.is_integer(src) or pa.types.is_floating(src)
    if pa.types.is_string(dst):
        return pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_dictionary(src)
    if pa.types.is_timestamp(dst):
        return pa.types.is_timestamp(src) and src.tz is not None
    return False


def conform(data: pa.Table | list[dict], table: str) -> pa.Table:
    """`data` cast to SCHEMAS[table]; StoreError naming any missing, unknown, null or mistyped column."""
    schema = _schema(table)
    t = _from_rows(data, table) if isinstance(data, list) else data
    if not isinstance(t, pa.Table):
        raise StoreError(f"table {table!r}: expected a pyarrow Table or a list of dicts, got {type(data).__name__}")
    unknown = [c for c in t.column_names if c not in schema.names]
    if unknown:
        raise StoreError(
            f"table {table!r} has no column {unknown[0]!r}{did_you_mean(unknown[0], schema.names)}; "
            f"its columns: {', '.join(schema.names)}"
        )
    arrays = []
    for field in schema:
        if field.name not in t.column_names:
            if field.nullable:
                arrays.append(pa.nulls(t.num_rows, field.type))
                continue
            raise StoreError(f"table {table!r}: missing column {field.name!r} ({field.type}); add it to every row")
        col = t.column(field.name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if not _castable(col.type, field.type):
            hint = " (use timezone-aware UTC datetimes)" if pa.types.is_timestamp(field.type) else ""
            raise StoreError(f"table {table!r}: column {field.name!r} has type {col.type}, expected {field.type}{hint}")
        if col.null_count and not field.nullable:
            raise StoreError(
                f"table {table!r}: column {field.name!r} has {col.null_count} null value(s); it needs a value in every row"
            )
        try:
            arrays.append(col.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise StoreError(f"table {table!r}: column {field.name!r} does not fit {field.type} ({e})") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def write_table(
    store,
    table: str,
    data: pa.Table | list[dict],
    *,
    file_key: str,
    model_id: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write one file of `table` atomically and return its path; an existing file with the same key is replaced.

    All rows must share one model_id; `model_id` names the series for an empty table (and, when given,
    must match the rows). The store is created on the first write. `metadata`: string pairs kept in the
    file's schema metadata (`read_metadata`).

    `checkpoints` is the manifest: its rows are merged into the series' one file (a row with the same
    `CheckpointKey` replaces the stored one), `file_key` naming the result files the rows commit (rows may
    carry their own `file_key`; `input_scores_kept` defaults to whether that input_scores file exists); of two rows with the same key
    the newer `analyzed_at` stays.
    Prefer `commit_checkpoint`, which writes a result's files and its row in the right order.
    """
    if table == "checkpoints":
        return _merge_manifest(store, data, file_key, model_id)
    t = conform(data, table)
    series = _series_of(t, table, model_id)
    if metadata:
        t = t.replace_schema_metadata({str(k): str(v) for k, v in metadata.items()})
    return _write_file(open_store(store, create=True), table, series, file_key, t)


def _series_of(t: pa.Table, table: str, model_id: str | None) -> str:
    ids = t.column("model_id").unique().to_pylist()
    if len(ids) > 1:
        raise StoreError(
            f"table {table!r}: one file holds one series, got model ids {sorted(ids)}: write one file per model_id"
        )
    if model_id is not None and ids and ids[0] != model_id:
        raise StoreError(f"table {table!r}: rows are of model id {ids[0]!r}, not {model_id!r}")
    if not ids and model_id is None:
        raise StoreError(f"table {table!r}: an empty table needs model_id=... to name its series")
    return str(ids[0] if ids else model_id)


def _write_file(root: Path, table: str, series: str, file_key: str, t: pa.Table) -> Path:
    folder = _series_dir(root, table, series)
    with _writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
    _sweep_dead_temps(folder)
    final = folder / f"{_safe_file_key(file_key)}.parquet"
    with atomic_file(final) as f:
        pq.write_table(t, f, **parquet_options(t))
    return final


# Float columns whose values are all distinct (scores and their statistics): stored with Parquet's
# BYTE_STREAM_SPLIT encoding, which zstd then compresses about a third smaller than plain encoding. Other
# columns keep dictionary encoding (few distinct values: names, rates k / n, taus).
NOISY_FLOATS = frozenset({"score", "score_std", "length_slope", "boundary_gap"})


def parquet_options(t: pa.Table) -> dict:
    split = [n for n in t.schema.names if n in NOISY_FLOATS and pa.types.is_floating(t.schema.field(n).type)]
    # every data page carries a CRC32 that reads verify (`_SCAN`): flipped bytes are an error, not other values
    if not split:
        return {"compression": "zstd", "write_page_checksum": True}
    return {
        "compression": "zstd",
        "write_page_checksum": True,
        "use_byte_stream_split": split,
        "use_dictionary": [n for n in t.schema.names if n not in split],
    }


def _merge_manifest(store, data, file_key: str, model_id: str | None) -> Path:
    rows = data.to_pylist() if isinstance(data, pa.Table) else [dict(r) for r in data]
    root = open_store(store, create=True)
    for r in rows:
        r.setdefault("file_key", _safe_file_key(file_key))
        if "input_scores_kept" not in r and r.get("model_id"):
            path = _series_dir(root, "input_scores", r["model_id"]) / f"{r['file_key']}.parquet"
            r["input_scores_kept"] = path.is_file()
    new = conform(rows, "checkpoints")
    series = _series_of(new, "checkpoints", model_id)
    with series_lock(root, series):
        merged = dedupe_checkpoints(pa.concat_tables([_read_manifest(root, series), new]))  # the newest row per key
        return _write_file(root, "checkpoints", series, MANIFEST_KEY, merged)


def commit_checkpoint(store, row: dict, head_scores: pa.Table, input_scores: pa.Table | None = None) -> Path:
    """Store one checkpoint's result: its head_scores (and input_scores) files, then its manifest row last,
    all under `series_lock`. The files are named by `checkpoint_file_key` of the row's `CheckpointKey`."""
    key = CheckpointKey(*(row[c] for c in CheckpointKey._fields))
    file_key = checkpoint_file_key(key)
    model_id = row["model_id"]
    manifest_row = conform(
        [{**row, "file_key": file_key, "input_scores_kept": input_scores is not None}], "checkpoints"
    )
    row = manifest_row.to_pylist()[0]
    meta = {MANIFEST_ROW_KEY: json.dumps({**row, "analyzed_at": row["analyzed_at"].isoformat()})}
    with series_lock(store, model_id):
        root = Path(store)
        check_manifest(root, model_id)  # never commit next to results a lost manifest no longer names
        if not manifest_path(root, model_id).is_file():
            # The manifest exists before the series' first result: a crash between a result's files and its row
            # then leaves an orphan beside an (empty) manifest, which the rerun overwrites, not a "lost manifest".
            write_manifest(root, model_id, SCHEMAS["checkpoints"].empty_table())
        if input_scores is not None:
            path = write_table(store, "input_scores", input_scores, file_key=file_key, model_id=model_id)
            row |= {"input_scores_sha256": file_sha256(path), "input_scores_bytes": path.stat().st_size}
        path = write_table(store, "head_scores", head_scores, file_key=file_key, model_id=model_id, metadata=meta)
        row |= {"head_scores_sha256": file_sha256(path), "head_scores_bytes": path.stat().st_size}
        return write_table(store, "checkpoints", [row], file_key=file_key, model_id=model_id)


def write_manifest(root: Path, model_id: str, checkpoints: pa.Table) -> Path:
    """Replace a series' whole manifest in the store folder `root` (opened by the caller, who holds
    `series_lock`): `store repair`, `store gc`, `store upgrade`."""
    return _write_file(Path(root), "checkpoints", model_id, MANIFEST_KEY, conform(checkpoints, "checkpoints"))


def derived_file_key(table: str, taus_id: str, calibration_id: str) -> str:
    """The one file of a derived table (transitions, head_histories) per taus and calibration set."""
    return f"{table}-{taus_id}-{calibration_id}"


def drop_legacy_derived(store, model_id: str, taus_id: str) -> None:
    """Delete the derived files of schema version 3's naming (one per taus, `<table>-<taus_id>`), which the
    per-calibration-set files replace; hold `series_lock`."""
    root = open_store(store)
    for table in ("transitions", "head_histories"):
        (_series_dir(root, table, model_id) / f"{table}-{_safe_file_key(taus_id)}.parquet").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- reads


def _filter_expression(filters, schema: pa.Schema):
    if filters is None or isinstance(filters, ds.Expression):
        return filters
    if not isinstance(filters, Mapping):
        raise StoreError("filters: pass a dict {column: value or list of values} or a pyarrow.dataset expression")
    expr = None
    for name, value in filters.items():
        if name not in schema.names:
            raise StoreError(f"filter on unknown column {name!r}{did_you_mean(name, schema.names)}")
        if isinstance(value, (list, tuple, set, frozenset)):
            term = ds.field(name).isin(list(value))
        else:
            term = ds.field(name) == value
        expr = term if expr is None else expr & term
    return expr


# Reads verify every data page's CRC32 (written by `parquet_options`; files written before have none).
_SCAN = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)


def _read_files(files: list[Path], schema: pa.Schema, expr, columns=None) -> pa.Table:
    if not files:
        t = schema.empty_table()
        return t.select(columns) if columns is not None else t
    try:
        t = ds.dataset([str(p) for p in files], schema=schema, format=_SCAN).to_table(filter=expr, columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise _read_failure(files, e) from None
    # a file without one of the schema's columns (a damaged footer renames it) reads as nulls: refused
    if any(t.column(f.name).null_count for f in t.schema if not schema.field(f.name).nullable):
        raise _read_failure(files, StoreError("a column that needs a value in every row has none"))
    return t


def _read_failure(files: list[Path], e: Exception) -> StoreError:
    """The StoreError of a failed read: the first damaged file by name (each checked alone), with the fix."""
    if isinstance(e, OSError) and e.errno in USER_ERRNOS:
        return StoreError(f"cannot read {str(files[0].parent)!r}: {e.strerror}; fix its permissions")
    for path in files:
        reason = damage_of(path)
        if reason is not None:
            return damaged_error(path, reason)
    return damaged_error(files[0], _one_line(e))


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def store_root_of(path: Path) -> Path:
    """The store folder of a data file (<store>/<table>/series=<slug>/<file>)."""
    return Path(path).parents[2]


def damaged_error(path: Path, reason: str) -> StoreError:
    root = store_root_of(path)
    return StoreError(
        f"store file {str(Path(path).relative_to(root))!r} is damaged ({reason}); run `dormant store repair "
        f"--store {root}`: it moves damaged files aside, and the next `dormant track` rebuilds what they held"
    )


def damage_of(path: Path, sha256: str | None = None, size: int | None = None) -> str | None:
    """Why a data file cannot be trusted (None: it is whole): a size or content checksum other than the manifest
    records (when given), an unreadable footer, a column of its table missing, or a data page whose CRC fails."""
    try:
        if size is not None and path.stat().st_size != size:
            return f"{path.stat().st_size} bytes, the manifest recorded {size}"
        if sha256 is not None and file_sha256(path) != sha256:
            return "its content checksum differs from the manifest's"
        table = path.parents[1].name
        f = pq.ParquetFile(path, page_checksum_verification=True)
        if table in SCHEMAS:
            missing = [x.name for x in SCHEMAS[table] if not x.nullable and x.name not in f.schema_arrow.names]
            if missing:
                return f"no column {missing[0]!r}"
        f.read()
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, OSError) and e.errno in USER_ERRNOS:
            raise StoreError(f"cannot read {str(path)!r}: {e.strerror}; fix its permissions") from None
        return _one_line(e)
    return None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_path(root: Path, model_id: str) -> Path:
    return _series_dir(root, "checkpoints", model_id) / f"{MANIFEST_KEY}.parquet"


def _read_manifest(root: Path, model_id: str) -> pa.Table:
    path = manifest_path(root, model_id)
    if not path.is_file():
        return SCHEMAS["checkpoints"].empty_table()
    return _read_files([path], SCHEMAS["checkpoints"], None)


def _series_ids(root: Path, table: str) -> list[str]:
    return sorted(model_id_of_slug(d.name.removeprefix("series=")) for d in (root / table).glob("series=*"))


def read_table(
    store, table: str, model_id: str | None = None, filters=None, *, dedupe: bool = True, columns=None
) -> pa.Table:
    """All rows of `table` (optionally of one series and matching `filters`), with exactly SCHEMAS[table]'s columns
    (or only `columns`, in that order).

    `filters`: {column: value or list of values} (all must hold) or a pyarrow.dataset expression.
    An empty table with the right schema when nothing is stored. head_scores and input_scores come from the
    files the manifest names (see the module docstring); `dedupe` keeps, per revision and calibration set
    (and taus), only the newest result, as the manifest says, and one manifest row per `CheckpointKey`.
    """
    schema = _schema(table)
    root = open_store(store)
    expr = _filter_expression(filters, schema)
    if model_id is not None:
        model_expr = ds.field("model_id") == model_id
        expr = model_expr if expr is None else expr & model_expr
    if table in RESULT_TABLES:
        series = (
            [model_id]
            if model_id is not None
            else sorted({*_series_ids(root, "checkpoints"), *_series_ids(root, table)})
        )
        files = [p for m in series for p in result_files(root, table, m, filters, dedupe=dedupe)]
    else:
        files = _data_files(root, table, model_id)
    t = _read_files(files, schema, expr, columns)
    if dedupe and table == "checkpoints" and columns is None:
        t = dedupe_checkpoints(t)
    return t


def result_files(root: Path, table: str, model_id: str, filters=None, *, dedupe: bool = True) -> list[Path]:
    """The head_scores or input_scores files of a series' manifest rows that `filters` (a dict) can match.

    StoreError, naming `dormant store repair`, when a file the manifest names is missing.
    """
    manifest = _read_manifest(root, model_id)
    if isinstance(filters, Mapping):  # prune on the columns the manifest shares with the table
        shared = {k: v for k, v in filters.items() if k in SCHEMAS["checkpoints"].names and k in SCHEMAS[table].names}
        expr = _filter_expression(shared, SCHEMAS["checkpoints"])
        if expr is not None:
            manifest = manifest.filter(expr)
    if table == "input_scores":
        manifest = manifest.filter(manifest.column("input_scores_kept"))
    rows = manifest.to_pylist() if manifest.num_rows else []
    if dedupe:  # per result group, the newest result
        group = [c for c in _RESULT_GROUP if c in SCHEMAS[table].names]  # input_scores do not depend on taus
        newest: dict[tuple, dict] = {}
        for r in sorted(rows, key=lambda r: (r["analyzed_at"], r["file_key"])):
            newest[tuple(r[c] for c in group)] = r
        rows = list(newest.values())
    return sorted(set(check_result_files(root, model_id, rows, table)))


def check_result_files(root: Path, model_id: str, rows, table: str = "head_scores") -> list[Path]:
    """The `table` files of manifest `rows`; StoreError naming `dormant store repair` when one is missing, or
    when there are no rows and the manifest names none of the series' files (`check_manifest`)."""
    if not rows:
        check_manifest(root, model_id)
    folder = _series_dir(root, table, model_id)
    files = []
    for r in rows:
        path = folder / f"{r['file_key']}.parquet"
        if not path.is_file():
            raise StoreError(
                f"store {str(root)!r}: the {table} file of {model_id}@{r['revision']} ({path.name}) is missing "
                f"(deleted by hand?); run `dormant store repair --store {root}`: it drops such checkpoints from "
                "the manifest, and the next `dormant track` scores them again"
            )
        size = r.get(f"{table}_bytes")
        if size is not None and path.stat().st_size != size:  # the cheap check of every read: the checksum is status's
            raise damaged_error(path, f"{path.stat().st_size} bytes, the manifest recorded {size}")
        files.append(path)
    return files


def check_manifest(root: Path, model_id: str) -> None:
    """StoreError naming `dormant store repair` when the series has head_scores files but no manifest (deleted
    by hand): read as "nothing stored", its results would be scored again, or deleted as orphans. The manifest
    is written before a series' first result, so a crash never leaves files without one."""
    path = manifest_path(root, model_id)
    if path.is_file():
        return
    heads = _data_files(root, "head_scores", model_id)
    if heads:
        raise StoreError(
            f"store {str(root)!r}: series {model_id} has {len(heads)} head_scores files but no manifest "
            f"({path.relative_to(root)} is missing: deleted by hand?); run `dormant store repair --store "
            f"{root}`: it rebuilds the manifest from the files"
        )


def read_metadata(store, table: str, model_id: str, file_key: str) -> dict[str, str] | None:
    """The schema metadata `write_table(..., metadata=)` kept in one file, or None when the file does not exist."""
    path = _series_dir(open_store(store), table, model_id) / f"{_safe_file_key(file_key)}.parquet"
    if not path.is_file():
        return None
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as e:
        raise _read_failure([path], e) from None
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW")}


def dedupe_checkpoints(checkpoints: pa.Table) -> pa.Table:
    """One row per (model_id, revision, commit, calibration_id, taus_id, scoring_version): the newest analyzed_at."""
    if checkpoints.num_rows == 0:
        return checkpoints
    newest_first = checkpoints.sort_by([("analyzed_at", "descending")])
    keys = zip(*(newest_first.column(c).to_pylist() for c in _CHECKPOINT_KEY_COLUMNS))
    seen: set = set()
    keep = []
    for i, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    if len(keep) == checkpoints.num_rows:
        return checkpoints
    return newest_first.take(sorted(keep)) if keep else newest_first.slice(0, 0)


def stored_checkpoint_keys(store, model_id: str) -> set[CheckpointKey]:
    """The results already stored for a series (empty when the store or series does not exist yet)."""
    if not (Path(store) / MARKER).is_file():
        return set()
    t = read_table(store, "checkpoints", model_id=model_id, dedupe=False, columns=list(CheckpointKey._fields))
    if not t.num_rows:
        check_manifest(Path(store), model_id)
    return set(map(CheckpointKey._make, zip(*(t.column(c).to_pylist() for c in CheckpointKey._fields))))


# ------------------------------------------------------------------------------------------- requests


def request_path(store, model_id: str, request_id: str) -> Path:
    return Path(store) / REQUESTS / f"series={series_slug(model_id)}" / f"{_safe_file_key(request_id)}.json"


def write_request(store, model_id: str, request) -> Path:
    """Save a run's request (`requests.TrackRequest`/`EvalRequest`) as JSON beside its results; rows that the run
    writes carry its `request_id`. The same request twice is the same file."""
    source = getattr(request, "source_identity", None)  # a track request: the series' source, recorded once
    if source is not None:
        record_source(store, model_id, source)
    path = request_path(open_store(store, create=True), model_id, request.request_id)
    with _writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:
        f.write(request.to_json().encode())
    return path


def stored_requests(store, model_id: str) -> list[str]:
    """The JSON of every request saved for a series, the newest first (none without a store)."""
    if not is_store(store):
        return []
    folder = request_path(store, model_id, "x").parent
    paths = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    return [p.read_text(encoding="utf-8") for p in paths]


def read_request_json(store, model_id: str, request_id: str) -> str:
    path = request_path(open_store(store), model_id, request_id)
    if not path.is_file():
        raise StoreError(f"no request {request_id!r} of {model_id!r} in {store}: see {path.parent} for the saved ones")
    return path.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ series sources


def source_path(store, model_id: str) -> Path:
    return Path(store) / SOURCES / f"series={series_slug(model_id)}.json"


def recorded_source(store, model_id: str) -> str | None:
    """The source a series is tracked from ("hub:ORG/NAME" or "local:/resolved/folder"); None before its first
    write, and for a series stored before sources were recorded (adopted by its next run: `record_source`)."""
    try:
        return str(json.loads(source_path(store, model_id).read_text(encoding="utf-8"))["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_source(store, model_id: str, source: str) -> None:
    """A ConfigError when the store keeps `model_id` from another source: two sources are never one series. A
    series stored before sources were recorded is known by the sources of its saved track requests."""
    if not is_store(store):
        return
    recorded = recorded_source(store, model_id)
    known = {recorded} if recorded is not None else _saved_sources(store, model_id)
    if known and source not in known:
        moved = (
            f"; if the folder moved, delete {source_path(store, model_id)} to adopt the new place" if recorded else ""
        )
        raise ConfigError(
            f"the store keeps a series {model_id!r} tracked from {', '.join(sorted(k.split(':', 1)[1] for k in known))}, "
            f"not from {source.split(':', 1)[1]}: add --series-name NAME to store this one apart (never merged){moved}"
        )


def _saved_sources(store, model_id: str) -> set[str]:
    """The sources of a series' saved track requests (local ones are saved absolute), as `record_source` names them."""
    found = set()
    for text in stored_requests(store, model_id):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        src = data.get("source") if isinstance(data, dict) and data.get("kind") == "track" else None
        if isinstance(src, str):
            found.add(f"local:{Path(src).resolve()}" if src.startswith("/") else f"hub:{src}")
    return found


def record_source(store, model_id: str, source: str) -> None:
    """Record the series' source at its first write (or adopt it for a series stored before sources were
    recorded); a different source is refused (`check_source`), also between two runs started at once."""
    root = open_store(store, create=True)
    with series_lock(root, model_id):
        check_source(root, model_id, source)
        path = source_path(root, model_id)
        if path.is_file():
            return
        with _writing(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            f.write((json.dumps({"model_id": model_id, "source": source}, indent=1) + "\n").encode())


def series_of_source(store, source: str) -> str | None:
    """The series the store keeps from `source` (its recorded identity), or None."""
    folder = Path(store) / SOURCES
    for path in sorted(folder.glob("series=*.json")) if folder.is_dir() else ():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and saved.get("source") == source:
            return str(saved.get("model_id"))
    return None
