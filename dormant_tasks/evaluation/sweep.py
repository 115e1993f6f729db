"""Interventions (docs/SCORES.md §6) on any lm-evaluation-harness task: accuracy with heads zeroed, the threshold
sweep, the leaderboard metric per task and averaged across tasks.

lm-eval builds each task's requests once (`prepare`); every setting (the base run, each (function, threshold), a
static mask) answers them through `DormantLM` with its zeroing, and lm-eval's own filters, `process_results` and
aggregations give the task's accuracy. The base run's per-input scores place the thresholds. Rows are the store's
`evaluations` / `evaluation_items` rows less the checkpoint columns (fractions there, % in the summaries).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

import numpy as np

from dormant_tasks.engine import DynamicZeroing, StaticZeroing, get_score_function, parse_score_functions
from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation.lm_tasks import LoadedTasks, TaskSpec, load_tasks, wants_chat_template
from dormant_tasks.evaluation.metric import (
    AVERAGE_TASK,
    WITHIN_POINTS,
    mark_warnings,
    normalised_auc,
    pct_zeroed_within_1pt,
    task_average_curve,
)
from dormant_tasks.evaluation.rendering import chat_text
from dormant_tasks.evaluation.request import DEFAULT_QUANTILES, EvalRequest, Rendering, parse_chat_date
from dormant_tasks.progress import progress_bar
from dormant_tasks.tracking import pooled_threshold

if TYPE_CHECKING:
    from dormant_tasks.evaluation.model import DormantLM, PassRecord


def check_tau(score_fn: str, tau: float) -> float:
    """`tau` as a float if it is a usable threshold for `score_fn`, else EvaluationError."""
    upper = get_score_function(score_fn).at_most  # the registry's range of its scores: [0, 1] or >= 0
    tau = float(tau)
    if not (0.0 <= tau <= upper) or math.isnan(tau):
        allowed = "[0, 1]" if upper == 1.0 else ">= 0"
        raise EvaluationError(
            f"tau {tau} is outside the range of {score_fn} ({allowed}); pick a threshold in that range"
        )
    return tau


def item_step_pct(n_items: int) -> float:
    """Accuracy points that one item moves: 100 / n. Differences smaller than this cannot be measured."""
    return 100.0 / n_items


def item_step_note(n_items: int) -> str:
    """The line shown beside every leaderboard: the accuracy step of one item, flagged when it is as large as
    the metric's 1-point tolerance (then a single answer decides whether a point lies within 1 point)."""
    step = item_step_pct(n_items)
    line = f"one item = {step:.2f} accuracy points ({n_items} items)"
    if step >= WITHIN_POINTS:
        line += (
            f", >= the metric's {WITHIN_POINTS:g}-point tolerance: one answer can decide "
            f"'% zeroed within {WITHIN_POINTS:g} pt'; evaluate more items (--limit)"
        )
    return line


def protocol_line(row: dict) -> str:
    """How a task was evaluated, in one line (printed and shown in reports)."""
    chat = chat_text(row["chat_template"], row.get("rendering"))
    if row["chat_template"] and row.get("chat_date"):
        chat += f" on {row['chat_date']}"
    parts = [
        f"{row['shots']}-shot",
        row["metric"],
        chat,
        f"BOS rule {row['bos']}",
        f"data {row['data_source']}",
    ]
    if row["shots"] and row.get("fewshot_split"):
        parts.append(f"shots from {row['fewshot_split']}")
    if row.get("precision") and row["precision"] != "float32":  # the defaults are left unsaid, as before
        parts.append(f"precision {row['precision']}")
    if row.get("threshold_source") and row["threshold_source"] != "own":
        parts.append(f"thresholds {row['threshold_source']}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------------
# Tasks prepared once: lm-eval's requests, the protocol


@dataclass(frozen=True)
class Protocol:
    """How the requests were made (recorded in every `evaluations` row)."""

    chat_template: bool
    bos: str
    data_source: str
    lm_eval_version: str
    rendering: str  # `Rendering`: whose chat rendering (lm-eval 0.4.5's "paper" or the installed "lm-eval")
    chat_date: date | None = None  # the day the chat template saw (None: no chat template)


@dataclass
class Prepared:
    lm: DormantLM
    loaded: LoadedTasks
    protocol: Protocol
    limit: int | None
    instances: dict[str, list]  # leaf task -> its lm-eval Instances (built once)
    limits: dict[str, int | None]  # leaf task -> lm-eval's sample size
    chance: dict[str, float | None]  # requested task -> mean 1 / choices (None: generation)
    n_items: dict[str, int]  # requested task -> items scored

    @property
    def specs(self) -> tuple[TaskSpec, ...]:
        return self.loaded.specs

    @property
    def notes(self) -> tuple[str, ...]:
        return self.loaded.notes

    def fewshot_split(self, spec: TaskSpec) -> str | None:
        splits = {self.loaded.fewshot_split[leaf] for leaf in spec.leaves}
        return splits.pop() if len(splits) == 1 else ",".join(sorted(s or "none" for s in splits))


def prepare(model, tokenizer, request: EvalRequest, model_id: str | None = None) -> Prepared:
    """Load the request's lm-eval tasks and build their requests once, under its protocol (`build_requests`), the
    chat template seeing the request's `chat_date` (default today, fixed for the whole run). `model_id`: the evaluated
    model's id, which decides the chat template under `--chat-template auto` (default: `request.model`)."""
    import lm_eval

    from dormant_tasks.evaluation.model import DormantLM

    chat = wants_chat_template(request.model if model_id is None else model_id, request.chat_template, tokenizer)
    loaded = load_tasks(request.tasks, shots=request.shots, data_source=request.datasets)
    chat_date = parse_chat_date(request.chat_date) if request.chat_date else date.today()
    lm = DormantLM(
        model,
        tokenizer,
        bos=request.bos,
        batch_size=request.batch_size,
        score_fns=request.score_fns,
        chat_date=chat_date,
    )
    instances, limits = build_requests(
        loaded, tokenizer, chat, request.rendering, request.system_instruction, request.limit, chat_date
    )
    chance, n_items = _items_and_chance(loaded, instances)
    protocol = Protocol(
        chat,
        str(request.bos),
        str(loaded.data_source),
        lm_eval.__version__,
        str(request.rendering),
        chat_date if chat else None,
    )
    return Prepared(lm, loaded, protocol, request.limit, instances, limits, chance, n_items)


def _items_and_chance(loaded: LoadedTasks, instances: dict) -> tuple[dict[str, float | None], dict[str, int]]:
    """Per task: the accuracy of a random guess (the mean over its items of 1 / choices; None for a generation
    task) and its number of items."""
    chance: dict[str, float | None] = {}
    n_items: dict[str, int] = {}
    for spec in loaded.specs:
        docs = {(leaf, inst.doc_id) for leaf in spec.leaves for inst in instances[leaf]}
        n_items[spec.name] = len(docs)
        if spec.output_type == "multiple_choice":
            per_doc: defaultdict[tuple, int] = defaultdict(int)
            for leaf in spec.leaves:
                for inst in instances[leaf]:
                    per_doc[(leaf, inst.doc_id)] += 1
            chance[spec.name] = float(np.mean([1.0 / n for n in per_doc.values()]))
        else:
            chance[spec.name] = None
    return chance, n_items


def build_requests(
    loaded: LoadedTasks, tokenizer, chat: bool, rendering, system_instruction, limit, chat_date: date | None = None
):
    """({leaf: its lm-eval Instances}, {leaf: sample size}), built once: under a chat template with `Rendering.PAPER` as
    lm-eval 0.4.5 rendered them (`rendering.build_paper_chat_requests`), else by lm-eval itself."""
    from dormant_tasks.evaluation import lmeval_adapter
    from dormant_tasks.evaluation.model import render_chat
    from dormant_tasks.evaluation.rendering import build_paper_chat_requests

    def template(history, add_generation_prompt=True):
        return render_chat(tokenizer, history, add_generation_prompt, chat_date)

    instances, limits = {}, {}
    for leaf, task in loaded.tasks.items():
        limits[leaf] = lmeval_adapter.sample_size(task, limit)
        if chat and Rendering(rendering) is Rendering.PAPER:
            built = build_paper_chat_requests(task, template, limit=limits[leaf], system_instruction=system_instruction)
            lmeval_adapter.set_instances(task, built)
        else:
            task.build_all_requests(
                limit=limits[leaf],
                rank=0,
                world_size=1,
                system_instruction=system_instruction,
                apply_chat_template=chat,
                fewshot_as_multiturn=chat,
                chat_template=template if chat else None,
                tokenizer_name=tokenizer.name_or_path.replace("/", "__") if chat else "",
            )
        if not task.instances:
            raise EvaluationError(f"task {leaf} has no items to evaluate; check --limit and the task's split")
        instances[leaf] = list(task.instances)
    return instances, limits


# ---------------------------------------------------------------------------------------------------
# One setting: every request of a task answered with one zeroing


@dataclass
class SettingResult:
    accuracy: float  # fraction in [0, 1]: lm-eval's value of the task's metric
    frac_zeroed: float  # heads zeroed over the forward rows run
    n_items: int
    record: PassRecord
    items: list[dict]  # evaluation_items rows (with log_samples), less the setting and checkpoint columns


def run_setting(prepared: Prepared, spec: TaskSpec, zeroing, keep_scores: bool = False, log_samples: bool = False):
    """Answer every request of `spec` with `zeroing` applied; lm-eval scores the answers."""
    from dormant_tasks.evaluation import lmeval_adapter

    lm = prepared.lm
    lm.zeroing = zeroing
    record = lm.start_record(keep_scores)
    by_type = defaultdict(list)
    for leaf in spec.leaves:
        for inst in prepared.instances[leaf]:
            lmeval_adapter.clear_responses(inst)
            by_type[inst.request_type].extend([inst] * (inst.repeats or 1))
    for reqtype, reqs in by_type.items():
        if reqtype not in ("loglikelihood", "generate_until"):
            raise EvaluationError(f"{spec.name} asks for {reqtype} requests; pick a multiple-choice or generation task")
        for inst, resp in zip(reqs, getattr(lm, reqtype)(reqs, disable_tqdm=True)):
            lmeval_adapter.add_response(inst, resp)
    accs = {}
    items = []
    metric_name, primary_filter = spec.metric.split(",", 1)
    for leaf in spec.leaves:
        task = prepared.loaded.tasks[leaf]
        task.apply_filters()
        by_doc = defaultdict(list)
        for inst in prepared.instances[leaf]:
            by_doc[inst.doc_id].append(inst)
        for insts in by_doc.values():
            insts.sort(key=lambda x: x.idx)
        raw = defaultdict(list)
        for filter_key in prepared.instances[leaf][0].filtered_resps:
            for doc_id, doc in task.doc_iterator(rank=0, limit=prepared.limits[leaf], world_size=1):
                insts = by_doc[doc_id]
                metrics = task.process_results(doc, [r.filtered_resps[filter_key] for r in insts])
                for metric, value in metrics.items():
                    raw[(metric, filter_key)].append(value)
                if log_samples and filter_key == primary_filter:
                    items.append(_item(task, leaf, doc_id, doc, insts, filter_key, metrics, metric_name))
        accs[leaf] = {"task": task, "raw_metrics": raw, "logged_samples": []}
    groups = {
        g: prepared.loaded.groups[g] for g in prepared.loaded.groups if g == spec.name or _within(prepared, g, spec)
    }
    res = lmeval_adapter.aggregate(accs, groups)
    try:
        value = float(res.metrics[spec.name][spec.metric])
    except KeyError:
        raise EvaluationError(
            f"lm-eval reported no {spec.metric} for {spec.name}; its metrics: "
            f"{', '.join(k for k in res.metrics.get(spec.name, {}) if ',' in k)}"
        ) from None
    return SettingResult(value, record.frac_zeroed, prepared.n_items[spec.name], record, items)


def _within(prepared: Prepared, group: str, spec: TaskSpec) -> bool:
    """Is `group` a subgroup of the requested group `spec` (all of its leaves are spec's)?"""
    leaves = [t.task_name for t in prepared.loaded.groups[group].get_all_tasks()]
    return spec.is_group and bool(leaves) and set(leaves) <= set(spec.leaves)


def _item(task, leaf: str, doc_id: int, doc, insts, filter_key: str, metrics: dict, metric_name: str) -> dict:
    resps = [r.filtered_resps[filter_key] for r in insts]
    correct = bool(metrics.get(metric_name, 0.0) == 1.0) if metric_name in metrics else False
    if insts[0].request_type == "loglikelihood":
        lls = [float(r[0]) for r in resps]
        # the gold option's index, found as lm-eval's multiple-choice process_results finds it
        gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
        if isinstance(gold, str):
            choices = task.doc_to_choice(doc)
            gold = choices.index(gold) if gold in choices else gold
        target = ",".join(map(str, gold)) if isinstance(gold, list) else str(gold)
        return {
            "task": leaf,
            "doc_id": int(doc_id),
            "prediction": str(int(np.argmax(lls))),  # the option of the highest log-likelihood (lm-eval's acc)
            "target": target,
            "correct": correct,
            "loglikelihoods": lls,
            "generated": None,
        }
    raw = insts[0].resps[0] if insts[0].resps else ""
    return {
        "task": leaf,
        "doc_id": int(doc_id),
        "prediction": str(resps[0]),
        "target": str(task.doc_to_target(doc)),
        "correct": correct,
        "loglikelihoods": None,
        "generated": str(raw),
    }


# ---------------------------------------------------------------------------------------------------
# The sweep and the static evaluation


@dataclass(frozen=True)
class FunctionSummary:
    score_fn: str
    points: tuple[tuple[float, float], ...]  # (measured % zeroed, accuracy %) per quantile, in quantile order
    base_accuracy: float  # %
    within_1pt: float  # % of heads zeroed within 1 point of the base accuracy
    auc: float  # normalised AUC of the curve


@dataclass
class SweepResult:
    rows: list[dict]  # `evaluations` rows, one per (task, score_fn, quantile), less the checkpoint columns
    items: list[dict]  # `evaluation_items` rows (log_samples)
    summaries: dict[str, dict[str, FunctionSummary]]  # task (and "average" for >= 2 tasks) -> fn -> summary
    base_accuracy: dict[str, float]  # task -> %
    notes: tuple[str, ...] = field(default_factory=tuple)


def _row(
    prepared: Prepared, spec: TaskSpec, mode, score_fn, quantile, tau, result: SettingResult, base, source=None
) -> dict:
    p = prepared.protocol
    return {
        "task": spec.name,
        "shots": spec.shots,
        "mode": mode,
        "score_fn": score_fn,
        "quantile": quantile,
        "tau": tau,
        "frac_zeroed": result.frac_zeroed,
        "accuracy": result.accuracy,
        "n_items": result.n_items,
        "base_accuracy": base,
        "metric": spec.metric,
        "chat_template": p.chat_template,
        "bos": p.bos,
        "fewshot_split": prepared.fewshot_split(spec) if spec.shots else None,
        "data_source": p.data_source,
        "lm_eval_version": p.lm_eval_version,
        "chance": prepared.chance[spec.name],
        "rendering": p.rendering,
        "threshold_source": source,
        "chat_date": p.chat_date,
    }


def _setting_items(items, spec: TaskSpec, mode, score_fn, quantile, tau) -> list[dict]:
    extra = {"shots": spec.shots, "mode": mode, "score_fn": score_fn, "quantile": quantile, "tau": tau}
    return [{**item, **extra} for item in items]


def run_sweep(
    prepared: Prepared,
    score_fns,
    *,
    quantiles=DEFAULT_QUANTILES,
    log_samples: bool = False,
    progress: bool = True,
    fixed_taus=None,
) -> SweepResult:
    """Per task: one un-intervened run, then one run per (function, quantile) with the threshold at that quantile
    of the base run's per-input scores (">" functions use 1 - q); each point is measured (% zeroed, accuracy).
    `fixed_taus[task][fn]`: one threshold per quantile given instead (the authors', `authors.authors_taus`);
    each row's `threshold_source` says which ("authors" or "own")."""
    fixed_taus = fixed_taus or {}
    fns = tuple(parse_score_functions(score_fns))
    quantiles = tuple(float(q) for q in quantiles)
    if not quantiles or any(not 0.0 <= q <= 1.0 for q in quantiles):
        raise EvaluationError(f"quantiles must be a non-empty list of fractions in [0, 1], got {list(quantiles)}")
    missing = [fn for fn in fns if fn not in prepared.lm.score_fns]
    if missing:
        prepared.lm.score_fns = tuple(dict.fromkeys(prepared.lm.score_fns + fns))
    total = len(prepared.specs) * (1 + len(fns) * len(quantiles))
    bar = progress_bar(total=total, desc="sweep", unit="setting", enabled=progress)
    rows: list[dict] = []
    items: list[dict] = []
    summaries: dict[str, dict[str, FunctionSummary]] = {}
    bases: dict = {}
    try:
        for spec in prepared.specs:
            bar.set_postfix_str(f"{spec.name} base")
            base = run_setting(prepared, spec, None, keep_scores=True, log_samples=log_samples)
            bar.update(1)
            bases[spec.name] = 100.0 * base.accuracy
            items += _setting_items(base.items, spec, "base", None, None, None)
            summaries[spec.name] = {}
            for fn in fns:
                given = fixed_taus.get(spec.name, {}).get(fn)
                taus = _thresholds(spec, fn, quantiles, given, base)
                source = "authors" if given is not None else "own"
                points = []
                for q, tau in zip(quantiles, taus):
                    bar.set_postfix_str(f"{spec.name} {fn} q={q:g}")
                    result = run_setting(prepared, spec, DynamicZeroing(fn, tau), log_samples=log_samples)
                    bar.update(1)
                    rows.append(_row(prepared, spec, "dynamic", fn, q, tau, result, base.accuracy, source))
                    items += _setting_items(result.items, spec, "dynamic", fn, q, tau)
                    points.append((100.0 * result.frac_zeroed, 100.0 * result.accuracy))
                summaries[spec.name][fn] = _summary(fn, tuple(points), bases[spec.name])
            del base
    finally:
        bar.close()
        prepared.lm.zeroing = None
    if len(prepared.specs) > 1:
        summaries[AVERAGE_TASK] = _task_averages(summaries, fns, quantiles)
    mark_warnings(rows)
    return SweepResult(rows, items, summaries, bases, prepared.notes)


def _thresholds(spec: TaskSpec, fn: str, quantiles: tuple[float, ...], given, base: SettingResult) -> list[float]:
    """The threshold of each quantile: the `given` ones (the authors'), else that quantile of the base run's
    per-input scores (">" functions at 1 - q); EvaluationError when none can be placed."""
    if given is not None and len(given) != len(quantiles):
        raise EvaluationError(f"{spec.name} {fn}: {len(given)} fixed thresholds for {len(quantiles)} quantiles")
    if given is not None:
        taus = [float(t) for t in given]
    else:
        direction = get_score_function(fn).direction
        taus = [pooled_threshold(base.record.scores_of(fn), q, direction) for q in quantiles]
    if any(math.isnan(tau) for tau in taus):
        raise EvaluationError(
            f"{fn} gives no finite score on this model (all NaN), so no threshold can be placed; sweep another function"
        )
    return taus


def _summary(fn: str, points: tuple, base: float) -> FunctionSummary:
    return FunctionSummary(fn, points, base, pct_zeroed_within_1pt(points, base), normalised_auc(points))


def _task_averages(
    summaries: dict[str, dict[str, FunctionSummary]], fns: tuple[str, ...], quantiles: tuple[float, ...]
) -> dict[str, FunctionSummary]:
    """Per function: the summary of the across-task average curve (`metric.task_average_curve`)."""
    out = {}
    for fn in fns:
        curves = {t: (quantiles, s[fn].points, s[fn].base_accuracy) for t, s in summaries.items() if fn in s}
        average, average_base = task_average_curve(curves)
        out[fn] = _summary(fn, average, average_base)
    return out


@dataclass
class StaticResult:
    rows: list[dict]
    items: list[dict]
    notes: tuple[str, ...] = field(default_factory=tuple)


def evaluate_static(prepared: Prepared, masks: dict, *, log_samples: bool = False, progress: bool = False):
    """Per task: one un-intervened run, then per function its mask `masks[fn] = (heads, tau)` (a fixed set of
    (layer, head) pairs, e.g. the tracker's dormancy mask) zeroed on every input; one row per (task, function)."""
    masks = {fn: (frozenset((int(layer), int(h)) for layer, h in heads), tau) for fn, (heads, tau) in masks.items()}
    for fn, (_, tau) in masks.items():
        get_score_function(fn)
        if tau is not None:
            check_tau(fn, tau)
    bar = progress_bar(total=len(prepared.specs) * (1 + len(masks)), desc="static", unit="setting", enabled=progress)
    rows, items = [], []
    try:
        for spec in prepared.specs:
            base = run_setting(prepared, spec, None, log_samples=log_samples)
            bar.update(1)
            items += _setting_items(base.items, spec, "base", None, None, None)
            for fn, (heads, tau) in masks.items():
                result = run_setting(prepared, spec, StaticZeroing(heads), log_samples=log_samples)
                bar.update(1)
                rows.append(_row(prepared, spec, "static", fn, None, tau, result, base.accuracy))
                items += _setting_items(result.items, spec, "static", fn, None, tau)
    finally:
        bar.close()
        prepared.lm.zeroing = None
    mark_warnings(rows)
    return StaticResult(rows, items, prepared.notes)
