"""Run requests: validated once, conflicting flags refused, JSON round trip, and the CLI builds them whole."""

from __future__ import annotations

import json

import pytest

from dormant_tasks.checkpoints.naming import Selection
from dormant_tasks.errors import ConfigError
from dormant_tasks.requests import (
    REQUEST_VERSION,
    Device,
    DType,
    EvalRequest,
    Mode,
    Runner,
    TrackRequest,
)
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
    with pytest.raises(ConfigError, match="drop --max$"):
        _track("--request", str(saved), "--max", "4")
    with pytest.raises(ConfigError, match="--model is required"):
        _track()
