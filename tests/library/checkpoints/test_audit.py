"""The integrity audit's comparisons (`checkpoints.audit.compare_branches`) on listings written out by hand, the token
axis (`checkpoints.tokens.token_axis`) on names and records, and the audit of a real local series (file hashes)."""

from __future__ import annotations

import json
import shutil

import pytest

from dormant_tasks.checkpoints.audit import (
    DUPLICATE,
    DUPLICATE_STEP,
    INCOMPLETE,
    MAIN_IS,
    PARTIAL,
    BranchFile,
    audit_series,
    compare_branches,
)
from dormant_tasks.checkpoints.naming import parse_revision_name
from dormant_tasks.checkpoints.sources import list_revisions
from dormant_tasks.checkpoints.tokens import Checkpoint, token_axis
from tests.builders.series import save_random_series

CONFIG = BranchFile("config.json", 100, "c0", False)


def files(*digests: str, sizes=None) -> list[BranchFile]:
    n = len(digests)
    shards = [
        BranchFile(f"model-{i + 1:05d}-of-{n:05d}.safetensors", (sizes or [10] * n)[i], d, True)
        for i, d in enumerate(digests)
    ]
    return [CONFIG, *shards]


def verdicts(listing: dict[str, list[BranchFile]], configs=None, disagreements=None) -> dict[str, tuple]:
    revisions = [parse_revision_name(n, 1000) for n in listing]
    out = compare_branches(revisions, listing, configs or {}, {}, disagreements or {})
    return {b.revision.name: (b.verdict, b.flags[0].other) for b in out if b.flags}


def test_each_public_pattern_is_named_and_nothing_else():
    listing = {
        "step0": files("a1", "a2"),
        "step1": files("a1", "a2"),  # step0 = step1
        "step2": files("f1", "f2"),  # the final model again
        "step4": files("d1", "d2"),
        "step5": files("f1", "e2"),  # the final model's first shard
        "step6": files("g1", "g2")[:2],  # its second shard absent
        "step7": files("d1", "d2"),
        "step8": files("h1", "h2"),
        "step10": files("d1", "d2"),
        "step12": files("f1", "f2"),
        "main": files("f1", "f2"),
    }
    assert verdicts(listing) == {
        "step1": (DUPLICATE, "step0"),
        "step2": (DUPLICATE, "step12"),
        "step5": (PARTIAL, "step12"),
        "step6": (INCOMPLETE, None),
        "step7": (DUPLICATE, "step4"),
        "step10": (DUPLICATE, "step4"),
        "main": (MAIN_IS, "step12"),
    }


def test_incomplete_branches_name_what_is_missing():
    listing = {
        "step1": files("a1"),
        "step2": [CONFIG],  # no weights
        "step3": files("c1", sizes=[0]),  # an empty file
        "step4": [BranchFile("model.safetensors", 10, "d1", True)],  # no config
    }
    revisions = [parse_revision_name(n, 1000) for n in listing]
    out = {b.revision.name: b.flags for b in compare_branches(revisions, listing, {}, {}, {})}
    assert out["step1"] == ()
    assert "no weight files" in out["step2"][0].text
    assert out["step3"][0].file == "model-00001-of-00001.safetensors" and "0 bytes" in out["step3"][0].text
    assert out["step4"][0].file == "config.json"
    assert all(f[0].kind == INCOMPLETE for name, f in out.items() if name != "step1")


def test_two_branches_at_one_step_keep_the_one_whose_tokens_agree():
    listing = {
        "stage1-step50-tokens50K": files("a"),
        "stage1-step100-tokens60K": files("b"),
        "stage1-step100-tokens100K": files("c"),
        "stage1-step200-tokens200K": files("d"),
    }
    found = verdicts(listing, disagreements={"stage1-step100-tokens60K": "its name says 60K"})
    assert found["stage1-step100-tokens60K"] == (DUPLICATE_STEP, "stage1-step100-tokens100K")
    assert set(found) == {"stage1-step100-tokens60K"}
    # nothing to tell them apart: the first in series order is kept
    found = verdicts(listing)
    assert found == {"stage1-step100-tokens100K": (DUPLICATE_STEP, "stage1-step100-tokens60K")}


def test_a_config_change_is_flagged():
    listing = {f"step{i}": files(f"w{i}") for i in range(4)}
    configs = {f"step{i}": {"model_type": "olmo2", "num_hidden_layers": 2} for i in range(4)}
    configs["step2"] = {"model_type": "olmo2", "num_hidden_layers": 3}
    found = verdicts(listing, configs)
    assert list(found) == ["step2"] and found["step2"][0] == "config"


def axis(names: list[str], given=None):
    revisions = [parse_revision_name(n) for n in names]
    from dormant_tasks.checkpoints.naming import name_token_unit

    units = {n: u for n in names if (u := name_token_unit(n)) is not None}
    return token_axis([Checkpoint(r.name, r.stage, r.step, r.tokens, None) for r in revisions], units, given)


def test_a_renamed_token_count_is_flagged_and_never_rescales_the_others():
    names = [
        "stage1-step0-tokens0K",
        "stage1-step10-tokens5K",
        "stage1-step25-tokens13K",
        "stage1-step250-tokens999K",  # was tokens128K
        "stage1-step500-tokens256K",
        "stage1-step600-tokens307K",
    ]
    found = axis(names)
    assert list(found.disagreements) == ["stage1-step250-tokens999K"]
    assert found.source == "names" and found.tokens_per_step == {1: 512}  # 307K / 600, the largest name's ratio
    assert found.tokens["stage1-step250-tokens999K"] == 128_000
    assert [found.tokens[n] for n in names if "999K" not in n] == [0, 5_000, 13_000, 256_000, 307_000]
    # a given tokens per step wins over the names
    assert axis(names, 500).tokens["stage1-step250-tokens999K"] == 125_000


def test_names_without_a_majority_are_taken_as_they_are():
    names = ["step10-tokens1K", "step20-tokens9K"]
    found = axis(names)
    assert found.disagreements == {} and found.tokens == {"step10-tokens1K": 1_000, "step20-tokens9K": 9_000}


# Issue 62: counts that run backwards, no trainer_state.json: no majority of names, so they stood as the axis.
BACKWARDS = [
    "stage1-step0-tokens0K",
    "stage1-step10-tokens961K",
    "stage1-step20-tokens500K",
    "stage1-step30-tokens250K",
    "stage1-step40-tokens61K",
]


def test_token_counts_that_fall_while_steps_rise_never_become_the_axis():
    found = axis(BACKWARDS)
    assert found.refusal is not None and "fall while steps rise" in found.refusal, found
    assert list(found.disagreements) == BACKWARDS[2:]
    assert "fewer than stage1-step10-tokens961K's 961K at step 10" in found.disagreements[BACKWARDS[2]]
    given = axis(BACKWARDS, 512)  # --tokens-per-step: step x 512, every name that disagrees flagged
    assert given.refusal is None and [given.tokens[n] for n in BACKWARDS] == [0, 5_120, 10_240, 15_360, 20_480]
    assert list(given.disagreements) == BACKWARDS[1:]
    # counts that rise, within their names' rounding, are no fall; a majority of names corrects a fall itself
    assert axis(["step10-tokens1K", "step20-tokens1K", "step30-tokens2K"]).refusal is None
    assert axis(["step10-tokens1K", "step20-tokens9K"]).refusal is None


def test_a_local_series_named_backwards_is_refused_or_flagged_never_tracked_on_its_names(
    tmp_path, tiny_tokenizer, capsys
):
    from dormant_tasks.errors import CheckpointError
    from flows.cli import main

    series = save_random_series(tmp_path / "backwards", tiny_tokenizer, BACKWARDS)
    capsys.readouterr()  # the saving's own bars
    with pytest.raises(CheckpointError, match=r"fall while steps rise .*; pass --tokens-per-step N") as e:
        list_revisions(series)
    assert "\n" not in str(e.value)
    assert main(["checkpoints", "--model", str(series)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tokens-per-step" in err, err
    audit = audit_series(series, tokens_per_step=512)
    found = {b.revision.name: b.verdict for b in audit.branches if b.verdict != "ok"}
    assert found == dict.fromkeys(BACKWARDS[1:], "tokens")
    assert [r.tokens for r in list_revisions(series, tokens_per_step=512).revisions] == [
        0,
        5_120,
        10_240,
        15_360,
        20_480,
    ]


@pytest.fixture(scope="module")
def local_series(tmp_path_factory, tiny_tokenizer):
    names = ["stage1-step0-tokens0K", "stage1-step10-tokens5K", "stage1-step20-tokens10K", "stage1-step40-tokens20K"]
    folder = save_random_series(tmp_path_factory.mktemp("audit") / "series", tiny_tokenizer, names)
    for step, name in zip((0, 10, 20, 40), names):  # the tiny series' record: exact tokens, 512 per step
        (folder / name / "trainer_state.json").write_text(
            json.dumps({"step": step, "tokens": 512 * step, "tokens_per_step": 512})
        )
    return folder, names


def test_a_local_series_is_audited_from_its_file_hashes(local_series, tmp_path):
    folder, names = local_series
    series = tmp_path / "series"
    shutil.copytree(folder, series)
    shutil.copytree(folder / names[1], series / "stage1-step30-tokens15K")  # step 10's weights, named step 30
    shutil.move(series / names[2], series / "stage1-step20-tokens99K")  # a renamed token count
    audit = audit_series(series)
    found = {b.revision.name: b.verdict for b in audit.branches if b.verdict != "ok"}
    assert found == {"stage1-step30-tokens15K": DUPLICATE, "stage1-step20-tokens99K": "tokens"}
    assert audit.set_aside()["stage1-step30-tokens15K"].other == names[1]
    assert audit.tokens_source == "record" and audit.tokens_per_step == {1: 512}
    tokens = {r.name: r.tokens for r in list_revisions(series).revisions}
    assert tokens == {
        names[0]: 0,
        names[1]: 5_120,  # exact: the record's count, where the name rounds
        "stage1-step20-tokens99K": 10_240,
        "stage1-step30-tokens15K": 15_360,
        names[3]: 20_480,
    }


def test_a_copy_named_at_an_earlier_step_that_another_branch_holds_is_not_taken_as_genuine():
    listing = {
        "stage1-step50-tokens50K": files("a"),
        "stage1-step100-tokens100K": files("b"),
        "stage1-step100-tokens60K": files("c"),  # step 200's weights, at a step another branch holds
        "stage1-step200-tokens200K": files("c"),
    }
    found = verdicts(listing, disagreements={"stage1-step100-tokens60K": "its name says 60K"})
    assert found == {"stage1-step100-tokens60K": (DUPLICATE, "stage1-step200-tokens200K")}
