"""What produced a series: the request of every run (`<store>/requests/series=<slug>/<request_id>.json`) and
the source the series is tracked from (`<store>/sources/series=<slug>.json`, its identity: a second source
under the same name is refused)."""

from __future__ import annotations

import json
from pathlib import Path

from dormant_tasks.atomic import atomic_file, write_errors
from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.store.layout import REQUESTS, SOURCES, is_store, safe_file_key, store_folder
from dormant_tasks.store.lock import series_lock


def request_path(store, model_id: str, request_id: str) -> Path:
    return Path(store) / REQUESTS / f"series={series_slug(model_id)}" / f"{safe_file_key(request_id)}.json"


def write_request(store, model_id: str, request) -> Path:
    """Save a run's request (`requests.TrackRequest`/`EvalRequest`) as JSON beside its results; rows that the run
    writes carry its `request_id`. The same request twice is the same file."""
    source = getattr(request, "source_identity", None)  # a track request: the series' source, recorded once
    if source is not None:
        record_source(store, model_id, source)
    path = request_path(store_folder(store, create=True), model_id, request.request_id)
    with write_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:
        f.write(request.to_json().encode())
    return path


def stored_requests(store, model_id: str) -> list[str]:
    """The JSON of every request saved for a series, the newest first (none without a store)."""
    if not is_store(store):
        return []
    folder = request_path(store, model_id, "x").parent
    paths = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    return [p.read_text(encoding="utf-8") for p in paths]


def local_sources_named(store, name: str) -> list[str]:
    """The existing local folders, named `name`, of the series this store tracked (read from its saved track
    requests): what a bare series name given as `--model` may stand for."""
    try:
        saved = stored_requests(store, name)
    except StoreError:  # a name that cannot name a series
        return []
    found = set()
    for text in saved:
        try:
            data = json.loads(text)
        except ValueError:
            continue
        source = data.get("source") if isinstance(data, dict) and data.get("kind") == "track" else None
        if isinstance(source, str) and Path(source).name == name and Path(source).is_dir():
            found.add(source)
    return sorted(found)


def read_request_json(store, model_id: str, request_id: str) -> str:
    path = request_path(store_folder(store), model_id, request_id)
    if not path.is_file():
        raise StoreError(f"no request {request_id!r} of {model_id!r} in {store}: see {path.parent} for the saved ones")
    return path.read_text(encoding="utf-8")


def source_path(store, model_id: str) -> Path:
    return Path(store) / SOURCES / f"series={series_slug(model_id)}.json"


def recorded_source(store, model_id: str) -> str | None:
    """The source a series is tracked from ("hub:ORG/NAME" or "local:/resolved/folder"); None before its first
    write, and for a series stored before sources were recorded (adopted by its next run: `record_source`)."""
    try:
        return str(json.loads(source_path(store, model_id).read_text(encoding="utf-8"))["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_source(store, model_id: str, source: str) -> None:
    """A ConfigError when the store keeps `model_id` from another source: two sources are never one series. A
    series stored before sources were recorded is known by the sources of its saved track requests."""
    if not is_store(store):
        return
    recorded = recorded_source(store, model_id)
    known = {recorded} if recorded is not None else _saved_sources(store, model_id)
    if known and source not in known:
        moved = (
            f"; if the folder moved, delete {source_path(store, model_id)} to adopt the new place" if recorded else ""
        )
        raise ConfigError(
            f"the store keeps a series {model_id!r} tracked from {', '.join(sorted(k.split(':', 1)[1] for k in known))}, "
            f"not from {source.split(':', 1)[1]}: add --series-name NAME to store this one apart (never merged){moved}"
        )


def _saved_sources(store, model_id: str) -> set[str]:
    """The sources of a series' saved track requests (local ones are saved absolute), as `record_source` names them."""
    found = set()
    for text in stored_requests(store, model_id):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        src = data.get("source") if isinstance(data, dict) and data.get("kind") == "track" else None
        if isinstance(src, str):
            found.add(f"local:{Path(src).resolve()}" if src.startswith("/") else f"hub:{src}")
    return found


def record_source(store, model_id: str, source: str) -> None:
    """Record the series' source at its first write (or adopt it for a series stored before sources were
    recorded); a different source is refused (`check_source`), also between two runs started at once."""
    root = store_folder(store, create=True)
    with series_lock(root, model_id):
        check_source(root, model_id, source)
        path = source_path(root, model_id)
        if path.is_file():
            return
        with write_errors(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            f.write((json.dumps({"model_id": model_id, "source": source}, indent=1) + "\n").encode())


def series_of_source(store, identity: str) -> str | None:
    """The series the store keeps from the source of this identity (`CheckpointSource.identity`), or None."""
    folder = Path(store) / SOURCES
    for path in sorted(folder.glob("series=*.json")) if folder.is_dir() else ():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and saved.get("source") == identity:
            return str(saved.get("model_id"))
    return None


def series_name_of(store, identity: str, name: str) -> str:
    """The stored series that a source names: the series the store records its `identity` as the source of
    (tracked under `--series-name`), else its own `name` (`CheckpointSource.name`: the Hub id, the folder's name)."""
    return series_of_source(store, identity) or name
