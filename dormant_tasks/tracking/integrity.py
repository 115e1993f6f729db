"""What the integrity audit set aside, in the store (docs/DATA_CONTRACT.md "set_aside_checkpoints"): the branches a
track run does not score as points of training, recorded by `record_audit` before anything is downloaded, read by
`SeriesView` (which leaves them out of what is current), `dormant status`, the report and the findings.

A store tracked before the audit: `set_aside_stored_duplicates` finds stored results of one content (the same
`commit`, a local folder's content hash) at different steps, and records the later copies, so that the next
derivation leaves them out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dormant_tasks.checkpoints import Revision
from dormant_tasks.store import Table, is_store, read_table, series_lock, write_request, write_table
from dormant_tasks.tracking.failures import failed_checkpoints, record_failure
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult, common_columns, known_commit

SET_ASIDE_KEY = "set_aside"  # file key of a series' one set_aside_checkpoints file


def set_aside_checkpoints(store, model_id: str) -> list[dict]:
    """The series' branches the audit set aside (kept or not), in series order (none without a store)."""
    if not is_store(store):
        return []
    rows = read_table(store, Table.set_aside_checkpoints, model_id=model_id).to_pylist()
    return sorted(rows, key=lambda r: (r["stage"], r["step"], r["revision"]))


def _row(model_id: str, revision: Revision, kind: str, other: str | None, reason: str, kept: bool, request_id) -> dict:
    return {
        **common_columns(model_id, revision),
        "commit": known_commit(revision),
        "kind": kind,
        "duplicate_of": other,
        "reason": reason,
        "kept": kept,
        "set_aside_at": datetime.now(UTC),
        "request_id": request_id,
    }


def write_set_aside(store, model_id: str, rows: list[dict], request: TrackRequest | None = None) -> None:
    """Record `rows` (replacing the rows of the same revisions) under the series' lock."""
    with series_lock(store, model_id):
        names = {r["revision"] for r in rows}
        kept = [r for r in set_aside_checkpoints(store, model_id) if r["revision"] not in names]
        if request is not None:
            write_request(store, model_id, request)
        write_table(store, Table.set_aside_checkpoints, kept + rows, file_key=SET_ASIDE_KEY, model_id=model_id)


def record_audit(request: TrackRequest, plan) -> list[CheckpointResult]:
    """Record what the run's audit set aside (`plan.set_aside`: full duplicates and duplicate steps) and what it
    refused (`plan.refused`: partial duplicates, incomplete branches, as failed with the reason); returns the
    refused ones as failed results of this run. With `keep_duplicates` both are tracked, and recorded here as
    kept (marked, with their reason): a refused branch so kept is set aside again by a later run without it.
    Nothing is written when the records say so already."""
    listed = {r.name: r for r in plan.listed_all}
    stored = {r["revision"]: r for r in set_aside_checkpoints(request.store, request.model_id)}
    keep = bool(request.keep_duplicates)
    marked = {**plan.set_aside, **{n: f for n, f in plan.refused.items() if keep or n in stored}}
    rows = [
        _row(request.model_id, listed[name], flag.kind, flag.other, flag.text, keep, request.request_id)
        for name, flag in marked.items()
        if name in listed
        and (name not in stored or (stored[name]["reason"], stored[name]["kept"]) != (flag.text, keep))
    ]
    if rows:
        write_set_aside(request.store, request.model_id, rows, request)
    if keep:
        return []
    failed_before = {r["revision"]: r["reason"] for r in failed_checkpoints(request.store, request.model_id)}
    results = []
    for name, flag in plan.refused.items():
        reason = f"{flag.kind}: {flag.text}"
        if failed_before.get(name) == reason:
            results.append(
                CheckpointResult(listed[name], known_commit(listed[name]) or "", False, {}, {}, failed=reason)
            )
        else:
            results.append(record_failure(request, listed[name], reason))
    return results


def set_aside_label(row: dict) -> str:
    """What a `set_aside_checkpoints` row says, short: 'duplicate of X', 'partial duplicate of X', or
    'incomplete: <the missing or empty file>' (a row that names no other branch gives its reason)."""
    return f"{row['kind']} of {row['duplicate_of']}" if row["duplicate_of"] else f"{row['kind']}: {row['reason']}"


def set_aside_stored_duplicates(store, model_id: str) -> list[str]:
    """A store tracked before the audit: stored results of one content (`commit`) at different steps; each
    later copy (by series order) is recorded as a duplicate of the earliest. Returns the revisions recorded."""
    from dormant_tasks.tracking.series import checkpoint_sort_key

    if not is_store(store):
        return []
    rows = read_table(store, Table.checkpoints, model_id=model_id).to_pylist()
    first: dict[str, dict] = {}
    known = {r["revision"] for r in set_aside_checkpoints(store, model_id)}
    new = []
    for r in sorted(rows, key=checkpoint_sort_key):
        if r["revision"] == "main":  # main is the final model: equal to its last step, as expected
            continue
        original = first.setdefault(r["commit"], r)
        if original["revision"] == r["revision"] or r["revision"] in known:
            continue
        if (original["stage"], original["step"]) == (r["stage"], r["step"]):
            kind = "duplicate step"
        else:
            kind = "duplicate"
        reason = (
            f"stored with the same content hash as {original['revision']} ({original['revision']} is kept: the "
            "earliest step of its copies); not a point of training"
        )
        revision = Revision(r["revision"], r["stage"], r["step"], r["tokens"], r["ingredient"], commit=r["commit"])
        new.append(_row(model_id, revision, kind, original["revision"], reason, False, r["request_id"]))
        known.add(r["revision"])
    if new:
        write_set_aside(store, model_id, new)
    return [r["revision"] for r in new]


def shared_weights(store, model_ids: list[str]) -> str | None:
    """Why `model_ids` cannot be seeds of one recipe: two of them hold the same weights (the same stored
    `commit`: a local folder's content hash, a Hub commit) at a step past initialisation, or are the same
    series; None when every one is its own. Initialisation (step 0) may be shared: some seed studies vary only
    the data order."""
    held: dict[str, tuple[str, str]] = {}  # commit -> (series, revision)
    for model_id in dict.fromkeys(model_ids):
        rows = read_table(
            store, Table.checkpoints, model_id=model_id, columns=["revision", "step", "commit"]
        ).to_pylist()
        for r in {r["revision"]: r for r in rows}.values():
            if r["step"] == 0:
                continue
            other = held.setdefault(r["commit"], (model_id, r["revision"]))
            if other[0] != model_id:
                return (
                    f"{other[0]}@{other[1]} and {model_id}@{r['revision']} hold the same weights (content {r['commit'][:12]}): "
                    "seeds of one recipe share nothing past initialisation; drop the copy from --seed-group"
                )
    if len(set(model_ids)) < len(model_ids):
        twice = next(m for m in model_ids if model_ids.count(m) > 1)
        return f"{twice} is named twice: each seed is one series; drop the repeat from --seed-group"
    return None
