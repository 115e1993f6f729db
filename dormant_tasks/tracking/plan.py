"""The series' plan and state, asked once per run: which checkpoints the request selects (`plan_series`), what the
store holds of them (`SeriesState`), and the taus of each calibration set (`SetTaus`, `SeriesTaus`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dormant_tasks.checkpoints import Flag, Revision, audit_series, list_revisions
from dormant_tasks.errors import ConfigError, DormantError, StoreError
from dormant_tasks.store import stored_requests
from dormant_tasks.tracking.calibration import CalibrationSet
from dormant_tasks.tracking.masks import Tau
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult


@dataclass(frozen=True)
class SeriesPlan:
    """The whole series as listed now (training order), and the checkpoints this run selected from it. The
    integrity audit (`checkpoints.audit_series`, run before anything is downloaded) says which branches are not
    points of training (`set_aside`: full duplicates, second branches at one step) and which are refused
    (`refused`: partial duplicates, incomplete branches); neither is selected unless the request keeps them."""

    listed: tuple[Revision, ...]
    selected: tuple[Revision, ...]
    skipped_names: tuple[str, ...] = ()
    set_aside: dict[str, Flag] = field(default_factory=dict)
    refused: dict[str, Flag] = field(default_factory=dict)
    listed_all: tuple[Revision, ...] = ()  # main included: what the audit compared
    loading_bytes: dict[str, int | None] = field(default_factory=dict)  # branch -> what a download fetches


def plan_series(request: TrackRequest, cache: bool = True) -> SeriesPlan:
    """`cache=False` (a dry run): the audit keeps no small file it reads in the Hub cache."""
    listing = list_revisions(request.source, True, request.tokens_per_step)  # the audit sees main
    audit = audit_series(request.source, listing=listing, cache=cache)
    set_aside, refused = audit.set_aside(), audit.failed()
    listed = [r for r in listing.revisions if request.include_main or not r.is_main]
    if not listed:  # only `main`: said as the listing says it (pass --include-main)
        list_revisions(request.source, request.include_main, request.tokens_per_step)
    dropped = set() if request.keep_duplicates else set(set_aside) | set(refused)

    def plan(selected) -> SeriesPlan:
        return SeriesPlan(
            tuple(listed),
            tuple(selected),
            tuple(listing.skipped),
            set_aside,
            refused,
            tuple(listing.revisions),
            {b.revision.name: b.loading_bytes for b in audit.branches},
        )

    try:
        return plan(request.selection.apply([r for r in listed if r.name not in dropped]))
    except ConfigError as e:
        aside = [r.name for r in listed if r.name in dropped]
        if not aside:
            raise
        flags = {**set_aside, **refused}
        named = ", ".join(
            f"{n} ({flags[n].kind}{f' of {flags[n].other}' if flags[n].other else ''})" for n in aside[:5]
        ) + (" ..." if len(aside) > 5 else "")
        raise NothingSelected(
            f"{e}; the integrity audit set aside {len(aside)} more ({named}): `dormant checkpoints --model "
            f"{request.source} --audit` says why, --keep-duplicates scores them",
            plan(()),
        ) from None


class NothingSelected(ConfigError):
    """The selection matches none of the checkpoints left once the integrity audit set some aside: its message
    names those; `plan` (nothing selected) lets the run record what the audit found before it stops."""

    def __init__(self, message: str, plan: SeriesPlan):
        super().__init__(message)
        self.plan = plan


def with_stored_sets(request: TrackRequest, stored_sets: tuple[str, ...]) -> TrackRequest:
    """A run that names no calibration set (no --calibration or --texts) of a stored series tracks the series'
    own sets, as a stored request of the series names them (with the run's --limit, else the stored one), when
    they give the same calibration ids; else the request as it is (and a set that differs from the series' is
    refused by `stored_taus`, with the fix)."""
    if request.calibrations or request.texts or not stored_sets:
        return request
    if [c.calibration_id for c in request.calibration_sets] == list(stored_sets):
        return request
    for text in stored_requests(request.store, request.model_id):  # newest first
        try:
            old = TrackRequest.from_json(text)
            limit = old.limit if request.limit is None else request.limit
            same = replace(request, texts=old.texts, calibrations=old.calibrations, limit=limit)
            if [c.calibration_id for c in same.calibration_sets] == list(stored_sets):
                return same
        except (DormantError, OSError):  # an evaluate request, a texts file moved since: not this one
            continue
    return request


def with_stored_functions(request: TrackRequest, stored_fns) -> TrackRequest:
    """A run that names no --scores of a stored series tracks the series' own functions (the default set of the
    release that first tracked it, or what it named then), so a rerun keeps its taus whatever the default is now."""
    if request.score_fns is not None or not stored_fns:
        return request
    return replace(request, score_fns=tuple(stored_fns))


@dataclass
class SeriesState:
    """What one run needs to know of its series, asked once (loads no model): the plan, the calibration sets
    the store holds for the series, its taus when this run keeps them, and the checkpoints still to analyse."""

    request: TrackRequest  # the run's request; naming no calibration set, with the stored series' own sets
    plan: SeriesPlan
    stored_sets: tuple[str, ...]  # calibration ids of the stored series, the primary first; () = a new series
    taus: SeriesTaus | None  # the stored taus checked against the request; None: this run fixes them (new, --retau)
    pending: tuple[Revision, ...] | None  # selected, not stored for every set; None: unknown until the taus are

    @property
    def is_new(self) -> bool:
        return not self.stored_sets

    @property
    def done(self) -> bool:
        """Every selected checkpoint is stored with the series' taus: the run answers from the store."""
        return self.pending == ()


@dataclass
class SetTaus:
    """The taus of one calibration set of the series (fixed per series and set)."""

    calibration: CalibrationSet
    taus: dict[str, Tau]
    taus_id: str
    warnings: tuple[str, ...] = ()  # taus that cannot mark what they aim at (`masks.tau_warnings`)


@dataclass
class SeriesTaus:
    """The taus of every calibration set of the run, the primary set first."""

    sets: tuple[SetTaus, ...]
    reference: CheckpointResult | None = None  # the reference checkpoint, already analysed with these taus

    @property
    def taus(self) -> dict[str, Tau]:
        return self.sets[0].taus

    @property
    def taus_id(self) -> str:
        return self.sets[0].taus_id

    @property
    def warnings(self) -> tuple[str, ...]:
        """The taus' warnings; with several sets, a warning that several give word for word once, naming them."""
        if len(self.sets) == 1:
            return self.sets[0].warnings
        sets_of: dict[str, list[str]] = {}
        for s in self.sets:
            for w in s.warnings:
                sets_of.setdefault(w, []).append(s.calibration.name)
        return tuple(f"{', '.join(names)}: {w}" for w, names in sets_of.items())

    def of(self, calibration_id: str) -> SetTaus:
        for s in self.sets:
            if s.calibration.calibration_id == calibration_id:
                return s
        raise StoreError(f"calibration set {calibration_id} is not one of this run's")
