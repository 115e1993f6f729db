"""Each run option is declared once, beside its request field (`dormant_tasks.options`): the parser is built from
the fields, the request from the parsed options, and `--request FILE` compares the options given with the file's
fields. In process: no command is run, only the parser and the request."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation import EvalRequest
from dormant_tasks.options import declare, options_of
from dormant_tasks.tracking import TrackRequest
from flows.cli import build_parser
from flows.cli.evaluate import request_from_args as eval_request_from_args
from flows.cli.track import request_from_args


def _args(*argv: str):
    return build_parser().parse_args([str(a) for a in argv])


@pytest.mark.parametrize("cls", [TrackRequest, EvalRequest])
def test_every_request_field_has_an_option_and_every_option_a_field(cls):
    declared = {o.field for o in options_of(cls)}
    assert declared == {f.name for f in dataclasses.fields(cls)}
    flags = [o.flag for o in options_of(cls)]
    assert len(flags) == len(set(flags))


def test_track_defaults_on_the_line_are_the_fields_defaults(tmp_path):
    """Options left out give the request a Python caller gets with the same two fields: the parser's defaults are
    the fields' (or None, which takes them)."""
    args = _args("track", "--model", tmp_path, "--store", tmp_path / "store")
    assert request_from_args(args) == TrackRequest(source=str(tmp_path), store=str(tmp_path / "store"))


def test_evaluate_defaults_on_the_line_are_the_fields_defaults(tmp_path):
    args = _args("evaluate", "--model", tmp_path, "--store", tmp_path / "store")
    assert eval_request_from_args(args) == EvalRequest(model=str(tmp_path), store=str(tmp_path / "store"))


def test_options_of_other_names_and_shapes_set_their_fields(tmp_path):
    args = _args(
        "track", "--model", tmp_path, "--store", tmp_path / "s", "--scores", "ahon,awft", "--tau", "ahon=0.2",
        "--no-report", "--max", "3", "--steps", "10:", "--calibration", "winogrande", "--runner", "dask",
        "--workers", "3", "--fdr", "0.1",
    )  # fmt: skip
    r = request_from_args(args)
    assert r.score_fns == ("ahon", "awft") and r.taus == ("ahon=0.2",) and r.report is False
    assert (r.selection.max_n, r.selection.steps, r.calibrations) == (3, (10, None), ("winogrande",))
    assert (r.runner, r.workers, r.fdr) == ("dask", 3, 0.1)


def _saved(tmp_path, **fields) -> str:
    path = tmp_path / "request.json"
    path.write_text(TrackRequest(source=str(tmp_path), store=str(tmp_path / "store"), **fields).to_json())
    return str(path)


def test_a_replay_with_the_files_own_values_is_the_file(tmp_path):
    path = _saved(tmp_path, score_fns=("ahon",), report=False)
    again = request_from_args(_args("track", "--request", path, "--scores", "ahon", "--no-report"))
    assert again == TrackRequest.from_file(path)


@pytest.mark.parametrize(
    ("saved", "argv", "said"),
    [
        ({"score_fns": ("ahon",)}, ["--scores", "awft"], "--scores differs from it (the file's --scores: ahon)"),
        ({}, ["--max", "4"], "--max differs from it (the file's --max: unset)"),
        ({}, ["--no-report"], "--no-report differs from it; drop --no-report"),
        ({"seed": 3}, ["--seed", "4", "--max-tokens", "9"], "--max-tokens, --seed differ from it"),
    ],
)
def test_a_replay_refuses_an_option_that_differs_from_the_file_naming_it(tmp_path, saved, argv, said):
    path = _saved(tmp_path, **saved)
    with pytest.raises(ConfigError, match="replays a saved request") as e:
        request_from_args(_args("track", "--request", path, *argv))
    assert said in str(e.value)


def test_a_new_field_with_its_declaration_is_an_option_of_the_parser_and_the_request(tmp_path):
    """What a new track option costs: one field, declared (a subclass stands in for the edited class)."""

    @dataclass(frozen=True)
    class Wider(TrackRequest):
        window: int | None = field(default=None, metadata=declare("a new option (default: none)", metavar="N"))

    import argparse

    from flows.cli.options import add_options

    parser = argparse.ArgumentParser()
    add_options(parser, options_of(Wider))
    assert "--window N" in parser.format_help()
    parsed = vars(parser.parse_args(["--model", str(tmp_path), "--window", "7"]))
    request = Wider.from_options(**{k: v for k, v in parsed.items() if k in Wider.option_names()})
    assert request.window == 7 and request.source == str(tmp_path)
