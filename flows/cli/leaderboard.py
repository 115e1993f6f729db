"""`dormant leaderboard`: the leaderboard across models, from the store's evaluations (no model is loaded).

One row per (score function, model, task): the % of heads zeroed within 1 point of the newest dynamic sweep,
its normalised AUC and the base accuracy, in %; with the across-task `average` of each model, the `Average`
over models and each model's `best` function. Each model is shown at `main` when it was evaluated, else at
its latest evaluated checkpoint in training order (`--revision` picks one for all). The table goes to
stdout; notes (a model at another revision, a protocol left out) go to stderr. A value whose run stored its
items (`dormant evaluate --log-samples`) gets a 95% interval from a paired bootstrap over the items
(`--resamples`, `--seed`); `--select-on even` chooses the best function on the even half of the items and
reports it on the odd half (halves by cluster: WinoGrande's twins together, other tasks' items by doc_id). `docs/SCORES.md` §6 defines the metric; `dormant_tasks/evaluation/leaderboard.py` every rule.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dormant_tasks.grammar import model_option, store_option, tasks_option
from dormant_tasks.options import Option

# The choices of `dormant_tasks.evaluation.leaderboard_table.LEADERBOARD_FORMATS` (importing it here would load
from dormant_tasks.statistics import resampling_options

from .options import add_options

# pyarrow into --help).
FORMATS = ["markdown", "csv", "latex"]
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
SELECT_ON = ["even", "odd"]  # dormant_tasks.evaluation.intervals.HALVES
_NO_DATE = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}  # the same figure, the same file


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="the leaderboard across models from the stored evaluations",
        description=__doc__.split("\n\n")[0],
    )
    add_options(
        p,
        [
            store_option(),
            model_option(
                "only these series: Hub ids, folders or names, space- or comma-separated (default: every swept model)",
                required=False,
                many=True,
                role="series",
            ),
            tasks_option("only these tasks, space- or comma-separated (default: every swept task)"),
            Option(
                "--revision",
                "compare every model at this revision (default: main when evaluated, else each model's latest "
                "evaluated checkpoint in training order)",
                kw={"metavar": "REV"},
            ),
            Option("--format", "table format (default: %(default)s)", kw={"default": "markdown", "choices": FORMATS}),
            *resampling_options(
                "bootstrap resamples of the items for each value's 95%% interval, where its run stored its items "
                "(evaluate --log-samples); 0: no intervals",
                low=0,
            ),
            Option(
                "--select-on",
                "choose the best function ('ours', 'best of all functions') on this half of the items (even or odd "
                "clusters: WinoGrande's twin pairs kept together, any other task's items by doc_id) and report its "
                "value on the other half (default: chosen and reported on the same items, as the authors did); needs "
                "the stored items",
                kw={"choices": SELECT_ON, "metavar": "HALF"},
            ),
            Option(
                "--reproduction",
                "instead of the table: the seed leaderboard's published WinoGrande values beside ours, per (model, "
                "function) cell it has, with the difference in points and the rendering each of ours used",
                kw={"action": "store_true"},
            ),
            Option(
                "--figure",
                "also draw how models agree on the ranking of the functions (Spearman correlation of their AUCs) to "
                "PATH (.png, .svg or .pdf); needs 2 models or more",
                kw={"metavar": "PATH"},
            ),
        ],
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError

    figure = Path(args.figure) if args.figure else None
    if figure is not None and figure.suffix.lower() not in FIGURE_SUFFIXES:
        raise ConfigError(f"--figure {args.figure}: name a .png, .svg or .pdf file")

    from dormant_tasks.evaluation import (
        ItemResampling,
        agreement_task,
        auc_agreement,
        format_leaderboard_table,
        load_leaderboard,
    )

    board = load_leaderboard(
        args.store,
        models=args.model,
        tasks=args.tasks,
        revision=args.revision,
        resampling=ItemResampling(args.resamples, args.seed) if args.resamples else None,
        select_on=args.select_on,
    )
    if args.reproduction:
        if figure is not None or args.format != "markdown":
            raise ConfigError("--reproduction prints its own markdown table: drop --figure and --format")
        from dormant_tasks.evaluation import format_seed_comparison, seed_comparison

        print(format_seed_comparison(seed_comparison(board.rows), board.selection, board.interval), flush=True)
        for note in board.notes:
            print(f"note: {note}", file=sys.stderr)
        return 0
    if figure is not None:  # checked before anything is printed
        if len(board.revisions) < 2:
            raise ConfigError(
                f"--figure draws how models agree and needs 2 models or more; the board has "
                f"{len(board.revisions)} ({', '.join(board.revisions)})"
            )
        task = agreement_task(board.rows)
        models, rho = auc_agreement(board.rows, task)
    if figure is not None:
        _save(figure, models, rho, task)
    try:
        print(format_leaderboard_table(board.rows, args.format), flush=True)
    except BrokenPipeError:  # `dormant leaderboard | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for note in (*board.notes, board.selection):
        print(f"note: {note}", file=sys.stderr)
    for warning in board.warnings:  # the values marked (!) above
        print(f"warning (!): {warning}", file=sys.stderr)
    if figure is not None:
        print(f"figure: {figure}", file=sys.stderr)
    return 0


def _save(path: Path, models, rho, task: str) -> None:
    from dormant_tasks.atomic import atomic_file
    from dormant_tasks.evaluation import AVERAGE_TASK
    from dormant_tasks.reporting import DPI, draw_auc_agreement

    fig = draw_auc_agreement(rho, models, "the average across tasks" if task == AVERAGE_TASK else task)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:  # a reader sees no figure or a whole one
        fmt = path.suffix.lower().lstrip(".")
        fig.savefig(f, format=fmt, dpi=DPI, metadata=_NO_DATE.get(fmt))
