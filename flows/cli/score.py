"""`dormant score`: per-input scores of one model over a calibration set, written as one Parquet or CSV file.

Thin: load (`loading.load_model_at`: a Hub revision is pinned to its commit and hash-checked), read texts
(`calibration.load_calibration`, or `--calibration NAME` as `track` takes it: a bundled set, a file, or the
induction probe's token ids), score (`scoring.score_texts`; `scoring.score_ids` for the probe), write the docs/DATA_CONTRACT.md `input_scores`
layout plus `model_id` (the resolved source: an absolute folder or a Hub id), `revision` and `calibration_id`
("`dormant score` files" there), in the format `--out`'s suffix names, atomically (temp file in the same folder,
then rename: never a partial file).
"""

from __future__ import annotations

import sys

from dormant_tasks.atomic import cannot_create_in
from dormant_tasks.checkpoints import source_for
from dormant_tasks.grammar import (
    CALIBRATION_BATCH_SIZE,
    LIMIT,
    MAX_TOKENS,
    TEXTS,
    device_option,
    dtype_option,
    model_option,
    out_option,
    scores_option,
)
from dormant_tasks.options import Option, seed_type

from .options import add_options

OUT_FORMATS = (".parquet", ".csv")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "score",
        help="score every attention head of one model on a calibration set",
        description=__doc__.splitlines()[0],
    )
    add_options(
        p,
        [
            model_option("checkpoint folder or Hub repo id", role="checkpoint"),
            Option(
                "--revision",
                "Hub branch, tag or commit (default: the repo's main)",
                kw={"default": None, "metavar": "REV"},
            ),
            TEXTS,
            Option(
                "--calibration",
                "a calibration set as `track --calibration` names one: a bundled set, NAME:K, a text file, or "
                "induction-probe (Xu's 2,000 synthetic A B ... A sequences of 256 token ids; --limit N takes N)",
                kw={"default": None, "metavar": "NAME"},
            ),
            LIMIT,
            CALIBRATION_BATCH_SIZE,
            dtype_option(),
            device_option("score"),
            scores_option("score functions, space- or comma-separated (default: all 16, incl. random)"),
            Option(
                "--seed",
                "seed of the random baseline (default: %(default)s)",
                kw={"type": seed_type(), "default": 0, "metavar": "N"},
            ),
            MAX_TOKENS,
            out_option(
                "output file, .parquet or .csv: its suffix names the format (required; new, or a Parquet file `dormant "
                "score` wrote: nothing else is replaced)",
                required=True,
            ),
        ],
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.outputs import OWNER_KEY, check_file

    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError(f"--batch-size must be a positive integer, got {args.batch_size}")
    if not args.out.strip():
        raise ConfigError("--out is empty: name a .parquet or .csv file, e.g. --out scores.parquet")
    if args.texts and args.calibration:
        raise ConfigError("--texts and --calibration both name a calibration set: pass the file as --calibration FILE")
    if args.revision and source_for(args.model).folder is not None:
        raise ConfigError(f"--revision names a Hub branch; --model {args.model} is a folder: drop --revision")
    out = check_file(args.out)  # before the heavy imports below: a wrong --out answers at once
    if out.suffix.lower() not in OUT_FORMATS:
        raise ConfigError(
            f"--out {args.out}: name a .parquet or .csv file (the suffix names the format), "
            f"e.g. {out.with_suffix('.parquet')}"
        )
    why = cannot_create_in(out.parent)
    if why:
        raise ConfigError(f"--out {args.out}: no file can be created in {str(out.parent)!r} ({why}); choose another")

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dormant_tasks.atomic import atomic_file
    from dormant_tasks.checkpoints import load_model_at
    from dormant_tasks.engine import ScoringOptions, parse_score_functions, score_ids, score_texts
    from dormant_tasks.tracking import load_calibration, load_calibration_sets

    score_fns = parse_score_functions(args.scores)
    if args.calibration:
        calibration = load_calibration_sets([args.calibration], args.limit)[0]
    else:
        calibration = load_calibration(args.texts, args.limit)
    for note in calibration.notes("score"):
        print(note, file=sys.stderr)
    from .track import limit_note

    limit_note("score", [calibration], args.limit)
    model, tokenizer = load_model_at(args.model, args.revision, args.dtype, args.device)
    options = ScoringOptions(tuple(score_fns), batch_size=args.batch_size, seed=args.seed, max_tokens=args.max_tokens)
    if calibration.probe is not None:  # token ids within the model's vocabulary, no tokenizer
        rows = calibration.probe.rows(model.config.get_text_config().vocab_size)
        scores = score_ids(model, rows, options, tokenizer.pad_token_id, progress=True)
    else:
        scores = score_texts(model, tokenizer, calibration.texts, options, progress=True)
    table = scores.to_table()
    source, revision = _resolved(args.model, args.revision)
    n = table.num_rows
    table = table.add_column(0, "calibration_id", pa.array([calibration.calibration_id] * n, pa.string()))
    table = table.add_column(0, "revision", pa.array([revision] * n, pa.string()))
    table = table.add_column(0, "model_id", pa.array([source] * n, pa.string()))
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), OWNER_KEY: b'{"kind": "scores"}'})
    with atomic_file(out) as f:
        if out.suffix.lower() == ".csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, f)
        else:
            pq.write_table(table, f)
    n_layers, n_heads = scores.values.shape[2:]
    print(
        f"scored {calibration.n_inputs} inputs ({calibration.calibration_id}) x {len(score_fns)} functions "
        f"x {n_layers} layers x {n_heads} heads -> {out}"
    )
    return 0


def _resolved(model: str, revision: str | None) -> tuple[str, str]:
    """(model_id, revision) as a reader can find the model again (`CheckpointSource.spec` and the checkpoint's
    name): a local checkpoint as its absolute folder and the folder's name (a branch name, as `track` stores it), a
    Hub repo as its id and the revision asked (default `main`)."""
    source = source_for(model)
    return source.spec, source.checkpoint(revision).name
