"""The paper authors' published artefacts, bundled as data (data/README.md): their frozen thresholds
(`authors_thresholds.json`, their `thresholds.json`: per task, model and function, the 7 thresholds at the
quantiles 0, 5, ..., 30 %) and the seed leaderboard (`seed_leaderboard.json`).

Their function names -> ours is one table, `AUTHORS_NAMES`, in the order their code defines the classes; their
Table 2 aggregate ranks another list, `AGGREGATE_ORDER` (their plotting notebook's, without fhon/fhon_ln). The
random baseline's thresholds are the probabilities themselves.
"""

from __future__ import annotations

import json
from functools import cache

from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.evaluation.request import DEFAULT_QUANTILES, ThresholdSource
from dormant_tasks.paths import bundled_file

# Their class names (monkey_patch_head_types.py at commit 9dd884c, the `name` each class registers) -> our ids,
# in the order the classes are defined there.
AUTHORS_NAMES: dict[str, str] = {
    "Random": "random",
    "Dormant": "awft",
    "NormalizedDormant": "awft_ln",
    "UnnormalizedHONOR": "ahon",
    "HONOR": "ahon_ln",
    "FullHeadOutput": "fhon",
    "FullHeadOutputNormalized": "fhon_ln",
    "Entropy": "aeqd",
    "NormalizedEntropy": "aeqd_ln",
    "ValueVectorMagnitudeFirstToken": "ftvvn",
    "ValueVectorMagnitudeNormalizedFirstToken": "ftvvn_ln",
    "ValueVectorAvgMagnitude": "avvn",
    "ValueVectorAvgNormalizedMagnitude": "avvn_ln",
    "HeadOutputMagnitudeLastToken": "lthon",
    "HeadOutputMagnitudeNormalizedLastToken": "lthon_ln",
    "HeadOutputMagnitudeNormalizedHeadLastToken": "lthon_hn",
}
OUR_NAMES: dict[str, str] = {ours: theirs for theirs, ours in AUTHORS_NAMES.items()}
# The candidates of their aggregate and its order among ties (the first of equal values wins): the function list
# of their notebook (plot-accuracy-vs-percent-of-heads-zeroed.ipynb at commit 9151a64, `head_type_classname_order`
# and its label table, both in this order). Their thresholds.json lists the same 13 non-random functions in the
# order their recording script ran them (HONOR second), with FullHeadOutput added for some mmlu models only: that
# is the order of a run, not of the table, and the notebook plots and aggregates without FullHeadOutput.
AGGREGATE_ORDER: tuple[str, ...] = (
    *("random", "awft", "awft_ln", "aeqd", "aeqd_ln", "ftvvn", "ftvvn_ln", "avvn", "avvn_ln"),
    *("lthon", "lthon_ln", "lthon_hn", "ahon", "ahon_ln"),
)
THRESHOLDS_FILE = "authors_thresholds.json"
SEED_FILE = "seed_leaderboard.json"


class ThresholdError(ConfigError):
    """The authors' thresholds asked for where they have none."""


@cache
def authors_thresholds() -> dict:
    """{task: {model key: {their function name: [7 thresholds]}}}, as published."""
    return json.loads(bundled_file(THRESHOLDS_FILE).read_text(encoding="utf-8"))


def authors_key(model_id: str) -> str:
    """Their file's model key: the Hub id with "/" written "_"."""
    return str(model_id).replace("/", "_")


def _covered(model_id: str, task: str, fn: str) -> list[float] | None:
    if fn == "random":  # their random baseline zeroes each head with probability p = the quantile itself
        return list(DEFAULT_QUANTILES) if task in authors_thresholds() else None
    by_model = authors_thresholds().get(task, {}).get(authors_key(model_id), {})
    values = by_model.get(OUR_NAMES.get(fn, ""))
    return [float(v) for v in values] if values is not None else None


def authors_taus(model_id: str, tasks, score_fns, quantiles, source: ThresholdSource | str) -> dict:
    """{task: {fn: 7 thresholds}} of the authors for every (task, fn) they cover. `authors`: ThresholdError
    naming the first (model, task, function) they do not cover; `auto`: the uncovered ones are left out (our
    own quantiles place them); `own`: {}."""
    source = ThresholdSource(source)
    if source is ThresholdSource.OWN:
        return {}
    if tuple(float(q) for q in quantiles) != DEFAULT_QUANTILES:
        raise ThresholdError(
            "the authors' thresholds exist at the quantiles 0, .05, ..., .30 only; drop --quantiles or use --thresholds own"
        )
    table = authors_thresholds()
    out: dict[str, dict[str, list[float]]] = {}
    for task in tasks:
        for fn in score_fns:
            taus = _covered(model_id, task, fn)
            if taus is not None:
                out.setdefault(task, {})[fn] = taus
            elif source is ThresholdSource.AUTHORS:
                raise ThresholdError(_uncovered(model_id, task, fn, table))
    return out


def _uncovered(model_id: str, task: str, fn: str, table: dict) -> str:
    fix = "use --thresholds auto (theirs where they exist, else ours) or --thresholds own"
    if task not in table:
        return f"--thresholds authors: the authors' thresholds cover the tasks {', '.join(table)}, not {task!r}; {fix}"
    models = [m.replace("_", "/", 1) for m in table[task]]
    if authors_key(model_id) not in table[task]:
        return (
            f"--thresholds authors: the authors' thresholds cover 14 models, not {model_id!r}"
            f"{did_you_mean(str(model_id), models)}; {fix}"
        )
    return f"--thresholds authors: the authors recorded no thresholds of {fn} (their {OUR_NAMES.get(fn, '?')}); {fix}"


@cache
def seed_leaderboard() -> dict:
    return json.loads(bundled_file(SEED_FILE).read_text(encoding="utf-8"))


def seed_values() -> dict[tuple[str, str], float]:
    """(model, fn) -> the published value: fn is one of our ids for a row labelled with its function, "ours" for
    their aggregate (the best non-AWFT function; its label may name another), "awft" for AWFT's own row; model
    "Average" holds the averages over the 14 models."""
    out = {}
    for row in seed_leaderboard()["rows"]:
        fn = row["score_fn"]
        if fn.startswith("ours"):
            fn = "ours"
        out[(row["model"], fn)] = float(row["value"])
    models = {m for m, _ in out if m != "Average"}
    for model in models:  # a model's 'Ours' row is labelled with its best non-AWFT function
        fns = [fn for m, fn in out if m == model and fn not in ("awft", "ours")]
        if (model, "ours") not in out and len(fns) == 1:
            out[(model, "ours")] = out[(model, fns[0])]
    return out
