"""The store's tables (docs/DATA_CONTRACT.md): `SCHEMAS`, the manifest's keys, `CheckpointKey` and the file
keys of stored results. A change here updates DATA_CONTRACT.md in the same change."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import pyarrow as pa

from dormant_tasks.errors import StoreError, did_you_mean
from dormant_tasks.store.layout import Table, safe_file_key


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
    Table.checkpoints: pa.schema(
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
            # sha256 of the result's scores (`head_scores.score` in score_fn, layer, head_index order): two results
            # with one digest scored identically everywhere (`dormant status`'s second net after the integrity
            # audit); added within version 4, null: written before (the scores are then read to compare)
            _f("scores_sha256", pa.string(), nullable=True),
            # per input of the calibration set, its cluster (0, 1, ...: WinoGrande twins, a document, a block of
            # one source file): the input-dependence test permutes whole clusters (findings/dependence.py).
            # Null: every input its own cluster (a user file's lines, MMLU questions, rows written before it)
            _f("input_clusters", pa.list_(pa.int32()), nullable=True),
            # the dtype asked for (float16 or bfloat16) whose pass came out NaN or infinite, so that the checkpoint
            # was scored again in float32 (then `dtype`); null: scored as asked, or a row written before the column
            _f("rescored_from", pa.string(), nullable=True),
        ]
    ),
    Table.head_scores: pa.schema(
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
            # transition (statistics/confidence.py); null in results stored before it was kept
            _f("inactive_inputs", pa.binary(), nullable=True),
            # the layer's sliding window in tokens (engine.layer_windows); null: a full-attention layer, or a
            # result stored before the column (added within version 4)
            _f("sliding_window", pa.int32(), nullable=True),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    Table.input_scores: pa.schema(
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
    Table.transitions: pa.schema(
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
            # the row where a confident transition is located: the head goes from a confident state to the
            # opposite confident state (docs/SCORES.md, "Confidence"); null: the checkpoints' inputs unknown
            _f("confident", pa.bool_(), nullable=True),
            _f("blip", pa.bool_()),  # undone at the next checkpoint (A -> B -> A)
            # McNemar's exact p of the change on the paired per-input indicators (its null: the head's dormant
            # rate on these inputs is the same at both checkpoints); null where the indicators are not kept
            _f("confident_p", pa.float64(), nullable=True),
            # the head's q-value (Benjamini-Hochberg, or -Yekutieli: the file's metadata says) of head_p over the
            # heads of the series' function and calibration set
            _f("confident_q", pa.float64(), nullable=True),
            _f("head_p", pa.float64(), nullable=True),  # p of "the head changes confident state somewhere"
            # of a confident row: the confident checkpoints it goes between, and their intersection-union p
            _f("state_p", pa.float64(), nullable=True),
            _f("from_confident_revision", pa.string(), nullable=True),
            _f("to_confident_revision", pa.string(), nullable=True),
            _f("calibration_id", pa.string()),
            _f("taus_id", pa.string()),
        ]
    ),
    Table.head_histories: pa.schema(
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
    Table.calibration_agreement: pa.schema(
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
    Table.taus: pa.schema(
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
    Table.evaluations: pa.schema(
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
    Table.failed_checkpoints: pa.schema(
        COMMON
        + [
            _f("commit", pa.string(), nullable=True),  # unknown when a Hub revision failed before its download
            _f("reason", pa.string()),  # the error, as `dormant track` printed it
            _f("failed_at", pa.timestamp("us", tz="UTC")),
            _f("request_id", pa.string(), nullable=True),
        ]
    ),
    # One row per branch of the series that the integrity audit set aside (docs/CHECKPOINTS.md, "Integrity"):
    # the weights of another step, or a second branch at one step (one file per series, rewritten). Added in
    # schema version 4 without a bump: a store without it has set nothing aside.
    Table.set_aside_checkpoints: pa.schema(
        COMMON
        + [
            _f("commit", pa.string(), nullable=True),  # its commit (a local folder's content hash)
            # the audit's verdict: "duplicate", "duplicate step"; kept by --keep-duplicates, also "partial duplicate",
            # "incomplete"
            _f("kind", pa.string()),
            _f("duplicate_of", pa.string(), nullable=True),  # the branch kept in its place
            _f("reason", pa.string()),  # the audit's line
            _f("kept", pa.bool_()),  # tracked anyway (`track --keep-duplicates`), marked; else never read as current
            _f("set_aside_at", pa.timestamp("us", tz="UTC")),
            _f("request_id", pa.string(), nullable=True),
        ]
    ),
    # One row per checkpoint the series' source listed when a track run planned, scored or not (one file per series,
    # rewritten when the listing changes): how many checkpoints lie unscored between two scored ones
    # (tracking/listing.py). Added in schema version 4 without a bump: a store without it does not know.
    Table.listed_checkpoints: pa.schema(
        COMMON
        + [
            _f("ingredient", pa.int32(), nullable=True),  # the stage-2 ingredient (null: none)
            _f("available", pa.bool_()),  # a point of training a run may score; false: the integrity audit set it aside
            _f("listed_at", pa.timestamp("us", tz="UTC")),
            _f("request_id", pa.string(), nullable=True),
        ]
    ),
    # One row per (item, setting) of an evaluation run with --log-samples (lm-eval's --log_samples).
    Table.evaluation_items: pa.schema(
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
RESULT_TABLES: tuple[str, ...] = (Table.head_scores, Table.input_scores)  # one file per manifest row
MANIFEST_KEY = "checkpoints"  # file key of the one `checkpoints` file (the manifest) of a series
MANIFEST_ROW_KEY = "dormant.manifest_row"  # head_scores metadata: its manifest row as JSON (`store repair` rebuilds)


class CheckpointKey(NamedTuple):
    """What identifies one stored scoring result of a checkpoint within a series (a stored result is skipped without loading its model)."""

    revision: str
    commit: str
    calibration_id: str
    taus_id: str
    scoring_version: str


CHECKPOINT_KEY_COLUMNS = ("model_id",) + CheckpointKey._fields
# Per-checkpoint rows that belong to one result; several files with the same group are duplicates.
RESULT_GROUP = ("model_id", "revision", "calibration_id", "taus_id")


def checkpoint_file_key(key: CheckpointKey) -> str:
    """A file key that depends only on the result's identity: a rerun replaces its own files."""
    digest = hashlib.sha256("\0".join(key[1:]).encode()).hexdigest()[:12]
    return f"{safe_file_key(key.revision)}-{digest}"


def table_schema(table: str) -> pa.Schema:
    if table not in SCHEMAS:
        raise StoreError(f"unknown table {table!r}{did_you_mean(table, SCHEMAS)}; tables: {', '.join(TABLES)}")
    return SCHEMAS[table]


# Float columns whose values are all distinct (scores and their statistics): stored with Parquet's
# BYTE_STREAM_SPLIT encoding, which zstd then compresses about a third smaller than plain encoding. Other
# columns keep dictionary encoding (few distinct values: names, rates k / n, taus).
NOISY_FLOATS = frozenset({"score", "score_std", "length_slope", "boundary_gap"})


def derived_file_key(table: str, taus_id: str, calibration_id: str) -> str:
    """The one file of a derived table (transitions, head_histories) per taus and calibration set."""
    return f"{table}-{taus_id}-{calibration_id}"


def scores_digest(head_scores: pa.Table) -> str:
    """The manifest's `scores_sha256` of one result's head_scores rows: sha256 of the `score` column's float64 bytes in
    (score_fn, layer, head_index) order; the same scores give the same digest whatever the row order."""
    import hashlib

    t = head_scores.select(["score_fn", "layer", "head_index", "score"])
    t = t.sort_by([("score_fn", "ascending"), ("layer", "ascending"), ("head_index", "ascending")])
    return hashlib.sha256(t.column("score").to_numpy().astype("<f8").tobytes()).hexdigest()
