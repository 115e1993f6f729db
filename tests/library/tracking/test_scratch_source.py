"""A checkpoint source added in one module (docs/CHECKPOINTS.md, "Checkpoint sources"): `scratch://BUCKET` serves
checkpoints that a bucket folder keeps under opaque names, renamed by its index to branch names, and fetched by
copying each into a cache that eviction empties again. A tiny series tracked through it (the tracker's steps, no
Prefect) is scored, ordered, audited, evicted and dry-run as the same checkpoints tracked from a plain folder."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dormant_tasks.checkpoints import CheckpointSource, local_content_hash, register_source, source_for
from dormant_tasks.checkpoints.hub import is_loading_file
from dormant_tasks.checkpoints.sources import AuditListing, ListedNames, LocalFolder, unregister_source
from dormant_tasks.errors import ConfigError
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import TrackRequest, format_dry_run, parse_bandwidth, plan_dry_run, series_state
from tests.builders.series import save_random_series
from tests.builders.track import track_steps

pytestmark = [pytest.mark.slow]  # one tiny series tracked twice: ~20 s

NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K"]
INDEX = "index.json"  # {branch name: the bucket's opaque folder name}


@register_source("scratch")
class ScratchBucket(CheckpointSource):
    """`scratch://FOLDER`: FOLDER/index.json maps branch names to opaque subfolders; a fetch copies one into the
    run's cache (so the run sees a download it must evict), as an object store would."""

    is_remote = True
    kind = "scratch bucket"
    listed_as = "entries of index.json"
    fetched: list[str] = []  # every copy a fetch made, in order (the test reads it)

    @property
    def bucket(self) -> Path:
        return Path(self.location)

    def _index(self) -> dict[str, str]:
        return json.loads((self.bucket / INDEX).read_text())

    def listing(self) -> ListedNames:
        # pinned as a Hub branch is, to the content hash of what it serves (a rerun knows what it has stored);
        # no folder: its checkpoints are fetched, never read in place
        index = self._index()
        return ListedNames(list(index), {name: local_content_hash(self.bucket / obj) for name, obj in index.items()})

    def audit_listing(self, revisions, workers=None, cache=True) -> AuditListing:
        index = self._index()  # the bucket's objects hashed where they lie, as a local folder's
        return LocalFolder(str(self.bucket)).audit_listing(
            [replace(r, path=self.bucket / index[r.name]) for r in revisions]
        )

    def fetch(self, revision, cache_dir=None, retries=3, backoff_s=2.0) -> Path:
        copy = Path(cache_dir) / revision.name
        if not copy.is_dir():  # (fetched ahead of its scoring, it is in the cache when the scoring asks)
            shutil.copytree(self.bucket / self._index()[revision.name], copy)
            self.fetched.append(revision.name)
        return copy

    def evict(self, revision, path, cache_dir=None) -> int:
        size = sum(p.stat().st_size for p in path.iterdir())
        shutil.rmtree(path)
        return size

    def cache_free(self, cache_dir=None):
        return Path(cache_dir), shutil.disk_usage(Path(cache_dir).parent).free


@pytest.fixture(scope="module", autouse=True)
def _scratch_registered():
    yield
    unregister_source("scratch")  # the registry is the process's: leave it as the other modules find it


def _bucket(tmp_path: Path, tokenizer) -> tuple[Path, Path]:
    """The same three checkpoints as a plain series folder and as a bucket (opaque names, listed in reverse)."""
    series = save_random_series(tmp_path / "plain-series", tokenizer, NAMES)
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    index = {}
    for i, name in enumerate(reversed(NAMES)):
        shutil.copytree(series / name, bucket / f"object-{i}")
        index[name] = f"object-{i}"
    (bucket / INDEX).write_text(json.dumps(index))
    return series, bucket


def _request(source: str, tmp_path: Path, **kw) -> TrackRequest:
    return TrackRequest(
        source=source,
        store=str(tmp_path / "store"),
        score_fns=("ahon_ln", "awft"),
        report=False,
        cache_dir=str(tmp_path / "cache"),
        **kw,
    )


def _scores(store: Path, model_id: str) -> dict:
    rows = read_table(store, "head_scores").to_pylist()
    return {
        (r["revision"], r["score_fn"], r["layer"], r["head_index"]): r["score"]
        for r in rows
        if r["model_id"] == model_id
    }


def test_an_unknown_scheme_is_one_line_with_the_registered_ones():
    with pytest.raises(ConfigError, match=r'scrach:// \(did you mean "scratch"\?\); use one of .*scratch://') as e:
        source_for("scrach://bucket")
    assert "\n" not in str(e.value)
    assert isinstance(source_for("scratch://somewhere"), ScratchBucket)
    with pytest.raises(ValueError, match="already ScratchBucket's"):
        register_source("scratch")(type("Other", (ScratchBucket,), {}))


def test_a_series_tracked_through_a_registered_source_is_the_folder_series(tmp_path, tiny_tokenizer):
    series, bucket = _bucket(tmp_path, tiny_tokenizer)
    (tmp_path / "cache").mkdir()
    ScratchBucket.fetched.clear()
    request = _request(f"scratch://{bucket}", tmp_path)
    assert request.model_id == "bucket" and request.source_identity == f"scratch:{bucket}"

    dry = plan_dry_run(series_state(request, cache=False), parse_bandwidth("100MB/s"))
    loading = sum(p.stat().st_size for p in bucket.glob("object-*/*") if is_loading_file(p.name))
    assert not dry.is_local and dry.download_bytes == loading > 0, format_dry_run(dry)  # the audit listing's sizes
    assert format_dry_run(dry)[0].startswith("dry run: bucket (scratch bucket scratch://")
    assert ScratchBucket.fetched == []  # a dry run fetches nothing

    result = track_steps(request)
    assert not result.failed
    store = tmp_path / "store"
    assert sorted(ScratchBucket.fetched) == sorted(NAMES)  # each copied once (the next one while one is scored)
    assert list((tmp_path / "cache").iterdir()) == []  # and evicted once loaded
    manifest = read_table(store, "checkpoints").to_pylist()
    assert [r["revision"] for r in sorted(manifest, key=lambda r: r["step"])] == NAMES
    assert json.loads(next((store / "sources").glob("*.json")).read_text())["source"] == f"scratch:{bucket}"
    ScratchBucket.fetched.clear()
    assert track_steps(request).n_checkpoints == 3 and ScratchBucket.fetched == []  # a rerun: stored, not fetched

    track_steps(_request(str(series), tmp_path))  # the same checkpoints, as a folder: another series, same scores
    scratch, plain = _scores(store, "bucket"), _scores(store, "plain-series")
    assert len(scratch) == 3 * 2 * 2 * 4 and scratch.keys() == plain.keys()
    assert all(scratch[k] == pytest.approx(plain[k], rel=1e-6, nan_ok=True) for k in scratch)
    commits = {r["model_id"]: {} for r in read_table(store, "checkpoints").to_pylist()}
    for r in read_table(store, "checkpoints").to_pylist():
        commits[r["model_id"]][r["revision"]] = r["commit"]
    assert commits["bucket"] == commits["plain-series"]  # a fetched copy's content hash is the folder's
