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

from .options import (
    add_device_argument,
    add_dtype_argument,
    add_model_argument,
    add_scores_argument,
    add_store_argument,
    add_tasks_argument,
)
from .preflight import print_hub_note


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="zero marked heads, re-score lm-eval tasks, leaderboard metric",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_argument(
        parser,
        "checkpoint folder or Hub repo id (with --series: the tracked repo, series folder or stored series name; "
        "required, unless --reproduce-seed)",
        required=False,
        role="checkpoint",
    )
    parser.add_argument("--revision", metavar="REV", help="Hub revision (branch) of --model")
    add_tasks_argument(
        parser, "lm-eval tasks, groups and tags, space- or comma-separated (default: winogrande)", default=None
    )
    parser.add_argument(
        "--shots",
        type=int,
        metavar="N",
        help="few-shot examples for every task (default: the authors' count, 5 for winogrande/gsm8k and every task "
        "of the mmlu group, 0 for piqa; lm-eval's task default otherwise)",
    )
    parser.add_argument(
        "--chat-template",
        choices=["auto", "on", "off"],
        default="auto",
        help="apply the tokenizer's chat template (auto: when the model id contains -Instruct, -chat, -SFT or "
        "-DPO, the authors' rule) (default: %(default)s)",
    )
    parser.add_argument(
        "--bos",
        choices=["paper", "tokenizer"],
        default="paper",
        help="paper: no BOS added, as lm-eval 0.4.5 encoded requests; tokenizer: as the tokenizer adds it "
        "(lm-eval 0.4.13) (default: %(default)s)",
    )
    parser.add_argument(
        "--rendering",
        choices=["paper", "lm-eval"],
        default="paper",
        help="how chat-templated prompts are rendered: paper, as lm-eval 0.4.5 (the authors') did (target delimiter "
        "kept, WinoGrande's option after the assistant header); lm-eval, as the installed lm-eval 0.4.13 does "
        "(default: %(default)s; without a chat template both are the same)",
    )
    parser.add_argument(
        "--system-instruction",
        metavar="TEXT",
        help="a system instruction before every prompt (a system turn under a chat template)",
    )
    parser.add_argument(
        "--chat-date",
        type=_chat_date,
        metavar="YYYY-MM-DD",
        help="the day a chat template sees as today (Llama-3.x writes it into the system header; recorded per row as "
        "chat_date); fix it to get the same prompts on another day (default: the day the run starts)",
    )
    parser.add_argument(
        "--precision",
        choices=["dtype", "paper"],
        default="dtype",
        help="dtype: load in --dtype; paper: as the authors, OLMo-2 ids in float16 with 8-bit weights "
        "(needs bitsandbytes: pip install 'dormant-heads[int8]'), others in the checkpoint's own dtype "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--thresholds",
        choices=["own", "authors", "auto"],
        default="own",
        help="own: quantiles of this run's un-intervened scores; authors: the authors' frozen thresholds.json "
        "(their 14 models; mmlu, piqa, winogrande); auto: theirs where they cover the model, task and function, "
        "else own (default: %(default)s)",
    )
    parser.add_argument(
        "--datasets",
        choices=["auto", "hub", "bundled"],
        default="auto",
        help="task data from the Hub or the bundled copies (auto: bundled when HF_DATASETS_OFFLINE or "
        "HF_HUB_OFFLINE is set) (default: %(default)s)",
    )
    parser.add_argument(
        "--log-samples",
        action="store_true",
        help="store one evaluation_items row per item and setting (prediction, correct, log-likelihoods)",
    )
    add_scores_argument(
        parser, "score functions, space- or comma-separated (default: ahon_ln lthon_ln awft)", default=None
    )
    parser.add_argument(
        "--mode",
        choices=["dynamic", "static"],
        help="dynamic: the paper's per-input zeroing; static: the tracker's mask "
        "(default: dynamic, static with --series)",
    )
    parser.add_argument(
        "--series", action="store_true", help="evaluate the static tracker mask of every stored checkpoint of --model"
    )
    parser.add_argument(
        "--quantiles",
        type=float,
        nargs="+",
        metavar="Q",
        help="dynamic thresholds as quantiles of the un-intervened scores (default: 0 .05 ... .30)",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="first N items of every task (default: all)")
    add_store_argument(parser, use="writes")
    parser.add_argument(
        "--batch-size", type=int, default=16, metavar="N", help="items per forward pass (default: %(default)s)"
    )
    add_dtype_argument(parser)
    add_device_argument(parser, "run")
    parser.add_argument(
        "--reproduce-seed",
        action="store_true",
        help="evaluate the seed leaderboard's 14 models on WinoGrande under the paper protocol (the authors' "
        "thresholds, precision and rendering), one run per (model, function); runs already stored are skipped, "
        "so an interrupted reproduction resumes (needs the Hub and a GPU; see docs/LEADERBOARD.md)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="with --reproduce-seed: list the runs (done or to do) and their forward tokens; load no model",
    )
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


def _chat_date(value: str) -> str:
    """`--chat-date` checked as it is parsed, before the other checks (one line naming it when it is no day)."""
    from dormant_tasks.evaluation import parse_chat_date

    return parse_chat_date(value).isoformat()
