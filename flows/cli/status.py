"""`dormant status`: one line per model series of a store (checkpoints, steps, % dormant, transitions).

Counts are of the series' current results (`SeriesView`): its current taus and calibration set.
"""

from __future__ import annotations

from .options import add_store_argument

# The v1 "dormant head" rule, the function the status line summarises.
MAIN_FN = "ahon_ln"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "status", help="summarise the model series stored in a Parquet store", description=__doc__.split("\n\n")[0]
    )
    add_store_argument(p)
    p.set_defaults(func=run)


def series_line(store, model_id: str) -> str:
    from dormant_tasks.series import SeriesView
    from dormant_tasks.store import read_table

    if not SeriesView.exists(store, model_id):
        n_eval = read_table(store, "evaluations", model_id=model_id).num_rows
        return f"{model_id}: not tracked ({n_eval} evaluation rows)"
    view = SeriesView.open(store, model_id)
    n = len(view.checkpoints)
    parts = [f"{n} checkpoint{'s' if n != 1 else ''}"]
    if n:
        parts.append(f"steps {view.checkpoints[0]['step']}..{view.checkpoints[-1]['step']}")
    states = next(view.states([MAIN_FN]), None) if MAIN_FN in view.taus and n else None
    if states is not None:
        first, last = 100 * states.dormant[0].mean(), 100 * states.dormant[-1].mean()
        parts.append(f"{MAIN_FN} dormant {first:.1f}% -> {last:.1f}%")
    fns = view.transitions().column("score_fn").to_pylist()
    parts.append(f"transitions {sum(f == MAIN_FN for f in fns)} {MAIN_FN} / {len(fns)} total")
    line = f"{model_id}: " + ", ".join(parts)
    if view.n_stale:
        line += (
            f" ({view.n_stale} more checkpoint{'s' if view.n_stale != 1 else ''} stored under older taus or "
            "calibration: `dormant track --retau` on the whole series brings them in)"
        )
    return line


def run(args) -> int:
    from dormant_tasks.errors import StoreError
    from dormant_tasks.store import list_models, open_store

    open_store(args.store)
    models = list_models(args.store)
    if not models:
        raise StoreError(f"store {args.store!r} holds no model series yet: run `dormant track` first")
    for model_id in models:
        try:
            print(series_line(args.store, model_id))
        except StoreError as e:  # one inconsistent series should not hide the others
            print(f"{model_id}: error: {e}")
    return 0
