"""One rule per option, checked as the line is parsed, before any store is read or anything is created (issue 62
item 7): the resampling and seed options of every command, negative values in both `--opt -5` and `--opt=-5`
forms, a series name the store cannot name files after, a missing --license. In-process (`flows.cli.main`), each
against a store path that does not exist: a check that came after the store was read would name the store."""

from __future__ import annotations

import json

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.errors import CheckpointError
from flows.cli import main


def refusal(capsys, *argv) -> str:
    """The one stderr line of `dormant ARGV`, which must exit 2."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (code, err)
    return err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["findings", "--resamples", "-1"], "--resamples must be from 1 to 100,000, got -1"),
        (["findings", "--resamples=-1"], "--resamples must be from 1 to 100,000, got -1"),
        (["findings", "--resamples", "1000000000"], "--resamples must be from 1 to 100,000, got 1000000000"),
        (["findings", "--resamples", "many"], "--resamples must be from 1 to 100,000, got many"),
        (["report", "--resamples", "0"], "--resamples must be from 1 to 100,000, got 0"),
        (["leaderboard", "--resamples", "-1"], "--resamples must be from 0 (no intervals) to 100,000, got -1"),
        (["findings", "--seed", "-1"], "--seed must be 0 or more (at most 2**63 - 1), got -1"),
        (["leaderboard", "--seed", "-2"], "--seed must be 0 or more (at most 2**63 - 1), got -2"),
    ],
)
def test_statistics_options_are_checked_before_the_store_is_read(argv, needle, tmp_path, capsys):
    err = refusal(capsys, *argv, "--store", tmp_path / "no-store")
    assert needle in err and "no-store" not in err, err


def test_every_seed_takes_the_rule_of_tracks(tmp_path, capsys):
    """`track --seed -1` was refused while `findings --seed -1` and `pretrain-tiny --seed -3` were taken."""
    err = refusal(capsys, "pretrain-tiny", "--model", tmp_path / "tiny", "--seed", "-3")
    assert "--seed must be 0 or more (at most 2**63 - 1), got -3" in err
    err = refusal(capsys, "score", "--model", tmp_path / "m", "--out", tmp_path / "s.parquet", "--seed", "-1")
    assert "--seed must be 0 or more (at most 2**63 - 1), got -1" in err
    err = refusal(capsys, "demo", "--model", tmp_path / "d", "--store", tmp_path / "s", "--seed=-4")
    assert "--seed must be 0 or more (at most 2**63 - 1), got -4" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("form", ["space", "equals"])
def test_a_negative_value_reads_the_same_in_either_form(form, tmp_path, capsys):
    """argparse took `-5:-1` after a space for an option ("expected one argument"); both forms now reach the
    option's own check."""
    series = tmp_path / "series" / "stage1-step0-tokens0K"
    series.mkdir(parents=True)
    (series / "config.json").write_text("{}")

    def argv(option, value):
        return [option, value] if form == "space" else [f"{option}={value}"]

    err = refusal(capsys, "checkpoints", "--model", series.parent, *argv("--steps", "-5:-1"))
    assert "--steps -5:-1: steps count from 0" in err, err
    err = refusal(capsys, "track", "--model", series.parent, "--dry-run", *argv("--bandwidth", "-5MB/s"))
    assert "--bandwidth '-5MB/s': give a positive rate" in err, err


def test_a_series_name_too_long_for_a_file_name_is_refused_before_anything_is_created(tmp_path, capsys):
    """A 300-character --series-name failed after 22 s with "File name too long; free space, fix its
    permissions" and left a store folder behind."""
    (tmp_path / "series").mkdir()
    name = "a" * 300
    for command in ("track", "demo"):
        err = refusal(
            capsys, command, "--model", tmp_path / "series", "--store", tmp_path / "store", "--series-name", name
        )
        assert "--series-name 'aaaa" in err and "300 bytes, at most 243" in err and "shorter name" in err, err
        assert "free space" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["series"]


def test_a_missing_license_is_refused_as_the_line_is_parsed(tmp_path, capsys):
    err = refusal(capsys, "publish", "--store", tmp_path / "no-store", "--out", tmp_path / "out")
    assert "required: --license" in err and "no-store" not in err, err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"model_type": "olmo2",', "is not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b"\xff\xfe", "is not valid JSON"),
    ],
)
def test_a_broken_config_json_is_named_as_such(tiny_model_dir, tmp_path, content, why):
    """It was reported as "no tokenizer could be loaded" (transformers reads the tokenizer first)."""
    import shutil

    bad = shutil.copytree(tiny_model_dir, tmp_path / "bad")
    (bad / "config.json").write_bytes(content)
    with pytest.raises(CheckpointError, match="its config.json " + why) as e:
        load_model_and_tokenizer(bad)
    assert "tokenizer" not in str(e.value) and "\n" not in str(e.value)
    assert json.loads((tiny_model_dir / "config.json").read_text())  # the fixture's own is whole
