"""`dormant pretrain-tiny`: pretrain the tiny OLMo-2 on the bundled demo corpus into a local checkpoint series."""

from __future__ import annotations

from dormant_tasks.grammar import model_option, threads_option
from dormant_tasks.options import Option, seed_type

from .options import add_options

DEFAULT_STEPS = 600  # = dormant_tasks.tiny.DEFAULT_STEPS (not imported: it loads torch; a test checks they agree)
# the tiny pretraining's options, `pretrain-tiny`'s and `demo`'s
STEPS = Option(
    "--steps",
    "pretraining steps, the last one saved (default: %(default)s)",
    kw={"type": int, "default": DEFAULT_STEPS, "metavar": "N"},
)
SEED = Option(
    "--seed",
    "pretraining seed, of the initialisation and the data order (default: %(default)s)",
    kw={"type": seed_type(), "default": 0, "metavar": "N"},
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "pretrain-tiny",
        help="pretrain a tiny OLMo-2 on the demo corpus, saving branch-named checkpoints (offline series)",
        description="Pretrain a 4-layer x 8-head OLMo-2 (width 128) with its own BPE tokenizer on the bundled "
        "demo corpus; save checkpoints named stage1-step{S}-tokens{T}K into the --model folder. Deterministic "
        "for a seed; a rerun with the same options is a no-op.",
    )
    add_options(
        parser,
        [
            model_option("folder of the series: new, empty, or a previous run's", role="new"),
            STEPS,
            SEED,
            threads_option(),
        ],
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.tiny import pretrain_tiny

    result = pretrain_tiny(args.model, steps=args.steps, seed=args.seed, threads=args.threads)
    if not result.trained:
        print(f"{args.model}: all {len(result.checkpoints)} checkpoints already there, nothing to do")
        return 0
    last = result.checkpoints[-1]
    print(
        f"{args.model}: {len(result.checkpoints)} checkpoints, last {last.name} "
        f"(loss {last.loss:.3f}) in {result.seconds:.0f} s"
    )
    return 0
