"""`dormant evaluate`: zero the heads a score function marks, re-score lm-eval tasks, print the leaderboard metric.

Dynamic mode (the paper's protocol): per task, thresholds at the 0-30% quantiles of each function's per-input
scores; in every layer the heads below threshold on an input are zeroed before o_proj. The metric is the
largest % of heads zeroed with accuracy within 1 point of the un-intervened model, per task and averaged
across tasks. Static mode zeroes the tracker's dormancy mask of the checkpoint (from the store); `--series`
does so for every tracked checkpoint.
Tasks are lm-evaluation-harness's (any task, group or tag: --tasks winogrande mmlu hellaswag piqa gsm8k).
The protocol defaults are the paper authors': 5-shot winogrande/mmlu/gsm8k (every task in the mmlu group too, such
as mmlu_anatomy or mmlu_stem), 0-shot piqa (lm-eval's default otherwise), a chat template for -Instruct/-chat/
-SFT/-DPO models rendered as lm-eval 0.4.5 did (--rendering), and lm-eval 0.4.5's BOS rule (no BOS added);
--precision paper and --thresholds authors complete the authors' protocol (docs/USAGE.md, "The paper protocol").
Offline (HF_DATASETS_OFFLINE=1, or --datasets bundled) the datasets bundled with dormant-heads are used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dormant_tasks.options import Option, options_of

from .options import add_options
from .preflight import print_hub_note

# `evaluate`'s own options beside its request's (`EvalRequest`'s fields declare those)
OWN = (
    Option(
        "--reproduce-seed",
        "evaluate the seed leaderboard's 14 models on WinoGrande under the paper protocol (the authors' thresholds, "
        "precision and rendering), one run per (model, function); runs already stored are skipped, so an interrupted "
        "reproduction resumes (needs the Hub and a GPU; see docs/LEADERBOARD.md)",
        kw={"action": "store_true"},
    ),
    Option(
        "--dry-run",
        "with --reproduce-seed: list the runs (done or to do) and their forward tokens; load no model",
        kw={"action": "store_true"},
    ),
)


def add_parser(subparsers) -> None:
    from dormant_tasks.evaluation import EvalRequest

    parser = subparsers.add_parser(
        "evaluate",
        help="zero marked heads, re-score lm-eval tasks, leaderboard metric",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(parser, [*options_of(EvalRequest), *OWN])
    parser.set_defaults(func=run)


def request_from_args(args: argparse.Namespace):
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.evaluation import EvalRequest

    if not args.model:
        raise ConfigError("--model is required: name a checkpoint folder or Hub repo (or use --reproduce-seed)")

    names = EvalRequest.option_names()  # (the parser's others: the command's own, its bookkeeping)
    return EvalRequest.from_options(**{k: v for k, v in vars(args).items() if k in names})


def run(args: argparse.Namespace) -> int:
    check_tasks_quickly(args.tasks or ("winogrande",))  # before the heavy imports, from the cached task index

    if args.reproduce_seed or args.dry_run:
        return _reproduce_seed(args)
    from dormant_tasks.evaluation import format_leaderboard
    from flows.evaluate import evaluate

    # Validate before Prefect starts: a bad option costs nothing and writes nothing; the flow gets the result.
    request = request_from_args(args)
    resolved = _resolve(request)
    print_hub_note(args)
    from flows.session import start_prefect

    start_prefect()
    rows = evaluate(request, resolved)
    for target in resolved.targets:
        print(format_leaderboard(target, [r for r in rows if r["revision"] == target.revision.name]))
    print(f"evaluations written to {request.store}")
    return 0


def _resolve(request):
    """`resolve_targets(request)`, the task index's names cached for the next run's quick check."""
    from dormant_tasks.evaluation import resolve_targets

    try:
        return resolve_targets(request)
    finally:
        _cache_task_index()


# the options a reproduction fixes itself (the paper protocol); giving one is a contradiction
_FIXED_BY_REPRODUCTION = ("model", "revision", "tasks", "shots", "series", "mode", "quantiles", "system_instruction")


def _reproduce_seed(args: argparse.Namespace) -> int:
    """`--reproduce-seed [--dry-run]`: the seed's 14 models x the authors' functions, resumable per run."""
    from dormant_tasks.errors import ConfigError

    if not args.reproduce_seed:
        raise ConfigError("--dry-run lists the runs of --reproduce-seed: add --reproduce-seed")
    given = [name for name in _FIXED_BY_REPRODUCTION if getattr(args, name, None)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(f"--reproduce-seed fixes its models, task and protocol; drop {flag}")
    from dormant_tasks.evaluation import done_runs, forward_tokens, reproduction_requests

    requests = reproduction_requests(
        args.store, limit=args.limit, batch_size=args.batch_size, device=args.device, chat_date=args.chat_date
    )
    done = done_runs(args.store, args.limit)
    pending = [r for r in requests if (r.model, r.score_fns[0]) not in done]
    print_hub_note(args)
    if args.dry_run:
        from dormant_tasks.offline import hub_offline
        from flows.cli.preflight import hub_silence

        # the tokenizers come from the Hub, asked through the one probe (a silent Hub: the cache only, no retries)
        if not hub_offline():
            hub_silence()
        if hub_offline():
            print(
                "dormant evaluate: note: no Hub: forward tokens only for the models whose tokenizer is in the "
                "Hugging Face cache",
                file=sys.stderr,
            )
        _print_plan(requests, done, forward_tokens)
        return 0
    resolved = [_resolve(request) for request in pending]  # before Prefect starts: thresholds, 8-bit weights
    print(f"{len(requests) - len(pending)} of {len(requests)} runs already stored; {len(pending)} to run")
    from flows.evaluate import evaluate
    from flows.session import start_prefect

    start_prefect()
    for i, planned in enumerate(resolved, 1):
        evaluate(planned.request, planned)
        print(f"[{i}/{len(pending)}] {planned.request.model} {planned.request.score_fns[0]}: stored", flush=True)
    print(f"evaluations written to {args.store}; compare: dormant leaderboard --store {args.store} --reproduction")
    return 0


def _print_plan(requests, done, forward_tokens) -> None:
    """One line per (model, function) run, its state and its forward tokens; the total to run."""
    from dormant_tasks.offline import hub_offline

    tokens: dict[str, int | None] = {}
    reasons: dict[str, str] = {}
    for request in requests:
        if request.model in tokens:
            continue
        if hub_offline() and not _tokenizer_cached(request.model):
            tokens[request.model], reasons[request.model] = None, "not cached"  # (without importing transformers)
            continue
        try:
            from transformers import AutoTokenizer

            tokens[request.model] = forward_tokens(
                request, AutoTokenizer.from_pretrained(request.model, trust_remote_code=False)
            )
        except Exception as e:  # noqa: BLE001 - no Hub here, a gated repo ...: the plan still lists the runs
            tokens[request.model] = None
            reasons[request.model] = "not cached" if hub_offline() else type(e).__name__
    print(f"{'model':<36} {'function':<9} {'state':<7} {'forward tokens':>15}")
    todo = 0
    for request in requests:
        fn = request.score_fns[0]
        state = "done" if (request.model, fn) in done else "to run"
        n = tokens[request.model]
        if state == "to run" and n is not None:
            todo += n
        shown = f"{n:,}" if n is not None else f"n/a ({reasons[request.model]})"
        print(f"{request.model:<36} {fn:<9} {state:<7} {shown:>15}")
    n_todo = sum(1 for r in requests if (r.model, r.score_fns[0]) not in done)
    unknown = sorted({m for m, n in tokens.items() if n is None})
    print(
        f"{n_todo} of {len(requests)} runs to do, {todo:,} forward tokens"
        + (f" (without {len(unknown)} model(s) whose tokenizer was not reachable)" if unknown else "")
    )


def _tokenizer_cached(model: str) -> bool:
    """Whether the Hugging Face cache holds the tokenizer of a Hub `model` (huggingface_hub alone, no torch)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(model, "tokenizer_config.json"), str)


def _task_index_file() -> Path:
    """The names of lm-eval's task index (tasks, groups, tags), cached per lm-eval version: building the index
    reads every task YAML (15 s); the cached names answer a mistyped --tasks in milliseconds."""
    from importlib.metadata import version

    from dormant_tasks.checkpoints import cache_dir

    return cache_dir() / f"lm-eval-{version('lm_eval')}-task-names.txt"


def check_tasks_quickly(tasks) -> None:
    """EvaluationError for a task name that the cached index lacks; without a cache, the full check decides."""
    from dormant_tasks.errors import EvaluationError, did_you_mean
    from dormant_tasks.names import split_names

    try:
        known = set(_task_index_file().read_text(encoding="utf-8").split())
    except (OSError, ValueError):
        return
    for name in split_names(tasks):
        if name not in known:  # the message of lm_tasks.check_task_names
            raise EvaluationError(
                f"unknown task {name!r}{did_you_mean(name, known)}; "
                "any lm-evaluation-harness task, group or tag works (`lm-eval ls tasks` lists them)"
            )


def _cache_task_index() -> None:
    from dormant_tasks.atomic import atomic_file
    from dormant_tasks.errors import StoreError
    from dormant_tasks.evaluation import built_task_names

    path, names = _task_index_file(), built_task_names()
    if names is None or path.is_file():
        return  # no index built in this process, or already cached
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            f.write("\n".join(sorted(names)).encode())
    except (OSError, StoreError):  # a cache is a courtesy: a read-only home only makes the next check slower
        pass


def interrupted(args: argparse.Namespace) -> str:
    return "interrupted: the evaluations of finished checkpoints are stored, rerun the rest"
