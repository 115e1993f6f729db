"""A tour of the Python API (docs/USAGE.md, "Python API"): the answers of a tracked store as pandas DataFrames.

    python docs/examples/api_tour.py [STORE [SERIES]]      # default: data/store and its first series

Run it after `make demo` (which tracks `tiny-olmo2` into data/store); the tests run it on a small store.
"""

import sys

import dormant_tasks

store = dormant_tasks.open_store(sys.argv[1] if len(sys.argv) > 1 else "data/store")
print("series in the store:", store.series())
s = store[sys.argv[2] if len(sys.argv) > 2 else store.series()[0]]
print(f"{s.model_id} on calibration set {s.calibration_id}: {len(s.revisions)} checkpoints, functions {s.score_fns}")
print(s.taus().to_string(index=False))

# Which heads are dormant where: one row per checkpoint, one column per (layer, head).
fn = "ahon_ln" if "ahon_ln" in s.score_fns else s.score_fns[0]
masks = s.masks(fn)
print(f"\n% of heads dormant under {fn}, per checkpoint:")
print((100 * masks.mean(axis=1)).round(1).to_string())

# Which heads fell dormant first, per layer (from the long head_scores table).
scores = s.scores(fn)
first = (
    scores[scores["dormant"]]
    .merge(s.checkpoints()[["revision", "tokens"]], on=["revision", "tokens"])
    .sort_values("tokens")
    .groupby("layer")
    .first()[["head_index", "revision"]]
)
print("\nthe first head to fall dormant, per layer:")
print(first.to_string())

transitions = s.transitions(fn)
print(
    f"\n{len(transitions)} transitions, {int(transitions['confident'].fillna(False).sum())} confident, "
    f"{int(transitions['blip'].sum())} blips"
)
print("\nfindings:")
findings = s.findings(fn)  # every quantity; those with a label are the headline numbers
print(findings[findings["label"].notna()][["label", "value", "low", "high"]].to_string(index=False))
evaluations = s.evaluations()
print(f"\n{len(evaluations)} evaluation rows")
if len(evaluations):
    print(evaluations.groupby(["task", "score_fn"])["accuracy"].min().to_string())
