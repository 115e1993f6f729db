"""Run requests: validated once, conflicting flags refused, JSON round trip, and the CLI builds them whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dormant_tasks.checkpoints.naming import Selection
from dormant_tasks.devices import Device, DType
from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.request import EvalRequest, Mode
from dormant_tasks.requests import REQUEST_VERSION
from dormant_tasks.tracking.request import Runner, TrackRequest
from flows.cli import build_parser
from flows.cli.evaluate import request_from_args as eval_request_from_args
from flows.cli.track import request_from_args


def _track(*argv) -> TrackRequest:
    return request_from_args(build_parser().parse_args(["track", *argv]))


def test_cli_builds_one_validated_request(tmp_path):
    r = _track(
        "--model",
        "allenai/OLMo-2-0425-1B",
        "--store",
        str(tmp_path / "s"),
        "--steps",
        "0:0",
        "--max",
        "6",
        "--scores",
        "ahon_ln,awft",
        "--tau",
        "ahon_ln=0.4",
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
    )
    assert r.selection == Selection((), (0, 0), None, 6)  # --steps 0:0 stays step 0, not "everything"
    assert r.score_fns == ("ahon_ln", "awft") and r.taus == ("ahon_ln=0.4",)
    assert r.device is Device.CPU and r.dtype is DType.BFLOAT16 and r.runner is Runner.LOCAL
    assert r.store == str((tmp_path / "s").resolve()) and r.model_id == "allenai/OLMo-2-0425-1B"


def test_saved_json_rebuilds_an_identical_request(tmp_path):
    r = _track(
        "--model",
        str(tmp_path),
        "--steps",
        ":250",
        "--store",
        str(tmp_path / "s"),
        "--runner",
        "dask",
        "--workers",
        "3",
        "--no-report",
        "--input-scores",
        "keep",
    )
    again = TrackRequest.from_json(r.to_json())
    assert again == r and again.request_id == r.request_id and again.to_json() == r.to_json()
    e = EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), series=True, score_fns=("ahon_ln",))
    assert EvalRequest.from_json(e.to_json()) == e and e.mode is Mode.STATIC


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--steps", "0:10", "--revisions", "stage1-*"], "--steps and --revisions both select"),
        (["--address", "tcp://127.0.0.1:8786"], "--address is for a Dask cluster"),
        (["--workers", "4"], "--workers is for a Dask cluster"),
        (["--runner", "dask", "--address", "tcp://h:1", "--workers", "2"], "drop --workers"),
        (["--no-report", "--reports-dir", "x"], "--reports-dir with --no-report"),
        (["--tau", "ahon=q0.1", "--scores", "ahon_ln"], "not among the scored functions"),
        (["--limit", "0"], "--limit must be a positive integer"),
        (["--max-batch-tokens", "-5"], "--max-batch-tokens must be a positive integer"),
    ],
)
def test_conflicting_or_bad_track_flags_are_refused(tmp_path, argv, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        _track("--model", str(tmp_path), "--store", str(tmp_path / "s"), *argv)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--series", "--mode", "dynamic"], "--mode dynamic contradicts it"),
        (["--series", "--revision", "main"], "--revision names one"),
        (["--mode", "static", "--quantiles", "0.1"], "drop --quantiles"),
        (["--quantiles", "5"], "fractions in"),
    ],
)
def test_conflicting_evaluate_flags_are_refused(tmp_path, argv, needle):
    args = build_parser().parse_args(["evaluate", "--model", str(tmp_path), "--store", str(tmp_path / "s"), *argv])
    with pytest.raises(ConfigError, match=needle):
        eval_request_from_args(args)


def test_request_json_from_a_newer_schema_is_refused(tmp_path):
    data = json.loads(_track("--model", str(tmp_path), "--store", str(tmp_path / "s")).to_json())
    with pytest.raises(ConfigError, match="upgrade dormant-heads"):
        TrackRequest.from_dict({**data, "request_version": REQUEST_VERSION + 1})
    with pytest.raises(ConfigError, match="unknown field \"?'?colour"):
        TrackRequest.from_dict({**data, "colour": "red"})
    with pytest.raises(ConfigError, match="dormant track"):
        EvalRequest.from_dict(data)


def test_replaying_a_request_refuses_other_options(tmp_path):
    saved = tmp_path / "r.json"
    original = _track("--model", str(tmp_path), "--store", str(tmp_path / "s"), "--max", "3")
    saved.write_text(original.to_json())
    assert _track("--request", str(saved)) == original
    with pytest.raises(ConfigError, match="drop --max, or edit the file$"):
        _track("--request", str(saved), "--max", "4")
    with pytest.raises(ConfigError, match="--model is required"):
        _track()


def test_replaying_a_request_refuses_a_different_store_by_name_and_accepts_the_same(tmp_path):
    """`--request F --store OTHER` used to run F's store silently; an option equal to the file's is fine."""
    saved = tmp_path / "r.json"
    original = _track("--model", str(tmp_path), "--store", str(tmp_path / "s"), "--device", "cpu")
    saved.write_text(original.to_json())
    with pytest.raises(ConfigError, match=r"--store differs .*drop --store"):
        _track("--request", str(saved), "--store", str(tmp_path / "other"))
    with pytest.raises(ConfigError, match=r"--batch-size, --device differ"):  # run settings are the file's too
        _track("--request", str(saved), "--device", "auto", "--batch-size", "4")
    with pytest.raises(ConfigError, match=r"--steps differs"):  # a selection option, by its name
        _track("--request", str(saved), "--steps", "0:10")
    same = ["--store", str(tmp_path / "s"), "--model", str(tmp_path), "--device", "cpu", "--seed", "0"]
    assert _track("--request", str(saved), *same) == original


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"seed": "abc"}, r"^seed \(--seed\) must be an integer, got 'abc'$"),
        ({"seed": -1}, r"--seed must be 0 or more"),
        ({"score_fns": 5}, r"^score_fns \(--scores\) must be a list of strings or null, got 5$"),
        ({"taus": [5]}, r"taus \(--tau\) must be a list of strings"),
        ({"store": ["a"]}, r"store \(--store\) must be a string"),
        ({"report": "yes"}, r"report \(--no-report\) must be true or false"),
        ({"limit": "4"}, r"limit \(--limit\) must be an integer or null"),
        ({"texts": ""}, r"--texts is empty"),
        ({"selection": {"steps": "0:10"}}, r"selection's steps must be a list \[A, B\]"),
        ({"selection": {"steps": ["a", "b"]}}, r"--steps .*integer steps"),
        ({"selection": {"every": "2"}}, r"--every '2': must be a positive integer"),
        ({"selection": {"stepz": [0, 10]}}, r"unknown field 'stepz' \(did you mean \"steps\"\?\)"),
        ({"selection": 5}, r"selection must be an object"),
        ({"request_version": "4"}, r"request_version is '4', not a positive integer"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else None,
)
def test_a_saved_request_with_a_wrong_value_is_one_error_naming_the_field(tmp_path, change, needle):
    data = json.loads(TrackRequest(source=str(tmp_path), store=str(tmp_path / "s")).to_json())
    for key, value in change.items():
        data[key] = {**data[key], **value} if key == "selection" and isinstance(value, dict) else value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=needle) as excinfo:
        TrackRequest.from_dict(data)
    assert "\n" not in str(excinfo.value)
    with pytest.raises(ConfigError, match=str(path)):  # read from a file, the message names it
        TrackRequest.from_file(path)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (bytes(range(256)), "not a UTF-8 text file"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
        (b"[1, 2]", "not an object"),
        (b'{"kind": "track"}', "request_version is None"),
        (b'{"request_version": 4}', 'has no "kind"'),
    ],
    ids=["binary", "nested-lists", "nested-objects", "a-list", "no-version", "no-kind"],
)
def test_a_request_file_that_is_no_request_is_one_error(tmp_path, content, needle):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=needle) as excinfo:
        TrackRequest.from_file(path)
    assert "\n" not in str(excinfo.value)
    with pytest.raises(ConfigError, match="is a folder"):
        TrackRequest.from_file(tmp_path)
    with pytest.raises(ConfigError, match="no such file"):
        TrackRequest.from_file(tmp_path / "missing.json")


def test_track_leaves_the_batch_size_to_the_device_unless_named(tmp_path):
    """No --batch-size: the request names none, so a GPU run cuts batches by padded tokens alone and a CPU run
    takes 8 inputs (engine.batching.device_batching); a given --batch-size is kept."""
    from dormant_tasks.engine.batching import CPU_BATCH_SIZE, GPU_MAX_BATCH_TOKENS, device_batching

    unset = _track("--model", "allenai/OLMo-2-0425-1B", "--store", str(tmp_path / "s"))
    assert unset.batch_size is None
    assert device_batching("cuda", unset.batch_size, unset.max_batch_tokens) == (None, GPU_MAX_BATCH_TOKENS)
    assert device_batching("cpu", unset.batch_size, unset.max_batch_tokens)[0] == CPU_BATCH_SIZE == 8
    named = _track("--model", "allenai/OLMo-2-0425-1B", "--store", str(tmp_path / "s"), "--batch-size", "4")
    assert named.batch_size == 4 and device_batching("cuda", named.batch_size, None)[0] == 4


@pytest.mark.parametrize(
    "name, kind, request_id",
    [
        ("track-before-split.json", TrackRequest, "c9d9d0b47ed3"),
        ("evaluate-before-split.json", EvalRequest, "365f2ce9d479"),
    ],
)
def test_a_request_saved_before_the_requests_moved_to_their_parts_is_read_back_the_same(name, kind, request_id):
    """Files written by 0.1.0's `to_json` when both kinds lived in one module (tests/data/README.md): the same
    request, the same JSON, the same id, so the rows that carry the id still name it."""
    path = Path(__file__).resolve().parents[1] / "data" / "requests" / name
    request = kind.from_file(path)
    assert request.request_id == request_id
    assert request.to_json() == path.read_text(encoding="utf-8")
    other = EvalRequest if kind is TrackRequest else TrackRequest
    with pytest.raises(ConfigError, match=f"this is a '{kind.KIND}' request"):
        other.from_file(path)
