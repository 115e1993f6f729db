"""The grammar of `dormant` (docs/USAGE.md, "Command grammar"), table-driven over every command and option, and the bad
inputs a newcomer tries, run through `flows.cli.main` in-process (tests/builders/cli.py: captured output, exit code).

Speed of the cheap checks, measured two ways so that the test holds on a loaded 2-core machine:
- deterministically: every bad input runs, one after another, in one fresh interpreter (`in_one_process`) that
  must not have imported torch, pyarrow, prefect, transformers, huggingface_hub, numpy or matplotlib before it
  answered (the heavy imports are what took 10-60 s);
- by time: the check itself (`main(argv)` in-process, where start-up is already paid) answers in under
  CHECK_S = 2 s, the issue's figure; the checks themselves take milliseconds, so 2 s leaves room for load.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import socket
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from dormant_tasks.devices import Device, parse_device, parse_dtype, visible_gpus
from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.request import EvalRequest
from dormant_tasks.tracking.request import TrackRequest
from flows.cli import build_parser, main
from flows.cli.options import RENAMED, ListOption
from tests.builders.cli import HEAVY, in_one_process, invoke

REPO = Path(__file__).resolve().parents[3]
CHECK_S = 2.0  # the bound for a cheap check, measured in-process


def subcommands(parser=None, path=()):
    """{"track": parser, "store gc": parser, ...} of every (sub)subcommand."""
    parser = parser or build_parser()
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    out.update(subcommands(sub, (*path, name)))
                else:
                    out[" ".join((*path, name))] = sub
    return out


PARSERS = subcommands()

# concept -> (its one option, the commands that take it). Every other command must not have it.
GRAMMAR = {
    "the thing analysed": (
        "--model",
        {
            "track",
            "serve",
            "deploy",
            "checkpoints",
            "evaluate",
            "score",
            "report",
            "findings",
            "compare",
            "publish",
            "store repair",
            "store gc",
            "leaderboard",
            "demo",
            "pretrain-tiny",
            "reproduce",
        },
    ),
    "the store": (
        "--store",
        {
            "track",
            "serve",
            "deploy",
            "checkpoints",
            "evaluate",
            "report",
            "findings",
            "compare",
            "publish",
            "status",
            "store upgrade",
            "store repair",
            "store gc",
            "leaderboard",
            "demo",
            "reproduce",
        },
    ),
    "the report folder": ("--reports-dir", {"track", "serve", "deploy", "demo", "report", "findings", "compare"}),
    "what is written outside the store": ("--out", {"score", "publish"}),
    "lm-eval tasks": ("--tasks", {"evaluate", "leaderboard"}),
    "score functions": (
        "--scores",
        {"track", "serve", "deploy", "evaluate", "score", "report", "findings", "compare", "publish"},
    ),
    "device": ("--device", {"track", "serve", "deploy", "evaluate", "score", "reproduce"}),
    "dtype": ("--dtype", {"track", "serve", "deploy", "evaluate", "score"}),
}
# Names the grammar retired: no parser registers them (they are rewritten, with a note, for one release).
OLD_NAMES = {"--repo", "--task", "--score-fn", "--models"}


def test_the_table_covers_every_command():
    assert set(PARSERS) == set().union(*(commands for _, commands in GRAMMAR.values()))


@pytest.mark.parametrize("concept", GRAMMAR)
def test_one_name_per_concept_in_every_command(concept):
    option, commands = GRAMMAR[concept]
    for command, parser in PARSERS.items():
        has = option in parser._option_string_actions
        assert has == (command in commands), f"`dormant {command}` {'lacks' if not has else 'has'} {option}"


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_no_command_registers_a_retired_name_or_a_second_name_for_a_concept(command):
    options = set(PARSERS[command]._option_string_actions)
    assert not options & OLD_NAMES, f"`dormant {command}` still registers {options & OLD_NAMES}"
    if command != "evaluate":  # evaluate's --series is a mode (every stored checkpoint), not a folder
        assert "--series" not in options
    for old, new in RENAMED.get(command, {}).items():
        assert new in options and old not in options


@pytest.mark.parametrize(
    "option,commands",
    [(option, sorted(commands)) for option, commands in GRAMMAR.values()],
    ids=[option for option, _ in GRAMMAR.values()],
)
def test_the_same_option_is_the_same_definition_everywhere(option, commands):
    """The same action class, type, metavar and default in every command (one definition in options.py)."""
    seen = {}
    for command in commands:
        action = PARSERS[command]._option_string_actions[option]
        if (command, option) in (("leaderboard", "--model"), ("compare", "--model")):  # several series: the list form
            assert isinstance(action, ListOption) and action.metavar == "MODEL"
            continue
        if (command, option) == ("publish", "--out"):  # a folder, where `score` writes a file
            assert action.metavar == "DIR" and action.type is None and action.nargs is None
            continue
        if (command, option) in (("report", "--scores"), ("findings", "--scores")):  # one function: one value
            assert isinstance(action, ListOption) and action.metavar == "FN" and action.nargs is None
            continue
        key = (type(action).__name__, action.type, action.metavar, action.nargs, str(action.default))
        seen.setdefault(key, []).append(command)
    assert len(seen) == 1, f"{option} is defined {len(seen)} ways: {seen}"


def test_an_option_of_several_commands_is_built_in_options_py_only():
    """The commands take a shared option through its builder (`options.add_*_argument`), so that its help and
    checks cannot drift: no other module of the CLI registers it by hand."""
    shared = {option for option, commands in GRAMMAR.values() if len(commands) > 1}
    for path in sorted((REPO / "flows" / "cli").glob("*.py")):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                names = {a.value for a in node.args if isinstance(a, ast.Constant)}
                assert not names & shared, f"flows/cli/{path.name} defines {names & shared} by hand"


def run_main(*argv) -> int:
    """`dormant ARGV` in-process: its exit code (a parse error exits through SystemExit after its one line)."""
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:
        return e.code


def _parse(*argv):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "prefix,option",
    [
        (("evaluate", "--model", "m"), "--tasks"),
        (("leaderboard",), "--tasks"),
        (("track", "--model", "m"), "--scores"),
        (("evaluate", "--model", "m"), "--scores"),
        (("score", "--model", "m", "--out", "o"), "--scores"),
        (("leaderboard",), "--model"),
    ],
)
def test_list_options_take_spaces_commas_and_repeats_alike(prefix, option):
    dest = option.lstrip("-")
    forms = [(option, "a", "b"), (option, "a,b"), (option, "a", option, "b"), (option, "a, b", option, "a")]
    assert {tuple(getattr(_parse(*prefix, *form), dest)) for form in forms} == {("a", "b")}


@pytest.mark.parametrize(
    "command,old,new,value",
    [
        (("track",), "--repo", "--model", "org/x"),
        (("checkpoints",), "--repo", "--model", "org/x"),
        (("demo",), "--series", "--model", "d"),
        (("pretrain-tiny",), "--out", "--model", "d"),
        (("report",), "--out", "--reports-dir", "d"),
        (("report",), "--score-fn", "--scores", "ahon"),
        (("evaluate", "--model", "m"), "--task", "--tasks", "a,b"),
        (("leaderboard",), "--models", "--model", "org/x"),
    ],
)
def test_old_spellings_parse_as_the_new_ones_with_one_note(command, old, new, value, capsys):
    assert _parse(*command, old, value) == _parse(*command, new, value)
    assert _parse(*command, f"{old}={value}") == _parse(*command, new, value)
    err = capsys.readouterr().err.splitlines()
    assert err and all(f"note: {old} is now {new}" in line for line in err)


@pytest.mark.parametrize(
    "argv,debug,verbose",
    [
        (("status",), False, False),
        (("--debug", "status"), True, False),
        (("status", "--debug"), True, False),
        (("--verbose", "store", "gc"), False, True),
        (("store", "--debug", "gc", "--verbose"), True, True),
        (("store", "gc", "--debug"), True, False),
    ],
)
def test_global_flags_go_anywhere_on_the_line(argv, debug, verbose):
    args = _parse(*argv)
    assert (args.debug, args.verbose) == (debug, verbose)


def test_device_and_dtype_forms():
    assert _parse("score", "--model", "m", "--out", "o", "--device", "CUDA:1").device == "cuda:1"
    assert _parse("track", "--model", "m", "--device", "cpu").device is Device.CPU
    assert _parse("track", "--model", "m").device is Device.AUTO
    assert _parse("evaluate", "--model", "m", "--dtype", "bfloat16").dtype == "bfloat16"


# ---- one error class per kind of bad input, whatever the entry point (issue 22) ----


@pytest.mark.parametrize("device", ["mps", "gpu", "cuda:x", "cuda:-1", "cuda1"])
def test_a_bad_device_is_one_config_error_from_the_cli_the_request_and_the_library(device, tmp_path, capsys):
    from dormant_tasks.checkpoints.loading import resolve_device

    for entry in (
        lambda: parse_device(device),
        lambda: TrackRequest(source=str(tmp_path), store=str(tmp_path / "s"), device=device),
        lambda: EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), device=device),
        lambda: resolve_device(device),
    ):
        with pytest.raises(ConfigError, match="--device"):
            entry()
    assert run_main("track", "--model", tmp_path, "--store", tmp_path / "s", "--device", device) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("dormant track: error: --device")
    assert not (tmp_path / "s").exists()


def test_a_bad_dtype_is_one_config_error_from_the_cli_the_request_and_the_library(tmp_path, capsys):
    from dormant_tasks.checkpoints.loading import resolve_dtype

    for entry in (
        lambda: parse_dtype("fp8"),
        lambda: TrackRequest(source=str(tmp_path), store=str(tmp_path / "s"), dtype="fp8"),
        lambda: EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), dtype="fp8"),
        lambda: resolve_dtype("fp8"),
    ):
        with pytest.raises(ConfigError, match="--dtype fp8"):
            entry()
    assert run_main("score", "--model", tmp_path, "--out", tmp_path / "o.parquet", "--dtype", "fp8") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("dormant score: error: --dtype fp8")


def test_cuda_n_is_one_device_end_to_end(tmp_path):
    from dormant_tasks.checkpoints.loading import resolve_device
    from dormant_tasks.cluster import uses_gpu

    r = TrackRequest(source=str(tmp_path), store=str(tmp_path / "s"), device="cuda:1")
    assert r.device == "cuda:1" and TrackRequest.from_json(r.to_json()) == r
    assert uses_gpu("cuda:1") and uses_gpu("cuda") and not uses_gpu("cpu")
    assert uses_gpu("auto") == (visible_gpus() > 0)  # auto on a GPU machine asks Dask for the GPU resource
    if visible_gpus() < 2:
        with pytest.raises(ConfigError, match="cuda:1"):
            resolve_device("cuda:1")
    else:
        assert resolve_device("cuda:1") == "cuda:1"


# ---- the --model forms ----


def _series(folder: Path) -> Path:
    """A folder of two checkpoint folders (listing reads names and config.json, loads nothing)."""
    for name in ("stage1-step0-tokens0K", "stage1-step10-tokens40K"):
        (folder / name).mkdir(parents=True)
        (folder / name / "config.json").write_text("{}")
    return folder


def test_model_is_a_folder_or_a_stored_series_name_alike(tmp_path):
    from dormant_tasks.store.provenance import write_request

    series = _series(tmp_path / "my-series")
    store = tmp_path / "store"
    request = TrackRequest(source=str(series), store=str(store))
    write_request(store, request.model_id, request)  # what a track run leaves: the series' folder, by name
    by_folder = invoke(["checkpoints", "--model", series, "--store", store], cwd=REPO)
    by_name = invoke(["checkpoints", "--model", "my-series", "--store", store], cwd=REPO)
    assert by_folder.code == by_name.code == 0, by_folder.stderr + by_name.stderr
    assert by_folder.stdout == by_name.stdout and "2 of 2 checkpoints" in by_name.stdout


# ---- bad inputs: one stderr line naming the fix, exit 2, cheap, the store untouched ----


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the block ends: a connection is refused at once


NO_GPU = visible_gpus() == 0
BAD = [
    # (id, argv, needle in the one line, extra env)
    ("dtype", ["track", "--model", "{series}", "--store", "{store}", "--dtype", "fp8"], "--dtype fp8", {}),
    ("mps", ["track", "--model", "{series}", "--store", "{store}", "--device", "mps"], "--device mps", {}),
    (
        "no-gpu" if NO_GPU else "no-such-gpu",
        ["score", "--model", "{checkpoint}", "--out", "{tmp}/o.parquet", "--device", "cuda" if NO_GPU else "cuda:99"],
        "no CUDA GPU is visible" if NO_GPU else "visible",
        {},
    ),
    ("score-out-dir", ["score", "--model", "{checkpoint}", "--out", "{store}"], "is a folder: name a .parquet", {}),
    ("store-is-a-file-status", ["status", "--store", "{file}"], "is a file, not a folder", {}),
    ("store-is-a-file-track", ["track", "--model", "{series}", "--store", "{file}"], "is a file, not a folder", {}),
    ("missing-store", ["--verbose", "status", "--store", "{tmp}/nowhere"], "does not exist", {}),
    ("relative-store", ["status", "--store", "nowhere"], "--store nowhere (in the working folder /", {}),
    ("missing-model", ["evaluate", "--model", "./no-such-folder", "--store", "{store}"], "no such folder", {}),
    # a mistyped local path is a missing folder with the nearest one, never "the Hub does not answer"
    (
        "local-path-typo",
        ["track", "--model", "series/stage1-step0-tokens0", "--store", "{store}"],
        "no such folder (series has no stage1-step0-tokens0; did you mean series/stage1-step0-tokens0K?)",
        {"HF_ENDPOINT": "http://127.0.0.1:{port}", "HF_HUB_OFFLINE": None},
    ),
    (
        "deep-path-typo",
        ["track", "--model", "seriess/tiny/stage1-step0-tokens0K", "--store", "{store}"],
        "no such folder (the working folder has no seriess; did you mean series?)",
        {"HF_ENDPOINT": "http://127.0.0.1:{port}", "HF_HUB_OFFLINE": None},
    ),
    # a series folder where one checkpoint is needed: its checkpoints named
    (
        "score-series-folder",
        ["score", "--model", "series", "--out", "{tmp}/o.parquet"],
        "--model series is a series folder, not one checkpoint; name one of its checkpoints "
        "(stage1-step0-tokens0K, stage1-step10-tokens40K), e.g. --model series/stage1-step10-tokens40K",
        {},
    ),
    ("evaluate-series-folder", ["evaluate", "--model", "{series}", "--store", "{store}"], "is a series folder", {}),
    ("wrong-track-flag", ["track", "--model", "{series}", "--repoo", "x"], 'did you mean "--model"', {}),
    ("wrong-command", ["trak"], 'did you mean "track"', {}),
    ("wrong-choice", ["evaluate", "--model", "{series}", "--chat-template", "onn"], 'did you mean "on"', {}),
    ("stray-value", ["checkpoints", "--model", "{series}", "stray"], "unexpected argument 'stray'", {}),
    ("gc-flag", ["store", "gc", "--store", "{store}", "--bad"], "dormant store gc: error: unknown option --bad", {}),
    ("report-two-fns", ["report", "--store", "{store}", "--scores", "ahon,awft"], "draws one function", {}),
    ("report-fn-list", ["report", "--store", "{store}", "--scores", "ahon", "awft"], "unexpected argument 'awft'", {}),
    (
        "hub-silent",
        ["track", "--model", "org/name", "--store", "{store}"],
        "does not answer",
        {"HF_ENDPOINT": "http://127.0.0.1:{port}", "HF_HUB_OFFLINE": None},
    ),
    (
        "task-typo",
        ["evaluate", "--model", "{checkpoint}", "--store", "{store}", "--tasks", "winogrnde"],
        'did you mean "winogrande"',
        {"DORMANT_CACHE_DIR": "{tmp}/cache"},
    ),
    (  # no Hub: the note about bundled task data waits for the checks, so the error stays one line
        "task-typo-no-hub",
        ["evaluate", "--model", "{checkpoint}", "--store", "{store}", "--tasks", "winogrnde"],
        'did you mean "winogrande"',
        {
            "DORMANT_CACHE_DIR": "{tmp}/cache",
            "HF_ENDPOINT": "http://127.0.0.1:{port}",
            "HF_HUB_OFFLINE": None,
            "HF_DATASETS_OFFLINE": None,
        },
    ),
]


@pytest.fixture
def places(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "keep.txt").write_text("a store's file")
    (tmp_path / "file").write_text("not a folder")
    # the cached task index of this lm-eval version, as `evaluate` leaves it after its first full check
    cache = tmp_path / "cache" / f"lm-eval-{version('lm_eval')}-task-names.txt"
    cache.parent.mkdir()
    cache.write_text("winogrande\npiqa\nmmlu\n")
    return {
        "series": _series(tmp_path / "series"),
        "checkpoint": tmp_path / "series" / "stage1-step0-tokens0K",
        "store": store,
        "file": tmp_path / "file",
        "tmp": tmp_path,
        "port": _closed_port(),
    }


def _fill(value, places):
    return None if value is None else str(value).format(**places)


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


# the refusals that wait for the Hub's answer: the probe asks it through the Hub client (proxies, HF_ENDPOINT)
ASKS_THE_HUB = {"hub-silent", "task-typo-no-hub"}


def _endpoint(monkeypatch, env: dict) -> None:
    """HF_ENDPOINT for an in-process run as a fresh process reads it: huggingface_hub read it on import."""
    import huggingface_hub.constants as constants

    if env.get("HF_ENDPOINT"):
        monkeypatch.setattr(constants, "ENDPOINT", env["HF_ENDPOINT"])


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_bad_input_is_one_line_exit_2_cheap_and_leaves_the_store(case, places, monkeypatch):
    name, argv, needle, env = case
    argv = [_fill(a, places) for a in argv]
    env = {k: _fill(v, places) for k, v in env.items()}
    before = _snapshot(places["tmp"])
    _endpoint(monkeypatch, env)
    started = time.perf_counter()
    r = invoke(argv, cwd=places["tmp"], env=env)
    assert time.perf_counter() - started < CHECK_S
    assert r.code == 2 and len(r.lines) == 1, r.stderr
    line = r.lines[0]
    assert line.startswith("dormant") and ": error: " in line and needle in line, line
    advice = re.findall(r"`([^`]*)`", line)  # a command the error suggests runs as typed
    assert not [a for a in advice if "(in the working folder" in a], line
    assert r.stdout == "" and not r.prefect_started
    assert _snapshot(places["tmp"]) == before, "a bad input changed a file"


def test_every_bad_input_answers_before_a_heavy_import(places):
    """All of BAD in one fresh interpreter, those that ask the Hub (and so import its client) last: each answers
    with its one line before importing a heavy library."""
    cases = sorted(BAD, key=lambda c: c[0] in ASKS_THE_HUB)
    runs = [
        ([_fill(a, places) for a in c[1]], places["tmp"], {k: _fill(v, places) for k, v in c[3].items()}) for c in cases
    ]
    results = in_one_process(runs)
    assert {c[0]: r.stderr for c, r in zip(cases, results, strict=True) if r.code != 2 or c[2] not in r.stderr} == {}
    heavy = {
        c[0]: sorted(r.imported & (HEAVY - {"huggingface_hub"} if c[0] in ASKS_THE_HUB else HEAVY))
        for c, r in zip(cases, results, strict=True)
    }
    assert {k: v for k, v in heavy.items() if v} == {}, "answered after importing a heavy library"


# ---- outputs: one token format; store gc counts checkpoints as status does ----


def test_one_token_count_format():
    from dormant_tasks.checkpoints.naming import format_tokens
    from dormant_tasks.reporting import figures

    assert figures.format_tokens is format_tokens
    assert [format_tokens(t) for t in (1_024_000, 1_000_000, 1_020_000, 512.0, 0, 4_001 * 10**9)] == [
        "1.024M",
        "1M",
        "1.02M",
        "512",
        "0",
        "4.001T",
    ]


def test_store_gc_counts_checkpoints_not_rows_per_calibration_set(tmp_path, capsys):
    """Two checkpoints scored on two calibration sets are four manifest rows and two checkpoints."""
    from datetime import UTC, datetime

    from dormant_tasks import store as S

    model = "org/gc"
    for step in (0, 10):
        for cal in ("cal-a", "cal-b"):
            common = dict(model_id=model, revision=f"stage1-step{step}-tokens{step}B", stage=1, step=step, tokens=step)
            heads = [
                dict(common, score_fn="ahon", layer=0, head_index=0, score=0.1, score_std=0.0, tau=0.5)
                | dict(direction="<", dormant_rate=1.0, dormant=True, calibration_id=cal, taus_id="taus")
            ]
            inputs = [
                dict(common, input_index=0, score_fn="ahon", layer=0, head_index=0, score=0.1, calibration_id=cal)
            ]
            row = dict(common, commit=f"sha{step}", n_layers=1, n_heads=1, calibration_id=cal, n_inputs=1)
            row |= dict(dtype="float32", device="cpu", seconds=1.0, analyzed_at=datetime(2025, 1, 1, tzinfo=UTC))
            row |= dict(code_version="0", taus_id="taus", scoring_version="1")
            S.commit_checkpoint(tmp_path, row, S.conform(heads, "head_scores"), S.conform(inputs, "input_scores"))
    assert main(["store", "gc", "--store", str(tmp_path)]) == 0
    assert "per-input scores dropped for 2 checkpoints (4 files" in capsys.readouterr().out


def test_list_option_refuses_an_empty_list():
    with pytest.raises(SystemExit) as exit_info:
        _parse("leaderboard", "--tasks", ",")
    assert exit_info.value.code == 2
    assert isinstance(PARSERS["leaderboard"]._option_string_actions["--tasks"], ListOption)


def test_grammar_table_is_in_the_usage_page():
    usage = (REPO / "docs" / "USAGE.md").read_text(encoding="utf-8")
    for option, _ in GRAMMAR.values():
        assert f"| `{option}` |" in usage
    for old in OLD_NAMES:  # the retired names, in the page's note on old spellings
        assert f"{old}` (now" in usage


def test_a_silent_hub_is_asked_once_and_evaluate_reads_the_bundled_task_data(tmp_path, monkeypatch, capsys):
    """`evaluate --datasets auto` without an offline variable: a Hub that does not answer costs one probe (a
    refused connection here; at most HUB_PROBE_S), then the bundled copies serve the tasks, with one note."""
    from flows.cli.preflight import preflight, print_hub_note

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    _endpoint(monkeypatch, os.environ)
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    checkpoint = _series(tmp_path / "s") / "stage1-step0-tokens0K"
    args = _parse("evaluate", "--model", str(checkpoint), "--store", str(tmp_path / "st"))
    started = time.perf_counter()
    preflight(args)
    assert time.perf_counter() - started < CHECK_S
    assert args.datasets == "bundled"
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # the rest of the run never asks the Hub again (no retry loops)
    assert capsys.readouterr().err == ""  # the note waits for the command's own checks (never before an error)
    print_hub_note(args)
    print_hub_note(args)  # once
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith("dormant evaluate: note: the Hub at http://127.0.0.1:") and "bundled" in note
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # offline already: no probe, no note, `auto` stays
    args = _parse("evaluate", "--model", str(checkpoint), "--store", str(tmp_path / "st"))
    preflight(args)
    assert args.datasets == "auto" and capsys.readouterr().err == ""


def test_a_missing_model_folder_is_one_checkpoint_error_from_the_cli_and_the_library(tmp_path):
    from dormant_tasks.checkpoints.sources import list_revisions
    from dormant_tasks.errors import CheckpointError
    from flows.cli.preflight import preflight

    missing = str(tmp_path / "no-such-series")
    with pytest.raises(CheckpointError, match="no-such-series"):
        list_revisions(missing)
    with pytest.raises(CheckpointError, match="no such folder"):
        preflight(_parse("track", "--model", missing, "--store", str(tmp_path / "s")))
