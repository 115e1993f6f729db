"""Where a series' checkpoints come from (docs/CHECKPOINTS.md §10): one protocol, `CheckpointSource`, that every part
asks instead of testing "Hub or folder?", and a registry of its implementations by scheme, as lm-eval registers
its models. Built in: `HubRepo` (`hub://ORG/NAME` or a bare `ORG/NAME`) and `LocalFolder` (`local://PATH`, or a
bare spec it `claims`); another source is a subclass registered with `@register_source("s3")`. Stdlib only at
import (the command line's cheap checks ask it): the Hub client is imported by the methods that use it.
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fnmatch import translate
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple, TypeVar

from dormant_tasks.checkpoints.naming import (
    MAIN,
    UNKNOWN,
    Listing,
    Revision,
    check_tokens_per_step,
    known_tokens_per_step,
    name_token_unit,
    parse_revision_name,
)
from dormant_tasks.checkpoints.tokens import Checkpoint, TokensPerStep, token_axis
from dormant_tasks.errors import CheckpointError, ConfigError, did_you_mean
from dormant_tasks.paths import absolute_path

if TYPE_CHECKING:
    from dormant_tasks.checkpoints.hub import ListedFile

log = logging.getLogger(__name__)
S = TypeVar("S", bound="type[CheckpointSource]")

WEIGHTS = re.compile("|".join(translate(p) for p in ("*.safetensors", "*.bin", "*.pt", "*.pth")))


class BranchFile(NamedTuple):
    """One file of a checkpoint as its source lists it."""

    path: str
    size: int | None
    digest: str  # LFS sha256 or git blob id (Hub), sha256 (local)
    lfs: bool


@dataclass(frozen=True)
class AuditListing:
    """What the integrity audit reads of a series (`audit.audit_series`): each checkpoint's files, its config
    (where configs may differ) and the files its shard indexes list."""

    files: dict[str, list[BranchFile]] = field(default_factory=dict)
    configs: dict[str, dict | None] = field(default_factory=dict)
    indexes: dict[str, set[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ListedNames:
    """A source's checkpoint names in its own order, with what it knows of each without fetching it."""

    names: list[str]
    commits: dict[str, str] = field(default_factory=dict)  # name -> commit, where the source pins one
    paths: dict[str, Path] = field(default_factory=dict)  # name -> folder, where it is read in place


class CheckpointSource(ABC):
    """Where the checkpoints of one series come from (module docstring). A subclass registered with
    `register_source(scheme)` is built from the part of a spec after `scheme://` (`location`)."""

    scheme: ClassVar[str] = ""
    is_remote: ClassVar[bool] = False  # fetching downloads (bytes, disk, eviction); False: read in place
    kind: ClassVar[str] = "checkpoint source"  # in a line: "dry run: NAME (Hub repo ORG/NAME)"
    listed_as: ClassVar[str] = "checkpoints"  # what its checkpoints are, in a line that finds none
    audited_by: ClassVar[str] = "its files listed"  # how `audit_listing` reads them, in the audit's summary line

    def __init__(self, location: str):
        self.location = location

    @classmethod
    def claims(cls, spec: str) -> bool:
        """Whether a spec without a scheme names a source of this kind (only the built-in sources claim any)."""
        return False

    @property
    def spec(self) -> str:
        """The source as a request saves it: the same source from any working directory."""
        return f"{self.scheme}://{self.location}"

    @property
    def identity(self) -> str:
        """What the store records as the series' source (`store.record_source`): one name never stands for two."""
        return f"{self.scheme}:{self.location}"

    @property
    def name(self) -> str:
        """The series' name in the store unless `--series-name` gives one."""
        return self.location.rstrip("/").rpartition("/")[2] or self.location

    @property
    def folder(self) -> Path | None:
        """The folder its checkpoints lie in when they are read in place (the command line checks it exists)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"

    @abstractmethod
    def listing(self) -> ListedNames:
        """Every checkpoint name, `main` and names that are no checkpoint included (the listing skips those)."""

    @abstractmethod
    def audit_listing(self, revisions: list[Revision], workers: int | None = None, cache: bool = True) -> AuditListing:
        """What each revision holds, without fetching a weight file (`workers` listings at once, where the source
        lists over a network); `cache=False` (a dry run): nothing written."""

    @abstractmethod
    def fetch(
        self, revision: Revision, cache_dir: str | Path | None = None, retries: int = 3, backoff_s: float = 2.0
    ) -> Path:
        """The folder holding `revision`'s files (what loading reads)."""

    def evict(self, revision: Revision, path: Path, cache_dir: str | Path | None = None) -> int:
        """Remove a fetched copy; the bytes freed (a checkpoint read in place is never touched)."""
        return 0

    def commit(self, revision: Revision, path: Path) -> str:
        """A fetched checkpoint's commit in the store: the commit the source pinned, else its files' content hash."""
        from dormant_tasks.checkpoints.hub import local_content_hash

        return revision.commit or local_content_hash(path)

    def checkpoint(self, revision: str | None = None) -> Revision:
        """One checkpoint of this source by name (default `main`), for a command that loads one."""
        name = revision or MAIN
        listed = self.listing()
        commit, path = listed.commits.get(name), listed.paths.get(name)
        rev = parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)
        return Revision(rev.name, rev.stage, rev.step, rev.tokens, rev.ingredient, commit=commit, path=path)

    def cache_free(self, cache_dir: str | Path | None = None) -> tuple[Path, int] | None:
        """(the folder a fetch writes to, the bytes free on its disk); None when a fetch writes nothing."""
        return None

    def check_available(self) -> None:
        """A one-line CheckpointError when the checkpoints cannot be reached (cheap: before a run); by default
        the source is asked when it is first listed."""
        return None


_SOURCES: dict[str, type[CheckpointSource]] = {}  # scheme -> class, in registration order
_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<location>.*)", re.DOTALL)


def register_source(scheme: str) -> Callable[[S], S]:
    """Class decorator: the `CheckpointSource` subclass that serves `scheme://...` specs. A scheme is registered
    once (another class under a taken scheme is refused: two meanings of one spec)."""
    scheme = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
        raise ValueError(f"checkpoint source scheme {scheme!r}: letters, digits, '+', '.', '-', starting with a letter")

    def add(cls: S) -> S:
        if not (isinstance(cls, type) and issubclass(cls, CheckpointSource)):
            raise TypeError(f"register_source({scheme!r}): {cls!r} is not a CheckpointSource subclass")
        taken = _SOURCES.get(scheme)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise ValueError(f"checkpoint source scheme {scheme!r} is already {taken.__qualname__}'s")
        cls.scheme = scheme
        _SOURCES[scheme] = cls
        return cls

    return add


def unregister_source(scheme: str) -> None:
    """Forget a registered scheme (a test's scratch source); the built-in ones stay."""
    if scheme in ("hub", "local"):
        raise ValueError(f"the built-in checkpoint source {scheme!r} cannot be unregistered")
    _SOURCES.pop(scheme.lower(), None)


def source_for(spec: str | Path | CheckpointSource) -> CheckpointSource:
    """The source a `--model` spec names: `scheme://location` by its scheme; a bare spec by the first registered
    source that claims it, else the Hub (a repo id is checked when the Hub is asked). A source is returned as is."""
    if isinstance(spec, CheckpointSource):
        return spec
    text = str(spec)
    m = _SCHEME.fullmatch(text)
    if m is not None:
        scheme = m["scheme"].lower()
        cls = _SOURCES.get(scheme)
        if cls is None:
            raise ConfigError(
                f"--model {text}: no checkpoint source is registered for {scheme}://{did_you_mean(scheme, _SOURCES)}; "
                f"use one of {', '.join(f'{s}://' for s in _SOURCES)}, a folder, or a Hub repo id (org/name)"
            )
        return cls(m["location"])
    return next((cls for cls in _SOURCES.values() if cls.claims(text)), HubRepo)(text)


def _dead_link(path: Path) -> bool:
    """A symbolic link that leads to no folder or file: a loop, or a missing target."""
    return path.is_symlink() and not path.exists()


def skipped_note(skipped) -> str:
    """The one line that names the listing's names that are not checkpoints (`dormant checkpoints`, `track`)."""
    return f"skipped {len(skipped)} names that are not checkpoints: {', '.join(skipped)}"


def list_revisions(
    source: str | Path | CheckpointSource, include_main: bool = False, tokens_per_step: int | None = None
) -> Listing:
    """All checkpoints of `source` (a local folder of checkpoint folders, a Hub repo id, or any registered source),
    in training order. `tokens_per_step` (default: the series' known value) gives the tokens of names that carry
    none; when such names are found and neither is known, CheckpointError asks for --tokens-per-step."""
    origin = source_for(source)
    source = source.spec if isinstance(source, CheckpointSource) else str(source)  # as given, in its lines
    per_step: TokensPerStep | None = check_tokens_per_step(tokens_per_step) or known_tokens_per_step(origin.name)
    listed = origin.listing()
    revisions, skipped = [], []
    for name in listed.names:
        rev = parse_revision_name(name, per_step)
        if rev is None:
            skipped.append(name)
        elif not rev.is_main or include_main:
            revisions.append(replace(rev, commit=listed.commits.get(name), path=listed.paths.get(name)))
    axis = token_axis(
        [Checkpoint(r.name, r.stage, r.step, r.tokens, r.path) for r in revisions],
        {r.name: unit for r in revisions if (unit := name_token_unit(r.name)) is not None},
        per_step,
    )
    if axis.refusal is not None:
        raise CheckpointError(
            f"{source}: {axis.refusal}; pass --tokens-per-step N ({unit_hint([r.name for r in revisions])})"
        )
    revisions = [r if axis.tokens[r.name] == r.tokens else replace(r, tokens=axis.tokens[r.name]) for r in revisions]
    for name, why in axis.disagreements.items():
        log.warning("%s: %s", name, why)
    revisions.sort(key=lambda r: r.sort_key)
    untokened = [r.name for r in revisions if r.tokens == UNKNOWN and not r.is_main]
    if untokened:
        raise CheckpointError(
            f"{source}: {len(untokened)} checkpoint names ({untokened[0]} ... {untokened[-1]}) carry a step but no "
            f"token count, and this series' tokens per step are not known; pass --tokens-per-step N "
            f"({unit_hint(untokened)})"
        )
    if not revisions:
        hint = (
            " (it has a `main` revision: pass --include-main to analyse the final model)"
            if MAIN in listed.names and not include_main
            else ""
        )
        raise CheckpointError(
            f"{source}: no checkpoints found{hint}; checkpoints are {origin.listed_as} named like "
            f"stage1-step1000-tokens4B, step1000-tokens4B, stage1-step1000, step1000 or ckpt_010"
            + (f"; skipped names: {', '.join(sorted(skipped)[:5])}" if skipped else "")
        )
    if skipped:
        log.info("%s: skipped %d names that are not checkpoints: %s", source, len(skipped), ", ".join(skipped))
    return Listing(source, not origin.is_remote, revisions, sorted(skipped), axis, origin.kind)


def unit_hint(names: list[str]) -> str:
    """What N of --tokens-per-step is for these names: LLM360's `ckpt_{N}` number checkpoints, not steps."""
    if all(n.lower().startswith("ckpt_") for n in names):
        return "N = training tokens per checkpoint: the number in ckpt_{N} is a checkpoint index, e.g. about 3.5B for Amber"
    return "N = training tokens per step: sequences per batch x sequence length"


# ---------------------------------------------------------------------------------------------- the Hub


@register_source("hub")
class HubRepo(CheckpointSource):
    """A Hugging Face Hub model repo: one branch per checkpoint (docs/CHECKPOINTS.md §1), downloaded pinned to its
    commit and verified by `hub` (the real huggingface_hub client), evicted from the Hub cache after loading."""

    is_remote = True
    kind = "Hub repo"
    listed_as = "branches"
    audited_by = "one tree listing per branch, no weights downloaded"

    @property
    def spec(self) -> str:
        return self.location

    @property
    def name(self) -> str:
        return self.location

    def listing(self) -> ListedNames:
        from dormant_tasks.checkpoints.hub import list_branches

        commits = list_branches(self.location)
        return ListedNames(list(commits), commits)

    def audit_listing(self, revisions: list[Revision], workers: int | None = None, cache: bool = True) -> AuditListing:
        from dormant_tasks.checkpoints.hub import LISTING_WORKERS, list_branch_files

        commits = {r.name: r.commit for r in revisions if r.commit}
        listed: dict[str, list[ListedFile]] = list_branch_files(self.location, commits, workers or LISTING_WORKERS)
        files = {name: [BranchFile(*f) for f in entries] for name, entries in listed.items()}
        return AuditListing(files, self._configs(revisions, files, cache), self._indexes(revisions, files, cache))

    def fetch(
        self, revision: Revision, cache_dir: str | Path | None = None, retries: int = 3, backoff_s: float = 2.0
    ) -> Path:
        from dormant_tasks.checkpoints.hub import download_revision
        from dormant_tasks.progress import waiting

        with waiting(f"download {self.location}@{revision.name}"):  # on a pipe or file: a line at least every 20 s
            return download_revision(self.location, revision.name, revision.commit, cache_dir, retries, backoff_s)

    def evict(self, revision: Revision, path: Path, cache_dir: str | Path | None = None) -> int:
        from dormant_tasks.checkpoints.hub import evict_revision

        return evict_revision(self.location, path.name, cache_dir)

    def commit(self, revision: Revision, path: Path) -> str:
        return path.name  # a Hub snapshot folder is named by the commit sha it was pinned to

    def checkpoint(self, revision: str | None = None) -> Revision:
        name = revision or MAIN  # its commit is resolved from the refs when it is downloaded
        return parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)

    def cache_free(self, cache_dir: str | Path | None = None) -> tuple[Path, int] | None:
        from dormant_tasks.checkpoints.hub import cache_free_bytes

        return cache_free_bytes(self.location, cache_dir)

    def check_available(self) -> None:
        """One brief question to the Hub (`silent_hub`), unless offline mode is on."""
        from dormant_tasks.checkpoints.hub import hub_endpoint
        from dormant_tasks.offline import hub_offline

        if not hub_offline() and (silent := silent_hub()):
            # Not "set HF_HUB_OFFLINE=1": a Hub --model needs the Hub's branch list even when its files are cached.
            raise CheckpointError(
                f"--model {self.location}: the Hub at {hub_endpoint()} does not answer ({silent}); check the network "
                "(HF_ENDPOINT, HTTPS_PROXY), or give a local checkpoint folder"
            )

    def _configs(self, revisions: list[Revision], files: dict[str, list[BranchFile]], cache: bool) -> dict:
        """Each branch's config where the series holds more than one distinct config.json (else none can differ)."""
        configs = {f.digest for r in revisions if r.commit for f in files.get(r.name, []) if f.path == "config.json"}
        if len(configs) < 2:
            return {}
        read = self._read_once(revisions, files, lambda path: path == "config.json", cache)
        return {name: found[0][0] if isinstance(found[0][0], dict) else None for name, found in read.items()}

    def _indexes(
        self, revisions: list[Revision], files: dict[str, list[BranchFile]], cache: bool
    ) -> dict[str, set[str]]:
        """The files each branch's shard indexes (`*.index.json`) list, paths relative to the repo root."""
        read = self._read_once(revisions, files, lambda path: path.endswith(".index.json"), cache)
        out: dict[str, set[str]] = {}
        for name, found in read.items():
            out[name] = set()
            for data, path in found:
                weight_map = (data.get("weight_map") if isinstance(data, dict) else None) or {}
                folder = path.rpartition("/")[0]
                out[name] |= {f"{folder}/{v}" if folder else str(v) for v in weight_map.values()}
        return out

    def _read_once(
        self, revisions: list[Revision], files: dict[str, list[BranchFile]], wanted: Callable[[str], bool], cache: bool
    ) -> dict[str, list[tuple[object, str]]]:
        """name -> [(parsed JSON, None if it is none; path)] of each of its small files that `wanted` picks, each
        distinct file (by blob id: a series' branches usually share one) read once, `LISTING_WORKERS` at a time."""
        from concurrent.futures import ThreadPoolExecutor

        from dormant_tasks.checkpoints.hub import LISTING_WORKERS, read_small_file

        holders: dict[str, list[tuple[Revision, str]]] = defaultdict(list)
        for r in revisions:
            for f in files.get(r.name, []):
                if wanted(f.path) and r.commit:
                    holders[f.digest].append((r, f.path))

        def read(held: list[tuple[Revision, str]]) -> object:
            first, path = held[0]
            try:
                return json.loads(read_small_file(self.location, first.name, first.commit or "", path, cache=cache))
            except ValueError:  # not JSON: it says nothing that can be checked
                return None

        out: dict[str, list[tuple[object, str]]] = defaultdict(list)
        with ThreadPoolExecutor(max_workers=LISTING_WORKERS, thread_name_prefix="hub-index") as pool:
            for held, data in zip(holders.values(), pool.map(read, holders.values())):
                for r, path in held:
                    out[r.name].append((data, path))
        return out


def silent_hub() -> str | None:
    """None when the Hub answers one brief request (`hub.hub_silence`: through huggingface_hub's session, so
    `HTTPS_PROXY` and `HF_ENDPOINT` apply), else why not; asked once per process. A silent Hub switches this
    process offline (`hub_adapter.go_offline`): every later Hub access of the run (tokenizers, configs, datasets)
    then reads the Hugging Face cache or fails at once, instead of its own retry loops."""
    from dormant_tasks.checkpoints.hub import hub_silence
    from dormant_tasks.checkpoints.hub_adapter import go_offline

    reason = hub_silence()
    if reason:
        go_offline()
    return reason


# ---------------------------------------------------------------------------------------------- a local folder


def is_local_source(source: str | Path) -> bool:
    """A bare spec is a local folder, never a Hub id, when it is spelled as a path (./x, /x, ~/x, x/, a/b/c: a Hub id
    is org/name, one slash), exists on disk, or lies inside an existing folder (data/x where ./data is one: a
    mistyped local path, not the Hub org "data")."""
    s = str(source)
    return (
        s.startswith((".", "/", "~"))
        or s.endswith("/")
        or s.count("/") >= 2
        or Path(s).expanduser().exists()
        or Path(s).expanduser().is_symlink()  # a broken link or a loop: a folder meant, which `ls` lists
        or ("/" in s and Path(s.split("/")[0]).is_dir())
    )


@register_source("local")
class LocalFolder(CheckpointSource):
    """A folder of checkpoint folders (a series), or one checkpoint folder (`score`, `evaluate`): read in place,
    never modified; a checkpoint's commit is the content hash of its loadable files (`hub.local_content_hash`)."""

    kind = "local folder"
    listed_as = "subfolders with a config.json"
    audited_by = "file hashes"

    @classmethod
    def claims(cls, spec: str) -> bool:
        return is_local_source(spec)

    @property
    def spec(self) -> str:
        """Absolute, links resolved (a link loop raises: the command line's check says so first)."""
        return absolute_path(self.location) or self.location

    @property
    def identity(self) -> str:
        return f"local:{self.spec}"

    @property
    def name(self) -> str:
        return Path(self.spec).name

    @property
    def folder(self) -> Path:
        """As spelled (`location`), `~` expanded: the lines that name it say what the user typed."""
        return Path(self.location).expanduser()

    def listing(self) -> ListedNames:
        folder = self.folder
        if not folder.is_dir():
            raise CheckpointError(
                f"{folder}: no such folder; point --model at a folder of checkpoint folders "
                "or at a Hub repo id like allenai/OLMo-2-0425-1B"
            )
        if (folder / "config.json").exists():
            raise CheckpointError(
                f"{folder} is itself a checkpoint, not a series; point --model at its parent folder "
                f"{folder.parent}, whose subfolders are the checkpoints"
            )
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        subfolders = [p for p in entries if p.is_dir()]
        paths = {p.name: p for p in subfolders if (p / "config.json").exists()}
        # A subfolder without config.json, and a link that leads to no folder (a loop, a missing target, which `ls`
        # lists as a folder might be), are listed as skipped through a name no checkpoint can have.
        dead_links = [f"{p.name} (a symbolic link that leads to no folder)" for p in entries if _dead_link(p)]
        return ListedNames(
            [p.name if p.name in paths else f"{p.name}/ (no config.json)" for p in subfolders] + dead_links, {}, paths
        )

    def audit_listing(self, revisions: list[Revision], workers: int | None = None, cache: bool = True) -> AuditListing:
        """Each folder's loadable files with their sha256 (the hash cache: a rerun reads nothing), its config and
        the files its shard index lists."""
        from dormant_tasks.checkpoints.hub import file_sha256, is_loading_file

        out = AuditListing()
        for r in revisions:
            folder = r.path
            if folder is None:
                continue
            entries = sorted(
                p for p in folder.iterdir() if p.is_file() and (is_loading_file(p.name) or WEIGHTS.fullmatch(p.name))
            )
            out.files[r.name] = [BranchFile(p.name, p.stat().st_size, file_sha256(p), False) for p in entries]
            out.configs[r.name] = read_json(folder / "config.json")
            listed: set[str] = set()
            for index in folder.glob("*.index.json"):
                weight_map = (read_json(index) or {}).get("weight_map") or {}
                listed |= {str(v) for v in weight_map.values()}
            out.indexes[r.name] = listed
        return out

    def fetch(
        self, revision: Revision, cache_dir: str | Path | None = None, retries: int = 3, backoff_s: float = 2.0
    ) -> Path:
        return revision.path or self.folder / revision.name  # as listed, else its subfolder by name

    def checkpoint(self, revision: str | None = None) -> Revision:
        """The folder itself when it is one checkpoint (named by its folder name), else its subfolder `revision`;
        as spelled (the lines that name it say what the user typed)."""
        given = Path(self.location)
        folder = given if revision is None or (self.folder / "config.json").is_file() else given / revision
        name = self.name if folder is given else revision or ""
        rev = parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)
        return Revision(rev.name, rev.stage, rev.step, rev.tokens, rev.ingredient, path=folder)

    def check_available(self) -> None:
        if not self.folder.is_dir():
            raise CheckpointError(  # the class `list_revisions` raises for a missing series folder
                f"{missing_folder(self.location)}: name a checkpoint folder (or a folder of them), a Hub repo id "
                "(org/name) or a series the store keeps"
            )


def missing_folder(value: str) -> str:
    """Why a `--model` path does not exist: the nearest folder that does, and the closest of its subfolders."""
    path = Path(value).expanduser()
    nearest = path.parent
    while str(nearest) not in (".", "/") and not nearest.is_dir():
        nearest = nearest.parent
    if path.exists():
        return f"--model {value} is a file, not a folder"
    if path.is_symlink():  # `ls` lists it, yet it leads to no folder
        return (
            f"--model {value} is a symbolic link that leads to no folder (a loop, or a missing target; ls -l shows it)"
        )
    missing = path.relative_to(nearest).parts[0] if nearest != path else path.name
    subfolders = sorted(p.name for p in nearest.iterdir() if p.is_dir()) if nearest.is_dir() else []
    close = did_you_mean(missing, subfolders)
    where = "the working folder" if str(nearest) == "." else str(nearest)
    suggestion = f"; did you mean {nearest / close.split(chr(34))[1]}?" if close else ""
    return f"--model {value}: no such folder ({where} has no {missing}{suggestion})"


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
