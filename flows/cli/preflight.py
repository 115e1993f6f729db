"""The command line's cheap checks, run before any heavy import (`boundary.run_command`): the forms of `--model`
(a checkpoint folder, a series folder, a Hub id, a registered source's `scheme://`, a stored series' name), the
device, the store and reports folders, and the source's own cheap check (a folder there, one brief question to the
Hub). Each raises the error class the library raises for the same input, seconds earlier; what they decide (a
folder, a series name) comes from the library's own stdlib-only resolvers (`dormant_tasks.names`,
`dormant_tasks.checkpoints.source_for`, `dormant_tasks.store.layout.check_store_path`)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import unicodedata
import urllib.error
import urllib.request
from pathlib import Path

from dormant_tasks.atomic import cannot_create_in
from dormant_tasks.checkpoints import CheckpointSource, source_for
from dormant_tasks.devices import check_device_available
from dormant_tasks.errors import CheckpointError, ConfigError, StoreError
from dormant_tasks.extras import require_extra
from dormant_tasks.names import names_stored_series
from dormant_tasks.offline import task_data_offline
from dormant_tasks.requests import check_max_tokens
from dormant_tasks.store import check_store_path

from .publish import published_store

_CHECKPOINT_FILE = "config.json"
START_A_SERVER = (
    "start one with `prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api` "
    "(or `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)"
)
API_PROBE_S = 5.0  # a server that has not answered /health by then is taken as down (the error comes within 10 s)


def check_checkpoint_folder(value: str, path: Path) -> None:
    """CheckpointError when a local `--model` (`value`, at `path`) that must be one checkpoint (score, evaluate) is
    not: a series folder (its checkpoint subfolders named) or a folder without config.json. Reads one folder
    listing."""
    if (path / _CHECKPOINT_FILE).is_file():
        return
    checkpoints = sorted(
        (p.name for p in path.iterdir() if (p / _CHECKPOINT_FILE).is_file()),
        key=lambda name: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)],
    )
    if checkpoints:
        shown = ", ".join(checkpoints[:5]) + (f", ... ({len(checkpoints)} in all)" if len(checkpoints) > 5 else "")
        raise CheckpointError(
            f"--model {value} is a series folder, not one checkpoint; name one of its checkpoints ({shown}), "
            f"e.g. --model {path / checkpoints[-1]}"
        )
    raise CheckpointError(
        f"--model {value} has no {_CHECKPOINT_FILE}: name a checkpoint folder (config.json, weights and tokenizer) "
        "or a Hub repo id (org/name)"
    )


def series_name(value: str | None, store=None) -> str | None:
    """The stored series that `--model` names (the rule: `names.names_stored_series`): a stored series' name as
    is, even when a folder of that name is in the working directory; else a local folder is the series the store
    records it as the source of (`--series-name`), else its folder name; a Hub id as is. A folder whose name is a
    series the store keeps from another folder is refused: its report would be that other folder's, under this
    name."""
    if value is None:
        return value
    if store is not None and names_stored_series(value, stored_names(store)):
        return value
    if not Path(value).expanduser().is_dir():
        return value
    source = source_for(value)
    if store is None:
        return source.name
    from dormant_tasks.store import check_source, series_name_of

    name = series_name_of(store, source.identity, source.name)
    try:
        check_source(store, name, source.identity)
    except ConfigError:
        raise ConfigError(
            f"--model {value}: the store keeps no series tracked from this folder; its series {name} comes from "
            f"another folder of that name: pass --model {name} (its name, not a path) for that one, or track "
            f"{value} first with --series-name NAME"
        ) from None
    return name


def check_folder_name(value: str, source: CheckpointSource) -> None:
    """ConfigError when a local series' folder name cannot be its stored name (`names.series_slug`: a non-ASCII
    name, a leading '-'), naming `--series-name`, which stores it under another one."""
    from dormant_tasks.names import series_slug

    name = source.name
    try:
        series_slug(name)
    except StoreError:
        ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
        suggestion = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_name).strip("-.") or "my-series"
        raise ConfigError(
            f"--model {value}: its folder name {name!r} cannot name a stored series (letters, digits, '.', '_' and "
            f"'-' only, starting with a letter, digit or '_'); add --series-name NAME, e.g. --series-name {suggestion}"
        ) from None


def stored_names(store) -> list[str]:
    """The series a store keeps; none when `store` is not one yet (the command's own check says so)."""
    from dormant_tasks.store import is_store, list_models

    return list_models(store) if is_store(store) else []


def model_source(value: str, store) -> str:
    """A `--model` source: a folder, a Hub id or a `scheme://` source as given; a stored local series' name (a
    name that no source claims: no "/") -> its folder."""
    if store is None or "/" in value or source_for(value).folder is not None:
        return value
    if Path(store).is_dir():
        from dormant_tasks.store import recorded_source

        try:
            recorded = recorded_source(store, value)
        except StoreError:  # a name that cannot name a series
            recorded = None
        if recorded is not None and recorded.startswith("local:"):
            return recorded.removeprefix("local:")
    from dormant_tasks.store import local_sources_named

    sources = local_sources_named(store, value)
    if len(sources) > 1:
        raise ConfigError(
            f"--model {value}: the store keeps {len(sources)} local series of that name ({', '.join(sources)}); "
            "pass the folder"
        )
    return sources[0] if sources else value


def preflight(args: argparse.Namespace) -> None:
    """The checks that need no library: the device is visible, the store is a (writable) folder, a model folder
    exists, the Hub answers. Each raises the error class the library raises for the same input (ConfigError,
    StoreError, CheckpointError), seconds earlier."""
    check_environment(args.command)
    if args.command == "evaluate":
        require_extra("eval", "dormant evaluate")
    if getattr(args, "runner", None) == "dask":
        require_extra("cluster", "--runner dask")
    check_max_tokens(getattr(args, "max_tokens", None))  # `score` as `track` (its request checks it too)
    elsewhere = getattr(args, "address", None) or getattr(args, "device_elsewhere", False)
    if getattr(args, "device", None) is not None and not elsewhere:
        check_device_available(args.device)  # (an existing Dask cluster's or a work pool's GPUs are not here)
    if getattr(args, "store", None) is not None:
        args.store = published_store(args)  # a Hub location: its cached copy, for a command that only reads
        check_store_option(args)
    if getattr(args, "reports_dir", None) is not None:
        args.reports_dir = str(check_reports_dir(args.reports_dir))
    check_reports_default(args)
    model, role = getattr(args, "model", None), getattr(args, "model_role", None)
    if isinstance(model, str) and not model.strip():
        raise ConfigError(f"--model is empty: name one (`dormant {args.command} --help` says what it takes)")
    if isinstance(model, str) and role == "new":
        check_new_folder(model, "--model")
    if isinstance(model, str) and role in ("source", "checkpoint"):
        args.model = model_source(model, getattr(args, "store", None))
        if args.model != model and Path(args.model).name != model and getattr(args, "series_name", "") is None:
            args.series_name = model  # a series stored under --series-name, named by that name
        source = source_for(args.model)
        source.check_available()  # a folder that is there, a Hub that answers: the source knows how to ask
        if source.folder is not None:  # checkpoints read in place: the folder's name and kind
            if getattr(args, "series_name", "") is None:
                check_folder_name(args.model, source)
            if role == "checkpoint" and not getattr(args, "series", None):
                check_checkpoint_folder(args.model, Path(args.model).expanduser())
    elif role == "series":
        store = getattr(args, "store", None)
        args.model = [series_name(m, store) for m in model] if isinstance(model, list) else series_name(model, store)
    hub_datasets_fallback(args)


# The commands that run Prefect flows: Prefect keeps its run database in PREFECT_HOME, and its temporary server
# (SQLite) writes temp files into TMPDIR.
PREFECT_COMMANDS = frozenset({"track", "demo", "evaluate", "serve", "deploy"})
# The commands that load checkpoints, tokenizers or task data: Hugging Face's caches (under HOME by default).
CACHE_COMMANDS = PREFECT_COMMANDS | {"score", "checkpoints", "pretrain-tiny"}
# Hugging Face's cache folders, in the order its libraries derive one from the other; each is made with its parents.
CACHE_VARIABLES = ("XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE")
MIN_FREE = 16 * 2**20  # bytes: less and Prefect's database or the server's temp files fail mid-run (HTTP 500s)


def check_environment(command: str) -> None:
    """ConfigError naming the variable and the fix when HOME, Prefect's home, a cache folder or TMPDIR takes no
    file, before Prefect is imported (a few stat calls and one probe file: well under a second). Unchecked, a
    missing HOME or PREFECT_HOME made Prefect's temporary server retry for minutes and then print a page of
    tracebacks (Prefect creates its home folder but not that folder's parents), and a full TMPDIR filled the
    run's console with the server's HTTP 500s."""
    if command not in CACHE_COMMANDS:
        return
    check_home()
    for variable in CACHE_VARIABLES:
        if os.environ.get(variable):
            why = _unwritable(Path(os.environ[variable]).expanduser(), create=True)
            if why:
                raise ConfigError(
                    f"{variable} {os.environ[variable]}: the cache folder takes no file ({why}); set {variable} to a "
                    "writable folder, or unset it"
                )
    if command in PREFECT_COMMANDS:
        check_prefect_home()
        tmp = os.environ.get("TMPDIR")
        why = _unwritable(Path(tmp), create=False) if tmp else None
        if why:
            raise ConfigError(f"TMPDIR {tmp} takes no file ({why}): set TMPDIR to a writable folder with free space")


def check_home() -> None:
    """ConfigError when HOME is set to a folder that does not exist (or to a file): Prefect's home and the
    caches default to folders inside it."""
    home = os.environ.get("HOME")
    if home and not Path(home).is_dir():
        what = "is a file" if Path(home).exists() else "does not exist"
        raise ConfigError(
            f"HOME {home} {what}: set HOME to an existing writable folder (Prefect keeps its database in "
            "~/.prefect, Hugging Face its cache in ~/.cache), or set PREFECT_HOME and HF_HOME to writable folders"
        )


def check_prefect_home() -> None:
    """ConfigError when Prefect's home (PREFECT_HOME, else ~/.prefect) cannot be used: Prefect creates that folder
    but not its parents, so its parent must exist and take a file."""
    given = os.environ.get("PREFECT_HOME")
    try:
        home = Path(given or "~/.prefect").expanduser()
    except RuntimeError:  # no HOME and no password entry: nowhere to expand ~ to
        raise ConfigError("HOME is not set: set HOME, or PREFECT_HOME to a writable folder") from None
    if given:
        where, fix = f"PREFECT_HOME {given}", "set PREFECT_HOME to a writable folder"
    else:
        where, fix = f"HOME {home.parent}", "set HOME, or PREFECT_HOME to a writable folder"
    if not home.exists() and not home.parent.exists() and nearest_existing(home).is_dir():
        raise ConfigError(
            f"{where}: Prefect creates its folder {home} but not its parent {home.parent}, which does not exist; "
            f"create it (mkdir -p {home}), or {fix}"
        )
    why = _unwritable(home, create=True)
    if why:
        raise ConfigError(f"{where}: Prefect's folder {home} takes no file ({why}); {fix}")


def _unwritable(folder: Path, create: bool) -> str | None:
    """Why `folder` takes no file: missing (and, with `create`, not creatable: its nearest existing ancestor
    takes no file), not a folder, no file can be written there, or less than MIN_FREE bytes free; None when it
    takes files. Creates nothing (a probe file is removed)."""
    existing = nearest_existing(folder) if create else folder
    if not existing.is_dir():
        return f"{existing} is a file" if existing.exists() else "no such folder"
    why = cannot_create_in(existing)
    if why:
        return why
    free = shutil.disk_usage(existing).free
    return f"disk full: {free / 2**20:.1f} MiB free" if free < MIN_FREE else None


# The commands that read what a store holds: while a track run writes it, they say so before what they print.
READERS = frozenset({"status", "report", "findings", "compare", "leaderboard"})


def check_store_option(args: argparse.Namespace) -> None:
    """`--store` checked (`store.check_store_path`); a default taken from $DORMANT_STORE is named as that variable,
    not as an option the user did not type; a reader of a store a track run is writing says so, on stderr."""
    use = getattr(args, "store_use", "reads")
    try:
        check_store_path(args.store, use)
    except StoreError as e:
        env = os.environ.get("DORMANT_STORE")
        if not env or "store" in getattr(args, "given", {"store"}) or str(e).startswith("--store is empty"):
            raise
        message = str(e).replace(f"--store {args.store}", f"DORMANT_STORE={env} (the default of --store)", 1)
        raise StoreError(f"{message} (or set DORMANT_STORE to a store folder, or unset it)") from None
    from dormant_tasks.store import is_store, running_writers

    if args.command in READERS and is_store(args.store):  # (a store not made yet: its own error says so)
        if pids := running_writers(Path(args.store)):
            print(
                f"dormant {args.command}: note: a track run (pid {pids[0]}) is writing {args.store} now; what follows "
                "is what it has stored so far (run this again when it ends)",
                file=sys.stderr,
            )


def check_reports_default(args: argparse.Namespace) -> None:
    """$DORMANT_REPORTS, the folder the reports go to when --reports-dir is left out: ConfigError naming the
    variable when it is a file or lies under one (the report's write failed with "File exists: free space")."""
    env = os.environ.get("DORMANT_REPORTS")
    if not env or not hasattr(args, "reports_dir") or args.reports_dir is not None:
        return
    folder = nearest_existing(Path(env).expanduser())
    if not folder.is_dir():
        raise ConfigError(
            f"DORMANT_REPORTS={env} (where reports go without --reports-dir): {folder} is a file, not a folder; set "
            "DORMANT_REPORTS to a folder, or pass --reports-dir DIR"
        )


def check_reports_dir(reports_dir: str) -> Path:
    """`--reports-dir` as an absolute path (`.` names the working folder by its name), once it is known that the
    report can be written there: ConfigError for an empty value, a file, or a folder that takes no file."""
    if not reports_dir.strip():
        raise ConfigError("--reports-dir is empty: name a folder, or leave it out for reports/<series>/")
    out = Path(reports_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--reports-dir {reports_dir} is a file, not a folder: name a folder")
    folder = nearest_folder(out, "--reports-dir", reports_dir)
    # the report is written beside its folder, then renamed into place: that parent must take files, and so
    # must the folder itself when it exists (a mount point such as /proc does not)
    for where in dict.fromkeys([out.parent if out.parent.exists() else folder, folder]):
        why = cannot_create_in(where)
        if why:
            raise ConfigError(
                f"--reports-dir {reports_dir}: no file can be created in {where} ({why}); choose another folder"
            )
    return out


def nearest_existing(path: Path) -> Path:
    """`path` or its nearest existing ancestor: where a new folder at `path` would be made."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def nearest_folder(path: Path, option: str, value: str) -> Path:
    """`path` or its nearest existing ancestor, where a new folder would be made; ConfigError when that is a file."""
    folder = nearest_existing(path)
    if not folder.is_dir():
        raise ConfigError(f"{option} {value}: {folder} is a file, not a folder; choose another folder")
    return folder


def check_new_folder(value: str, option: str) -> None:
    """ConfigError unless `value` is a folder, or can be made one (its nearest existing parent takes files)."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {value} is a file: name a folder (new, empty, or a previous run's)")
    folder = nearest_folder(path, option, value)
    why = None if path.is_dir() else cannot_create_in(folder)
    if why:
        raise ConfigError(f"{option} {value}: no folder can be created in {folder} ({why}); choose another folder")


def hub_endpoint() -> str:
    from dormant_tasks.checkpoints import hub_endpoint

    return hub_endpoint()


def hub_silence() -> str | None:
    """None when the Hub answers one brief request, else why not (`checkpoints.silent_hub`, which switches this
    process offline when it is silent); asked once per process."""
    from dormant_tasks.checkpoints import silent_hub

    return silent_hub()


def hub_datasets_fallback(args: argparse.Namespace) -> None:
    """`--datasets auto` without an offline variable reads task data from the Hub: when the Hub does not answer,
    the bundled copies are used at once (one note) instead of after a minute of retries."""
    if getattr(args, "datasets", None) != "auto" or task_data_offline():
        return
    reason = hub_silence()
    if reason:
        args.datasets = "bundled"
        args.hub_note = (  # printed by the command once its own checks pass (`print_hub_note`), never before an error
            f"dormant {args.command}: note: the Hub at {hub_endpoint()} does not answer ({reason}): task data from the "
            "bundled copies (--datasets bundled)"
        )


def print_hub_note(args: argparse.Namespace) -> None:
    """The note of `hub_datasets_fallback`, once the command's checks have passed (so an unrelated error is one
    line); printed once."""
    note = getattr(args, "hub_note", None)
    if note:
        print(note, file=sys.stderr)
        args.hub_note = None


def api_url(what: str = "a deployment") -> str:
    """The Prefect API a deployment is registered with (or served from): PREFECT_API_URL (the variable or the
    Prefect profile's setting, as Prefect reads it); ConfigError naming how to start one when none is set, or when
    it does not answer within API_PROBE_S seconds. (Without it Prefect would start a temporary server that ends
    with this command, and the deployment, its schedule and its runs' history with it.)"""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise ConfigError(f"{what} needs a Prefect server that keeps running: {START_A_SERVER}")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"PREFECT_API_URL {url!r} is not an http(s) URL: e.g. http://127.0.0.1:4200/api")
    why = api_silence(url)
    if why:
        raise ConfigError(
            f"the Prefect server at PREFECT_API_URL {url} does not answer ({why}): start it (`prefect server start`) "
            "or point PREFECT_API_URL at a running one"
        )
    return url


def api_silence(url: str, timeout: float = API_PROBE_S) -> str | None:
    """None when a Prefect API answers `GET /health` (a 401 or 403 too: a server that wants a key is one), else
    why not: no connection, no answer in `timeout` seconds, or another HTTP status (a proxy's, another server's)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError as e:
        return None if e.code in (401, 403) else f"HTTP {e.code} at {url.rstrip('/')}/health: not a Prefect API"
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return f"no answer in {timeout:.0f} s"
        return str(getattr(reason, "strerror", None) or reason)
