"""`dormant status`: one line per model series of a store (checkpoints, steps, % dormant, transitions)."""

from __future__ import annotations

import numpy as np

from dormant_tasks.errors import StoreError
from dormant_tasks.store import DEFAULT_STORE, list_models, open_store, read_table
from dormant_tasks.transitions import series_order, series_states

# The v1 "dormant head" rule, the function the status line summarises.
MAIN_FN = "ahon_ln"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("status", help="summarise the model series stored in a Parquet store")
    p.add_argument("--store", default=str(DEFAULT_STORE), help="store folder (default: %(default)s)")
    p.set_defaults(func=run)


def series_line(store, model_id: str) -> str:
    # Only the series' current taus (a --retau leaves the older results in the store, keyed by their taus_id).
    taus = read_table(store, "taus", model_id=model_id).to_pylist()
    current = {"taus_id": taus[0]["taus_id"]} if taus else None
    tau_of = {t["score_fn"]: t["tau"] for t in taus}
    ckpts = read_table(store, "checkpoints", model_id=model_id, filters=current)
    parts = [f"{ckpts.num_rows} checkpoint{'s' if ckpts.num_rows != 1 else ''}"]
    if ckpts.num_rows:
        col = {c: ckpts.column(c).to_numpy(zero_copy_only=False) for c in ("stage", "step", "tokens", "revision")}
        ingredient = np.array([i or 0 for i in ckpts.column("ingredient").to_pylist()])
        order = series_order(col["stage"], ingredient, col["step"], col["tokens"], col["revision"])
        parts.append(f"steps {col['step'][order[0]]}..{col['step'][order[-1]]}")
    scores = read_table(store, "head_scores", model_id=model_id, filters={"score_fn": MAIN_FN, **(current or {})})
    states = next(series_states(scores, ckpts), None)
    if states is not None:
        first, last = 100 * states.dormant[0].mean(), 100 * states.dormant[-1].mean()
        parts.append(f"{MAIN_FN} dormant {first:.1f}% -> {last:.1f}%")
    transitions = [r["score_fn"] for r in read_table(store, "transitions", model_id=model_id).to_pylist()
                   if not tau_of or tau_of.get(r["score_fn"]) == r["tau"]]
    parts.append(f"transitions {sum(f == MAIN_FN for f in transitions)} {MAIN_FN} / {len(transitions)} total")
    return f"{model_id}: " + ", ".join(parts)


def run(args) -> int:
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
