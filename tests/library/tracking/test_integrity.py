"""The integrity audit in a track run (the tracker's steps, no Prefect): a real local series of random tiny
checkpoints, one branch a copy of another step, into a real store.

The series without the copy is tracked beside it: the transitions of the series with it must equal those of the
series without it, whether the audit sets the copy aside before scoring, or a store that scored it (before the
audit, here `keep_duplicates`) has it set aside afterwards (`set_aside_stored_duplicates`, as `store repair` does).
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from dormant_tasks import tracking as tracker
from dormant_tasks.reporting.report import render_report
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from tests.builders.series import save_random_series
from tests.builders.track import track_steps

NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K", "stage1-step40-tokens82K"]
COPY = "stage1-step30-tokens61K"  # named between steps 25 and 40, holding step 10's weights (OLMo-2 7B's case)
SCORES = ("ahon_ln", "awft", "fhon_ln")
TAUS = tuple(f"{fn}=q0.5" for fn in SCORES)  # half the heads dormant at the reference: transitions to compare


@pytest.fixture(scope="module")
def series_pair(tmp_path_factory, tiny_tokenizer):
    root = tmp_path_factory.mktemp("integrity")
    clean = save_random_series(root / "clean", tiny_tokenizer, NAMES)
    copied = root / "copied"
    shutil.copytree(clean, copied)
    shutil.copytree(clean / NAMES[1], copied / COPY)
    return clean, copied


def request(source, store, **kw) -> TrackRequest:
    return TrackRequest(source=str(source), store=str(store), limit=8, score_fns=SCORES, taus=TAUS, report=False, **kw)


def transitions(store, model_id: str) -> list[tuple]:
    view = SeriesView.open(store, model_id)
    t = view.transitions().to_pylist()
    keep = ("score_fn", "layer", "head_index", "from_revision", "to_revision", "from_state", "to_state", "confident")
    return sorted(tuple(r[k] for k in keep) for r in t)


@pytest.fixture(scope="module")
def clean_transitions(series_pair, tmp_path_factory):
    clean, _ = series_pair
    store = tmp_path_factory.mktemp("clean-store")
    track_steps(request(clean, store))
    return transitions(store, "clean")


def test_a_full_duplicate_is_set_aside_before_scoring_and_the_findings_equal_the_clean_series(
    series_pair, clean_transitions, tmp_path
):
    _, copied = series_pair
    store = tmp_path / "store"
    result = track_steps(request(copied, store))
    assert result.n_checkpoints == len(NAMES)
    view = SeriesView.open(store, "copied")
    assert COPY not in view.revisions
    [row] = tracker.set_aside_checkpoints(store, "copied")
    assert (row["revision"], row["kind"], row["duplicate_of"], row["kept"]) == (COPY, "duplicate", NAMES[1], False)
    assert transitions(store, "copied") == clean_transitions
    assert all(COPY not in (t[3], t[4]) for t in transitions(store, "copied"))
    report = render_report(store, "copied", tmp_path / "reports", reuse=False)
    assert f"- {COPY}: duplicate of {NAMES[1]}" in report.markdown
    assert view.identical_scores() == []


def test_a_store_that_scored_the_copy_sets_it_aside_and_derives_the_transitions_again(
    series_pair, clean_transitions, tmp_path
):
    _, copied = series_pair
    store = tmp_path / "store"
    track_steps(request(copied, store, keep_duplicates=True))  # as a store tracked before the audit holds it
    view = SeriesView.open(store, "copied")
    assert COPY in view.revisions  # kept, marked
    assert [r["kept"] for r in tracker.set_aside_checkpoints(store, "copied")] == [True]

    # the second net: its scores are bit-identical to step 10's, from the manifest's digests alone
    def unread(*a, **k):
        raise AssertionError("the scores were read")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SeriesView, "head_scores", unread)
        assert view.identical_scores() == [[NAMES[1], COPY]]
    # rows written before the digest: the scores read and hashed alike
    from dormant_tasks.store import manifest_path, read_table, write_manifest

    manifest = read_table(store, "checkpoints", model_id="copied", dedupe=False)
    i = manifest.schema.get_field_index("scores_sha256")
    older = manifest.set_column(i, manifest.schema.field(i), pa.nulls(manifest.num_rows, pa.string()))
    write_manifest(store, "copied", older)
    assert manifest_path(store, "copied").is_file()
    view = SeriesView.open(store, "copied")
    assert all(c["scores_sha256"] is None for c in view.checkpoints)
    assert view.identical_scores() == [[NAMES[1], COPY]]
    # `store repair` records them, the same digests a commit writes
    from dormant_tasks.store import repair_store

    assert repair_store(store, "copied").digested == manifest.num_rows
    again = read_table(store, "checkpoints", model_id="copied", dedupe=False)
    assert again.column("scores_sha256").to_pylist() == manifest.column("scores_sha256").to_pylist()
    assert repair_store(store, "copied").digested == 0
    assert any(COPY in (t[3], t[4]) for t in transitions(store, "copied"))
    # as before the audit: the store holds the copy and no record of it
    from dormant_tasks.store import write_table

    write_table(store, "set_aside_checkpoints", [], file_key="set_aside", model_id="copied")
    assert tracker.set_aside_stored_duplicates(store, "copied") == [COPY]
    tracker.rederive(store, "copied")
    assert COPY not in SeriesView.open(store, "copied").revisions
    assert transitions(store, "copied") == clean_transitions
    assert tracker.set_aside_stored_duplicates(store, "copied") == []  # recorded once


@pytest.fixture(scope="module")
def two_names(series_pair, tmp_path_factory):
    """One series tracked twice under two names: 'identical seeds'."""
    clean, _ = series_pair
    store = tmp_path_factory.mktemp("two-names")
    track_steps(request(clean, store))
    track_steps(request(clean, store, series_name="clean-again"))
    return store


def test_two_names_of_one_series_are_refused_as_a_seed_group(two_names):
    why = tracker.shared_weights(two_names, ["clean", "clean-again"])
    assert why is not None and "hold the same weights" in why and "\n" not in why
    assert tracker.shared_weights(two_names, ["clean"]) is None
    assert "named twice" in tracker.shared_weights(two_names, ["clean", "clean"])


def test_the_seed_group_cli_refuses_copies_in_one_line(two_names, capsys):
    from flows.cli import main

    capsys.readouterr()
    code = main(["findings", "--store", str(two_names), "--seed-group", "clean,clean-again"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "hold the same weights" in err, err


def test_two_branches_at_one_step_are_a_duplicate_step_not_a_refused_series(
    series_pair, clean_transitions, tmp_path, tiny_tokenizer
):
    """Before the audit, two folders at one step made `track` refuse the whole series (with advice about stage-2
    ingredients); now the second is set aside by the stated rule and the rest is tracked as the clean series."""
    clean, _ = series_pair
    series = tmp_path / "same-step"
    shutil.copytree(clean, series)
    save_random_series(series, tiny_tokenizer, ["stage1-step25-tokens60K"], first_seed=4)  # its own weights
    store = tmp_path / "store"
    result = track_steps(request(series, store))
    assert result.n_checkpoints == len(NAMES) and not result.failed
    [row] = tracker.set_aside_checkpoints(store, "same-step")
    assert (row["revision"], row["kind"], row["duplicate_of"]) == (
        "stage1-step25-tokens60K",
        "duplicate step",
        NAMES[2],
    )
    assert "its token count agrees with the series" in row["reason"]
    assert transitions(store, "same-step") == clean_transitions


PARTIAL = "stage1-step50-tokens102K"  # its own weights, but for step 40's first shard (pythia-12b's case)


def save_sharded(folder, tokenizer, seed: int) -> list[str]:
    """A random tiny checkpoint (`save_random_series`'s model of `seed`) saved in shards; its shard files."""
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config

    torch.manual_seed(seed)
    model = Olmo2ForCausalLM(tiny_config(tokenizer, n_layers=2, n_heads=4, hidden_size=64))
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, max_shard_size="150KB")
    tokenizer.save_pretrained(folder)
    return sorted(p.name for p in folder.glob("*.safetensors"))


def test_a_partial_duplicate_kept_by_keep_duplicates_is_marked_with_its_reason(
    series_pair, tmp_path, tiny_tokenizer, capsys
):
    """`--keep-duplicates` tracks a partial duplicate anyway, marked as a full duplicate is: stored with its reason,
    shown by `status`, the report and `findings --format json`; a later run without the flag sets it aside."""
    import json

    from flows.cli import main

    clean, _ = series_pair
    series = tmp_path / "partial"
    shutil.copytree(clean, series)
    shards = save_sharded(series / NAMES[3], tiny_tokenizer, seed=3)  # the series' step 40 again, sharded
    assert save_sharded(series / PARTIAL, tiny_tokenizer, seed=7) == shards
    shutil.copyfile(series / NAMES[3] / shards[0], series / PARTIAL / shards[0])
    store = tmp_path / "store"
    result = track_steps(request(series, store, keep_duplicates=True))
    assert not result.failed and PARTIAL in SeriesView.open(store, "partial").revisions
    [row] = tracker.set_aside_checkpoints(store, "partial")
    assert (row["revision"], row["kind"], row["duplicate_of"], row["kept"]) == (
        PARTIAL,
        "partial duplicate",
        NAMES[3],
        True,
    )
    assert shards[0] in row["reason"]
    capsys.readouterr()
    assert main(["status", "--store", str(store)]) == 0
    assert f"{PARTIAL}: partial duplicate of {NAMES[3]}, kept anyway (--keep-duplicates), marked" in (
        capsys.readouterr().out
    )
    report = render_report(store, "partial", tmp_path / "reports", reuse=False)
    assert f"- {PARTIAL}: partial duplicate of {NAMES[3]} (kept anyway, marked)" in report.markdown
    assert main(["findings", "--store", str(store), "--model", "partial", "--format", "json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["set_aside"]
    assert (record["revision"], record["kind"], record["kept"]) == (PARTIAL, "partial duplicate", True)
    # without the flag: refused as failed, and its stored results are set aside (no longer a point of training)
    result = track_steps(request(series, store))
    assert [name for name, _ in result.failed] == [PARTIAL]
    assert [r["kept"] for r in tracker.set_aside_checkpoints(store, "partial")] == [False]
    assert PARTIAL not in SeriesView.open(store, "partial").revisions


def test_a_rerun_answered_from_the_store_records_an_older_stores_listing(series_pair, tmp_path, monkeypatch):
    """A store tracked before the listing was kept (no `listed_checkpoints`) learns it from the next `dormant track`,
    even when that rerun has nothing to score and is answered from the store (no Prefect)."""
    from flows.cli import main

    clean, _ = series_pair
    store = tmp_path / "store"
    with monkeypatch.context() as m:  # the older store: a run that recorded no listing
        m.setattr(tracker, "record_listing", lambda *a, **k: False)
        track_steps(request(clean, store))
    assert tracker.listed_checkpoints(store, "clean") is None
    assert main(["track", "--model", str(clean), "--store", str(store), "--limit", "8", "--no-report"]) == 0
    listed = tracker.listed_checkpoints(store, "clean")
    assert listed is not None and [r["revision"] for r in listed] == SeriesView.open(store, "clean").revisions
