"""`dormant publish` without a Hub: what a publication holds, that it is a store of its one series whose findings
and figures are the source store's, that the same store gives the same bytes, that it is read-only, that its card
loads with `datasets` offline, and the refusals a user can cause (one line, exit 2, nothing written).

The store is hand-built (`tests/builders/publishing.py`: real Parquet through the store's own writes); the upload
and `hf://` reading run against a loopback Hub in `tests/integration/test_publish_hub.py`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.findings import findings_record, series_findings
from dormant_tasks.publishing import build_publication, check_dataset_repo, check_license, write_publication
from dormant_tasks.store import PUBLISHED, check_store_path, damaged_files, read_table, store_folder, write_table
from dormant_tasks.tracking import open_views
from flows.cli import main
from tests.builders.publishing import STALE_KEY, store_to_publish
from tests.builders.stores import MODEL

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return store_to_publish(tmp_path_factory.mktemp("src") / "store")


@pytest.fixture(scope="module")
def published(store, tmp_path_factory) -> Path:
    pub = build_publication(store, MODEL, license="cc-by-4.0")
    return write_publication(pub, tmp_path_factory.mktemp("out") / "published", store)


def run_main(*argv) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:
        return e.code


def one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".dormant-report.json"
    }


# ---- what it holds ----


def test_a_publication_is_a_store_of_the_series_current_results(store, published):
    views = open_views(store, MODEL)
    current = {r["file_key"] for v in views for r in v.checkpoints}
    heads = {p.stem for p in (published / "head_scores").rglob("*.parquet")}
    assert heads == current and STALE_KEY not in heads  # the stale result (older taus) is left out
    assert not (published / "input_scores").exists()  # per-input scores only with --with-inputs
    manifest = read_table(published, "checkpoints", MODEL).to_pylist()
    assert {r["file_key"] for r in manifest} == current
    assert not any(r["input_scores_kept"] or r["input_scores_sha256"] for r in manifest)
    for p in (published / "head_scores").rglob("*.parquet"):  # result files byte for byte
        assert p.read_bytes() == next((store / "head_scores").rglob(p.name)).read_bytes()
    assert damaged_files(published, verify=True) == []  # its manifest and checksum record agree with its files
    # the same series: its calibration sets, taus and checkpoints in order
    again = open_views(published, MODEL)
    assert [(v.calibration_id, v.taus_id, v.revisions, v.taus) for v in again] == [
        (v.calibration_id, v.taus_id, v.revisions, v.taus) for v in views
    ]
    for a, b in zip(views, again, strict=True):
        assert a.head_scores().equals(b.head_scores()) and a.transitions().equals(b.transitions())
        assert a.histories().equals(b.histories())


def test_its_findings_are_the_source_stores(store, published):
    for fn in (None, "ahon_ln"):
        here, there = series_findings(store, MODEL, fn), series_findings(published, MODEL, fn)
        assert findings_record(here) == findings_record(there)
    record = findings_record(series_findings(store, MODEL))
    assert record["input_dependence"]["noise_floor"] is not None  # two sets with their per-input bits: measured
    table = pq.read_table(next((published / "findings").rglob("*.parquet"))).to_pylist()
    row = {r["quantity"]: r for r in table if r["finding"] == "transitions"}
    assert row["ever_changed"]["value"] == record["transitions"]["ever_changed"]["value"]
    assert row["ever_changed"]["method"] == record["transitions"]["ever_changed"]["method"]
    assert row["ever_changed"]["k"] == record["transitions"]["ever_changed"]["k"]
    assert {r["finding"] for r in table} == {"series", "emergence", "transitions", "input_dependence"}
    assert {r["taus_id"] for r in table} == {open_views(store, MODEL)[0].taus_id}


def test_its_report_draws_the_same_figures(store, published, tmp_path):
    from dormant_tasks.reporting import render_report

    a = render_report(store, MODEL, out_dir=tmp_path / "a")
    b = render_report(published, MODEL, out_dir=tmp_path / "b")
    assert sorted(a.figures) == sorted(b.figures) and a.figures
    for name, (png, _svg) in a.figures.items():
        assert png.read_bytes() == b.figures[name][0].read_bytes(), name
    assert a.summary_md.read_text() == b.summary_md.read_text()


def test_the_same_store_gives_byte_identical_files(store, published, tmp_path):
    """Another copy of the store, in another folder, later (other mtimes): the same bytes, file for file."""
    copy = tmp_path / "elsewhere" / "store"
    shutil.copytree(store, copy)
    again = write_publication(build_publication(copy, MODEL, license="cc-by-4.0"), tmp_path / "again", copy)
    assert files_of(again) == files_of(published)
    assert str(tmp_path) not in json.dumps({k: v.decode(errors="replace") for k, v in files_of(again).items()})


def test_with_inputs_publishes_the_per_input_scores_and_says_their_size(store, tmp_path):
    pub = build_publication(store, MODEL, license="cc-by-4.0", with_inputs=True)
    kept = {p.name: p.stat().st_size for p in (store / "input_scores").rglob("*.parquet")}
    assert pub.input_bytes == sum(kept.values())  # what --with-inputs adds, said before anything is written
    out = write_publication(pub, tmp_path / "with", store)
    assert {p.name for p in (out / "input_scores").rglob("*.parquet")} == set(kept)
    assert read_table(out, "input_scores", MODEL).equals(read_table(store, "input_scores", MODEL))
    without = build_publication(store, MODEL, license="cc-by-4.0")
    assert without.input_bytes == pub.input_bytes and pub.size - without.size >= sum(kept.values())


def test_the_record_lists_every_file_with_its_sha256(published):
    record = json.loads((published / PUBLISHED).read_text())
    import hashlib

    listed = {p: hashlib.sha256((published / p).read_bytes()).hexdigest() for p in record["files"]}
    assert listed == record["files"]
    assert set(record["files"]) == set(files_of(published)) - {PUBLISHED}
    assert record["license"] == "cc-by-4.0" and record["model_id"] == MODEL


# ---- read-only ----


def test_a_published_store_refuses_every_write(published, capsys):
    for use in ("writes", "updates"):
        with pytest.raises(StoreError, match="published series"):
            check_store_path(published, use)
    with pytest.raises(StoreError, match="published series"):
        store_folder(published, create=True)
    with pytest.raises(StoreError, match="published series"):
        write_table(published, "taus", [], file_key="taus", model_id=MODEL)
    from dormant_tasks.outputs import record_comparison
    from dormant_tasks.store import hold_series

    with pytest.raises(StoreError, match="published series"), hold_series(published, MODEL):
        pass
    with pytest.raises(StoreError, match="published series"):
        record_comparison(published, published.parent / "cmp", [MODEL])
    before = files_of(published)
    for argv in (
        ("track", "--model", "test-org/tiny-series", "--store", published),
        ("store", "repair", "--store", published),
        ("store", "gc", "--store", published),
        ("store", "upgrade", "--store", published),
    ):
        err = one_line_error(capsys, run_main(*argv))
        assert "published series" in err and "read-only" in err, err
    assert files_of(published) == before and not (published / "_locks").exists()


def test_a_hub_store_is_refused_by_every_command_that_writes_before_the_hub_is_asked(capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing answers there: a refusal asks no Hub
    for argv in (["track", "--model", MODEL], ["store", "repair"], ["evaluate", "--model", MODEL, "--series"]):
        err = one_line_error(capsys, run_main(*argv, "--store", "hf://datasets/lab/heads"))
        assert "published on the Hub: it is read-only" in err, err
    err = one_line_error(capsys, run_main("status", "--store", "hf://models/lab/x"))
    assert "write hf://datasets/ORG/NAME" in err


def test_a_hub_that_does_not_answer_is_one_line(tmp_path, monkeypatch):
    from dormant_tasks.publishing import open_published

    monkeypatch.setenv("DORMANT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(StoreError, match="the Hub does not answer .* and no copy is cached"):
        open_published("hf://datasets/lab/heads", endpoint="http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(StoreError, match="HF_HUB_OFFLINE is set and no copy is cached"):
        open_published("hf://datasets/lab/heads")


def test_the_reading_commands_read_a_published_folder(published, capsys, tmp_path):
    assert run_main("status", "--store", published) == 0
    assert "test-org/tiny-series: 4 checkpoints" in capsys.readouterr().out
    assert run_main("findings", "--store", published, "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["model_id"] == MODEL
    code = run_main("compare", "--store", published, "--model", f"{MODEL},{MODEL}", "--reports-dir", tmp_path / "c")
    assert code in (0, 2)  # the store is not written either way (its comparisons index is refused)
    assert not (published / "comparisons.json").exists()


# ---- the card ----


def card_header(folder: Path) -> dict:
    text = (folder / "README.md").read_text()
    return yaml.safe_load(text.split("---\n")[1])


def test_the_card_names_what_a_reader_needs(store, published):
    header = card_header(published)
    assert header["license"] == "cc-by-4.0"
    configs = {c["config_name"]: c["data_files"] for c in header["configs"]}
    for name in ("findings", "head_scores", "checkpoints", "transitions", "head_histories"):
        files = sorted(published.glob(configs[name]))
        assert files and all(f.suffix == ".parquet" for f in files), name
    text = (published / "README.md").read_text()
    from dormant_tasks import __version__

    view = open_views(store, MODEL)[0]
    for needed in (MODEL, "2504.03889", "@misc{", __version__, "cal-b", view.calibration_id, view.revisions[-1]):
        assert needed in text, needed
    for fn, tau in view.taus.items():
        assert f"| {fn} |" in text and f"{tau.value:.6g}" in text
    for name in configs:
        assert f'load_dataset("ORG/NAME", "{name}", split="train")' in text
        assert f'pd.read_parquet("hf://datasets/ORG/NAME/{name}")' in text
    assert (
        f"FROM 'hf://datasets/ORG/NAME/head_scores/*/*.parquet'\nWHERE calibration_id = '{view.calibration_id}'" in text
    )


def test_the_cards_duckdb_recipe_gives_the_tools_fractions_on_the_primary_set(published):
    """The card's query, run on the folder, gives the API's dormant fraction per checkpoint (the primary set, never
    a mean over the sets)."""
    import duckdb

    import dormant_tasks

    text = (published / "README.md").read_text()
    query = text.split("```sql\n")[1].split(";")[0].replace("hf://datasets/ORG/NAME", str(published))
    series = dormant_tasks.open_store(published)[MODEL]
    steps = dict(zip(series.checkpoints().revision, series.checkpoints().step, strict=True))
    tool = {int(steps[r]): float(v) for r, v in series.masks("ahon_ln").mean(axis=1).items()}
    rows = duckdb.sql(query).fetchall()
    assert {step: frac for fn, step, _, frac in rows if fn == "ahon_ln"} == pytest.approx(tool)


def test_a_repo_id_is_named_in_the_recipes(store):
    pub = build_publication(store, MODEL, license="mit", repo_id="lab/series-heads")
    text = pub.files["README.md"].decode()
    assert 'load_dataset("lab/series-heads", "findings"' in text and "ORG/NAME" not in text


@pytest.mark.slow
def test_datasets_loads_every_config_of_a_published_folder_offline(published, tmp_path):
    """`datasets.load_dataset(folder, config)` as a reader runs it, offline, in a process of its own (the offline
    flag is read when datasets is imported): every config gives the rows its Parquet files hold."""
    configs = [c["config_name"] for c in card_header(published)["configs"]]
    code = (
        "import json, sys\nfrom datasets import load_dataset\n"
        f"print(json.dumps({{c: load_dataset({str(published)!r}, c, split='train').num_rows for c in {configs!r}}}))"
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    header = {c["config_name"]: c["data_files"] for c in card_header(published)["configs"]}
    assert rows == {c: sum(pq.read_metadata(p).num_rows for p in published.glob(header[c])) for c in configs}
    assert rows["head_scores"] > 0 and rows["findings"] > 0


# ---- what a user can get wrong ----


def test_a_licence_is_asked_for_never_guessed():
    for missing in (None, "", "  "):
        with pytest.raises(ConfigError, match="--license is required"):
            check_license(missing)
    with pytest.raises(ConfigError, match='did you mean "cc-by-4.0"'):
        check_license("CC-BY-4.0")
    assert check_license("cc-by-4.0") == "cc-by-4.0"


@pytest.mark.parametrize("bad", ["noslash", "a/b/c", "org/--x", "org/a..b", "/name", "org/", "o rg/name", "org/n-"])
def test_a_malformed_repo_id_is_refused(bad):
    with pytest.raises(ConfigError, match="not a dataset repo id"):
        check_dataset_repo(bad)


def test_cli_refusals_are_one_line_and_write_nothing(store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token file
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "out"
    cases = {
        ("--out", out): "the following arguments are required: --license",
        ("--out", out, "--license", "cc-by-4.0", "--model", "other/series"): "not in the store",
        ("--repo-id", "not a repo", "--license", "mit"): "not a dataset repo id",
        ("--repo-id", "lab/name", "--license", "mit"): "no Hugging Face token",
        ("--out", store / "inside", "--license", "mit"): "inside the store",
    }
    for args, expected in cases.items():
        err = one_line_error(capsys, run_main("publish", "--store", store, *args))
        assert expected in err, err
    assert not out.exists() and not (store / "inside").exists()
    err = one_line_error(capsys, run_main("publish", "--store", store, "--license", "mit"))
    assert "name where to publish: --repo-id ORG/NAME (a Hub dataset repo) or --out DIR" in err


def test_an_out_folder_holding_other_files_is_refused(store, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    err = one_line_error(capsys, run_main("publish", "--store", store, "--out", out, "--license", "mit"))
    assert "did not write" in err and (out / "notes.txt").read_text() == "mine"
    # its own folder is written again (replaced whole)
    fresh = tmp_path / "fresh"
    assert run_main("publish", "--store", store, "--out", fresh, "--license", "mit") == 0
    assert run_main("publish", "--store", store, "--out", fresh, "--license", "mit") == 0
    assert "published:" in capsys.readouterr().out


# ---- a damaged publication ----


def _flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def test_status_verify_names_every_damaged_file_of_a_publication_and_says_to_publish_again(published, tmp_path, capsys):
    """Issue 62 item 2: a flipped byte in the findings table or the card of a publication (files no store table
    holds) passed `status --verify` ("every file matches"); every file is now checked against `_published.json`,
    each damaged one named, exit 2, and the advice is to publish again (or fetch again), never `store repair` (which
    a publication refuses)."""
    pub = Path(shutil.copytree(published, tmp_path / "pub"))
    assert run_main("status", "--store", pub, "--verify") == 0
    assert "verified: every file matches" in capsys.readouterr().out
    record = json.loads((pub / PUBLISHED).read_text())["files"]
    findings = next(p for p in record if p.startswith("findings/"))
    head = next(p for p in record if p.startswith("head_scores/"))
    for path in (findings, "README.md", head):
        _flip(pub / path)

    assert run_main("status", "--store", pub, "--verify") == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert "verified" not in out
    for path in (findings, "README.md", head):
        (line,) = [x for x in lines if f"damaged file {path} " in x]
        assert "_published.json" in line or "checksum" in line, line
        assert "dormant publish" in line and "store repair" not in line, line
    # plain status (no --verify) reads every file but the per-checkpoint results: the card and findings are named
    assert run_main("status", "--store", pub) == 2
    err = capsys.readouterr().err
    assert f"damaged file {findings} " in err and "damaged file README.md " in err and head not in err


def test_a_damaged_publication_read_by_a_command_says_to_publish_again(published, tmp_path, capsys):
    """The read error of a damaged file names the fix a publication takes (publish again, or fetch again)."""
    pub = Path(shutil.copytree(published, tmp_path / "pub"))
    record = json.loads((pub / PUBLISHED).read_text())["files"]
    manifest = next(p for p in record if p.startswith("checkpoints/"))
    (pub / manifest).write_bytes((pub / manifest).read_bytes()[:-9])  # cut short: its footer is gone
    err = one_line_error(capsys, run_main("findings", "--store", pub))
    assert "is damaged" in err and "dormant publish" in err and "store repair" not in err, err
