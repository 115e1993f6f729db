"""What a publication holds (`dormant publish`, docs/PUBLISHING.md): the store of the one series
(`store.publication_files`), the findings table, the dataset card and the record of what the tool wrote
(`_published.json`). The same store gives the same bytes: nothing depends on the clock, the host or the folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.findings import findings_table, series_findings
from dormant_tasks.reporting import resolve_model_id
from dormant_tasks.statistics import FDR, FDR_METHOD
from dormant_tasks.store import (
    PUBLISHED,
    SCHEMA_VERSION,
    Table,
    damaged_files,
    publication_files,
    read_table,
    series_files,
)
from dormant_tasks.tracking import decided_file, open_views
from dormant_tasks.version import __version__

CARD = "README.md"
FINDINGS = "findings"  # the findings table's folder (a config of its own)
RECORD_VERSION = 1


@dataclass(frozen=True)
class Publication:
    """A publication of one series: its files by path in the repo (a store file to copy, or bytes), in path order."""

    model_id: str
    files: dict[str, Path | bytes]
    n_checkpoints: int
    with_inputs: bool
    input_bytes: int  # the per-input files' bytes in the store: published with `with_inputs`, else left out
    _digests: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def size(self) -> int:
        return sum(size_of(c) for c in self.files.values())

    def digest(self, path: str) -> tuple[str, str]:
        """(sha256, git blob oid) of one file: how the Hub names its content (an LFS file's sha256, a git blob's
        oid), to tell which files a repo already holds."""
        if path not in self._digests:
            self._digests[path] = content_digests(self.files[path])
        return self._digests[path]

    def summary(self) -> str:
        """What it holds and weighs, said before anything is written or sent."""
        line = (
            f"{self.model_id}: {self.n_checkpoints} checkpoints, {len(self.files)} files, {self.size / 2**20:.2f} MiB"
        )
        inputs = f"{self.input_bytes / 2**20:.2f} MiB"
        if self.with_inputs:
            return line + f" (per-input scores and items: {inputs} of it)"
        if self.input_bytes:
            return (
                line
                + f"; per-input scores and items ({inputs} in the store) are not published: --with-inputs adds them"
            )
        return line

    def record(self) -> dict:
        """The `_published.json` record it holds."""
        return json.loads(as_bytes(self.files[PUBLISHED]))


def size_of(content: Path | bytes) -> int:
    return len(content) if isinstance(content, bytes) else content.stat().st_size


def as_bytes(content: Path | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.read_bytes()


def content_digests(content: Path | bytes) -> tuple[str, str]:
    """(sha256, git blob sha1) of a file's content, read in chunks."""
    sha, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size_of(content))
    if isinstance(content, bytes):
        sha.update(content)
        git.update(content)
    else:
        with content.open("rb") as f:
            while chunk := f.read(16 * 2**20):
                sha.update(chunk)
                git.update(chunk)
    return sha.hexdigest(), git.hexdigest()


def build_publication(
    store,
    model_id: str | None,
    *,
    license: str,
    repo_id: str | None = None,
    with_inputs: bool = False,
    score_fns: Iterable[str] | None = None,
) -> Publication:
    """The publication of `model_id` (the store's only series when None): a store of that series holding its
    current results, the findings table of `score_fns` (default: the function `dormant findings` states), the
    dataset card (naming `repo_id` in its recipes, `ORG/NAME` when it is not known yet) and the tool's record.
    StoreError when the series was never tracked or a file of it is damaged."""
    from dormant_tasks.publishing.card import dataset_card

    license = check_license(license)
    model_id = resolve_model_id(store, model_id)
    damage = damaged_files(store, model_id, verify=True)
    if damage:
        d = damage[0]
        raise StoreError(
            f"store file {d.path} is damaged ({d.reason}); run `dormant store repair --store {store}`, then publish "
            "again (a publication copies the store's files: it never spreads a damaged one)"
        )
    views = open_views(store, model_id)
    if not views:
        from dormant_tasks.tracking import SeriesView

        SeriesView.open(store, model_id)  # the StoreError that names what the store holds
    results = [row for view in views for row in view.checkpoints]
    current = {(view.taus_id, view.calibration_id) for view in views}
    functions: list[str | None] = [*(score_fns or [])] or [None]  # None: the function `dormant findings` states
    found = [series_findings(store, model_id, fn, FDR, fdr_method=FDR_METHOD) for fn in functions]
    pending = {(Table.transitions, v.taus_id, v.calibration_id): decided_file(v) for v in views}  # an append's decision
    files = publication_files(
        store,
        model_id,
        results,
        current,
        with_inputs=with_inputs,
        tables={FINDINGS: findings_table(found)},
        derived={k: t for k, t in pending.items() if t is not None},
    )
    kept = {r["file_key"] for r in results if r["input_scores_kept"]}
    per_input = [p for p in series_files(store, Table.input_scores, model_id) if p.stem in kept]
    input_bytes = sum(p.stat().st_size for p in per_input + series_files(store, Table.evaluation_items, model_id))
    evaluations = read_table(store, Table.evaluations, model_id=model_id)
    files[CARD] = dataset_card(
        views, found, files, repo_id=repo_id, license=license, with_inputs=with_inputs, evaluations=evaluations
    ).encode()
    record = {
        "record_version": RECORD_VERSION,
        "model_id": model_id,
        "written_by": f"dormant-heads {__version__}",
        "schema_version": SCHEMA_VERSION,
        "license": license,
        "with_inputs": with_inputs,
    }
    digests = {path: content_digests(c) for path, c in files.items()}  # each file read once: the record, the upload
    record["files"] = {path: digests[path][0] for path in sorted(files)}
    files[PUBLISHED] = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
    n = len(views[0].checkpoints)
    return Publication(model_id, dict(sorted(files.items())), n, with_inputs, input_bytes, _digests=digests)


# The licence identifiers the Hub's dataset cards take most for data (its full list is longer: any other id is
# passed on as given, and the Hub's own check of the card answers for it).
COMMON_LICENSES = (
    "apache-2.0",
    "cc-by-4.0",
    "cc-by-sa-4.0",
    "cc-by-nc-4.0",
    "cc0-1.0",
    "mit",
    "odc-by",
    "odbl",
    "pddl",
    "other",
    "unknown",
)


def check_license(license: str | None) -> str:
    """The licence id the card states: asked for, never guessed. ConfigError when none is given or it is not
    spelled like one of the Hub's ids (lowercase letters, digits, `.`, `-`, `+`)."""
    from dormant_tasks.errors import did_you_mean

    if not license or not license.strip():
        raise ConfigError(
            "--license is required: name the licence the published results are under, as the Hub spells it "
            f"(e.g. {', '.join(COMMON_LICENSES[:5])}, or other); dormant-heads never picks one for you"
        )
    value = license.strip()
    if value.lower() != value or not all(c.isalnum() or c in ".-+" for c in value):
        raise ConfigError(
            f"--license {license!r} is not a licence id as the Hub spells it{did_you_mean(value.lower(), COMMON_LICENSES)}"
            f" (lowercase, e.g. {', '.join(COMMON_LICENSES[:5])})"
        )
    return value


def write_publication(pub: Publication, out, store) -> Path:
    """Write `pub` into the folder `out` (the repo's layout, for review or another uploader), published whole: a new
    or empty folder, or one this store's publication of the series wrote (`outputs`: nothing else is replaced)."""
    import shutil
    from pathlib import PurePosixPath

    from dormant_tasks.outputs import Owner, check_folder, staged

    owner = Owner.of("publication", store, pub.model_id)
    check_folder(out, owner, option="--out")
    with staged(out, owner, option="--out") as tmp:
        for path, content in pub.files.items():
            target = tmp.joinpath(*PurePosixPath(path).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                shutil.copyfile(content, target)
    return Path(out).resolve()
