"""`SeriesView`: the one answer to "what is current" for a series of a store.

A series' `taus` table names its current taus (`taus_id`) and the calibration set they were fixed with
(`calibration_id`). Current results are the rows stored under both, by the current scoring version;
rows of older taus (a `--retau` keeps them, append-only) or of another calibration set are never read
as current. Checkpoints come in the one series order (`checkpoints.series_sort_key`: stage 1 by step,
stage-2 ingredients after it, `main` last), one per revision (its newest analysis).

`status`, `report`, `evaluate --series`/`--mode static` and transition derivation read a series only
through this view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.checkpoints import Revision, series_sort_key
from dormant_tasks.engine import SCORING_VERSION
from dormant_tasks.errors import StoreError, did_you_mean
from dormant_tasks.store import (
    StoreFolder,
    Table,
    check_result_files,
    is_store,
    list_models,
    read_metadata,
    read_table,
    series_files,
)
from dormant_tasks.tracking.decision import decide_pending, is_pending
from dormant_tasks.tracking.masks import Tau
from dormant_tasks.tracking.transition_files import (
    read_transitions,
    sorted_codes,
    transitions_key,
    transitions_metadata,
)
from dormant_tasks.tracking.transitions import DormantMatrix, dormant_matrices


@dataclass(frozen=True)
class SeriesView:
    store: StoreFolder  # opened once, by the view's `open`
    model_id: str
    taus: dict[str, Tau]  # score_fn -> the series' current tau
    taus_id: str
    calibration_id: str
    reference_revision: str | None  # the checkpoint the quantile taus came from (None: all fixed)
    checkpoints: tuple[dict, ...]  # current `checkpoints` rows, one per revision, in series order
    n_stale: int  # revisions stored only under other taus, calibration or scoring version
    set_aside: tuple[str, ...] = ()  # current revisions of another architecture than the series' (never read)
    # `set_aside_checkpoints` rows: branches the integrity audit set aside (duplicates; never read as current
    # unless `kept`, then read and marked)
    duplicates: tuple[dict, ...] = ()
    stored_taus: tuple[dict, ...] = ()  # the `taus` rows of the calibration set, as read when the view was opened

    @classmethod
    def open(
        cls,
        store,
        model_id: str,
        calibration_id: str | None = None,
        *,
        checked: bool = True,
        stored_taus: list | None = None,
    ) -> SeriesView:
        """The current view of `model_id` on one of its calibration sets (default: the primary one, the first
        of its taus); StoreError (with the models the store holds) when it has none. `checked=False` skips the
        check that every current result file is there (one stat each: the derivation after a run that just wrote
        them, whose reads check the files they open). `stored_taus`: the series' `taus` rows, read by the caller."""
        root = StoreFolder.open(store)
        tau_rows = read_table(root, Table.taus, model_id=model_id).to_pylist() if stored_taus is None else stored_taus
        if tau_rows and calibration_id is not None:
            sets = list(dict.fromkeys(r["calibration_id"] for r in tau_rows))
            if calibration_id not in sets:
                raise StoreError(
                    f"series {model_id!r} has no calibration set {calibration_id!r}"
                    f"{did_you_mean(calibration_id, sets)}; its sets: {', '.join(sets)}"
                )
            tau_rows = [r for r in tau_rows if r["calibration_id"] == calibration_id]
        else:
            tau_rows = [r for r in tau_rows if r["calibration_id"] == tau_rows[0]["calibration_id"]]
        if not tau_rows:
            known = list_models(root)
            raise StoreError(
                f"the store {str(root)!r} holds no tracked series {model_id!r}"
                f"{did_you_mean(model_id, known)}; it holds: {', '.join(known) or 'nothing'}. "
                f"Run `dormant track --model {model_id}` first"
            )
        first = tau_rows[0]
        taus = {
            r["score_fn"]: Tau(
                r["score_fn"], r["tau"], r["direction"], r["source"], r["quantile"], r["reference_revision"]
            )
            for r in tau_rows
        }
        rows = read_table(root, Table.checkpoints, model_id=model_id).to_pylist()
        current = [
            r
            for r in rows
            if (r["taus_id"], r["calibration_id"], r["scoring_version"])
            == (first["taus_id"], first["calibration_id"], SCORING_VERSION)
        ]
        latest: dict[str, dict] = {}
        for r in sorted(current, key=lambda r: r["analyzed_at"]):
            latest[r["revision"]] = r  # a re-analysed revision: its newest analysis counts
        reference = next((t.reference_revision for t in taus.values() if t.reference_revision), None)
        shape = series_architecture(list(latest.values()), reference)
        in_order = sorted(latest.values(), key=checkpoint_sort_key)
        duplicates = tuple(read_table(root, Table.set_aside_checkpoints, model_id=model_id).to_pylist())
        not_points = {d["revision"] for d in duplicates if not d["kept"]}  # not points of training
        in_order = [r for r in in_order if r["revision"] not in not_points]
        ordered = tuple(r for r in in_order if architecture(r) == shape)
        aside = tuple(r["revision"] for r in in_order if architecture(r) != shape)
        if checked:  # a file deleted by hand: refused here, with the fix
            check_result_files(root.root, model_id, ordered, listed=False)
        stale = {r["revision"] for r in rows} - set(latest)
        return cls(
            root,
            model_id,
            taus,
            first["taus_id"],
            first["calibration_id"],
            reference,
            ordered,
            len(stale),
            aside,
            duplicates,
            tuple(tau_rows),
        )

    @classmethod
    def calibration_ids(cls, store, model_id: str) -> list[str]:
        """The series' calibration sets, the primary one first (empty when it was never tracked)."""
        if not is_store(store):
            return []
        rows = read_table(store, Table.taus, model_id=model_id, columns=["calibration_id"]).column("calibration_id")
        return list(dict.fromkeys(rows.to_pylist()))

    @classmethod
    def exists(cls, store, model_id: str) -> bool:
        """True when the store holds taus for the series (it has been tracked), without raising."""
        if not is_store(store):
            return False
        return read_table(store, Table.taus, model_id=model_id).num_rows > 0

    def tau_rows(self) -> list[dict]:
        """The series' stored `taus` rows of its current taus (`taus_id`): where each tau came from."""
        return [r for r in self.stored_taus if r["taus_id"] == self.taus_id]

    # ------------------------------------------------------------------------------------ checkpoints

    @property
    def revisions(self) -> list[str]:
        return [c["revision"] for c in self.checkpoints]

    def revision(self, name: str) -> Revision:
        """The Revision of a current checkpoint; StoreError with did-you-mean for an unknown name."""
        for c in self.checkpoints:
            if c["revision"] == name:
                return Revision(c["revision"], c["stage"], c["step"], c["tokens"], c["ingredient"])
        raise StoreError(
            f"{self.model_id}: revision {name!r} is not tracked under the current taus"
            f"{did_you_mean(name, self.revisions)}; run `dormant track --model {self.model_id}` first"
        )

    def checkpoints_table(self) -> pa.Table:
        from dormant_tasks.store import SCHEMAS

        return pa.Table.from_pylist(list(self.checkpoints), schema=SCHEMAS[Table.checkpoints])

    # ------------------------------------------------------------------------------------ results

    def _current(self, table: str, score_fns=None, revisions=None, columns=None) -> pa.Table:
        filters: dict[str, str | list] = {"taus_id": self.taus_id, "calibration_id": self.calibration_id}
        if score_fns is not None:
            filters["score_fn"] = list(score_fns)
        if revisions is not None:  # head_scores: the manifest then names only these checkpoints' files
            filters["revision"] = list(revisions)
        read = None if columns is None else list(dict.fromkeys(["revision", *columns]))
        mine = self.checkpoints if table == Table.head_scores else None  # the manifest rows read when opened
        t = read_table(self.store, table, model_id=self.model_id, filters=filters, columns=read, manifest=mine)
        keep = pa.array(self.revisions if revisions is None else list(revisions), pa.string())
        t = _rows_in(t, "revision", keep)
        return t if columns is None else t.select(list(columns))

    def head_scores(self, score_fns=None, revisions=None, columns=None) -> pa.Table:
        """The current head_scores rows of the current checkpoints (optionally of some functions/revisions, and
        only some `columns`)."""
        return self._current(Table.head_scores, score_fns, revisions, columns)

    def transitions(self, score_fns=None) -> pa.Table:
        """The transitions derived under the current taus and calibration set, with `confident` decided: an append
        leaves the decision pending, and this read takes it (`decision.decide_pending`, over the whole series: it
        costs checkpoints x heads x functions once) and stores it where the store can be written."""
        meta = transitions_metadata(self)
        if not is_pending(meta):
            return self.stored_transitions(score_fns)
        t = decide_pending(self, read_transitions(self), meta)
        if score_fns is not None:
            t = t.filter(pc.is_in(t.column("score_fn"), value_set=pa.array(list(score_fns), pa.string())))
        return t.filter(pc.is_in(t.column("to_revision"), value_set=pa.array(self.revisions, pa.string())))

    def stored_transitions(self, score_fns=None) -> pa.Table:
        """The transitions as stored: while their decision is pending (`decision_pending`) `confident` and the
        columns of its decision are null. For what needs only the mask changes (derivation, counts). The rows of
        the base file and of the parts appends added to it (`transition_files`), as one table."""
        t = read_transitions(self, score_fns)
        return _rows_in(t, "to_revision", pa.array(self.revisions, pa.string()))

    def derived(self) -> bool:
        """Whether the view's transitions file exists (a series of no state change has one, with no row)."""
        return read_metadata(self.store, Table.transitions, self.model_id, transitions_key(self)) is not None

    def decision_pending(self) -> bool:
        """Whether the stored transitions wait for their confident-state decision (the next `transitions` takes it)."""
        return is_pending(transitions_metadata(self))

    def histories(self, score_fns=None) -> pa.Table:
        return self._current(Table.head_histories, score_fns)

    def states(self, score_fns=None) -> Iterator[DormantMatrix]:
        """Per score function, the dormant matrix over the current checkpoints in series order."""
        return dormant_matrices(self.head_scores(score_fns), self.checkpoints_table())

    def identical_scores(self) -> list[list[str]]:
        """Groups (series order) of current checkpoints whose stored scores are bit-identical for every head and
        function: the second net after the audit (a copy it could not see). From each manifest row's
        `scores_sha256`; a row written before it has its result's scores read and hashed the same way."""
        digests: dict[str, list[str]] = {}
        older = [c["revision"] for c in self.checkpoints if not c.get("scores_sha256")]
        computed = _older_digests(self, older) if older else {}
        for c in self.checkpoints:
            digest = c.get("scores_sha256") or computed.get(c["revision"])
            if digest:
                digests.setdefault(digest, []).append(c["revision"])
        return [g for g in digests.values() if len(g) > 1]  # self.checkpoints are in series order

    def mask(self, revision: str, score_fn: str) -> tuple[frozenset[tuple[int, int]], float]:
        """The dormant (layer, head_index) set and tau of `score_fn` at a current checkpoint."""
        self.revision(revision)
        if score_fn not in self.taus:
            raise StoreError(
                f"{self.model_id}: {score_fn} is not tracked (tracked: {', '.join(self.taus)}); "
                f"run `dormant track --retau --scores ... {score_fn}`, or use --mode dynamic"
            )
        heads = self.head_scores([score_fn], [revision])
        if heads.num_rows == 0:
            raise StoreError(
                f"{self.model_id}@{revision}: no {score_fn} mask under the current taus; "
                f"run `dormant track --model {self.model_id}` again"
            )
        dormant = heads.filter(heads.column("dormant"))
        pairs = zip(dormant.column("layer").to_pylist(), dormant.column("head_index").to_pylist())
        return frozenset(pairs), self.taus[score_fn].value


def _older_digests(view: SeriesView, older: list[str]) -> dict[str, str]:
    """`store.scores_digest` of each of `older` (revisions whose manifest rows predate `scores_sha256`), from one
    read of their scores, sorted once on integer keys (the scores of 1,000 results: seconds, not a sort per result)."""
    t = view.head_scores(revisions=older, columns=["revision", "score_fn", "layer", "head_index", "score"])
    if not t.num_rows:
        return {}
    rev = np.asarray(pc.index_in(t.column("revision"), value_set=pa.array(older, pa.string())), np.int64)
    codes, n_fns = sorted_codes(t.column("score_fn"))
    layer, head = (np.asarray(t.column(c), np.int64) for c in ("layer", "head_index"))
    width = [n_fns, int(layer.max()) + 1, int(head.max()) + 1]
    key = ((rev * width[0] + codes) * width[1] + layer) * width[2] + head  # one int64 key: a single sort
    order = np.argsort(key, kind="stable")
    rev, score = rev[order], t.column("score").to_numpy()[order].astype("<f8")
    cuts = np.flatnonzero(np.diff(rev)) + 1
    out = {}
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(rev)]):
        out[older[int(rev[a])]] = hashlib.sha256(score[a:b].tobytes()).hexdigest()
    return out


def architecture(checkpoint: dict) -> tuple[int, int]:
    """A stored checkpoint's architecture as the store records it: (n_layers, n_heads)."""
    return int(checkpoint["n_layers"]), int(checkpoint["n_heads"])


def series_architecture(current: list[dict], reference: str | None) -> tuple[int, int] | None:
    """The one architecture of a series (a series compares the same heads at every checkpoint): its reference
    checkpoint's, where the quantile taus came from, else its first stored checkpoint's; None when it has none.
    A checkpoint of another architecture is refused when tracked (`architecture_change`); one stored by an
    older version is set aside by the view (`SeriesView.set_aside`), so that the rest stays readable."""
    if not current:
        return None
    ref = [r for r in current if r["revision"] == reference]
    return architecture(ref[0] if ref else min(current, key=lambda r: r["analyzed_at"]))


def architecture_change(store, model_id: str, checkpoint: dict) -> str | None:
    """Why the `checkpoints` row `checkpoint` (about to be stored) cannot join its series: its architecture
    differs from the series' (`series_architecture` of the current rows under the same calibration set, taus
    and scoring version); None when it matches or the series has none yet. One line naming both and the fix."""
    if not is_store(store):
        return None
    key = {k: checkpoint[k] for k in ("calibration_id", "taus_id", "scoring_version")}
    rows = read_table(store, Table.checkpoints, model_id=model_id, filters=key).to_pylist()
    rows = [r for r in rows if r["revision"] != checkpoint["revision"]]  # its own earlier analysis is replaced
    taus = read_table(store, Table.taus, model_id=model_id, filters={"taus_id": checkpoint["taus_id"]}).to_pylist()
    reference = next((t["reference_revision"] for t in taus if t["reference_revision"]), None)
    shape = series_architecture(rows, reference if reference != checkpoint["revision"] else None)
    if shape is None or shape == architecture(checkpoint):
        return None
    (n_layers, n_heads), (layers, heads) = architecture(checkpoint), shape
    return (
        f"it has {n_layers} layers x {n_heads} heads, the series' stored checkpoints "
        f"{layers} x {heads}: a series compares the same heads at every checkpoint, so this one is not stored; track it "
        "as a series of its own (its own folder, or --series-name NAME)"
    )


def open_views(store, model_id: str, *, checked: bool = True) -> list[SeriesView]:
    """The current view of every calibration set of the series, the primary set first (none: it was never tracked),
    from one check of the store and one read of its taus."""
    if not is_store(store):
        return []
    root = StoreFolder.open(store)
    taus = read_table(root, Table.taus, model_id=model_id).to_pylist()
    cals = dict.fromkeys(r["calibration_id"] for r in taus)
    return [SeriesView.open(root, model_id, cal, checked=checked, stored_taus=taus) for cal in cals]


def stored_series(store) -> list[str]:
    """The model ids of the series the store holds (any table), sorted; StoreError when `store` is not one."""
    return list_models(store)


def stored_files(store, table: str, model_id: str) -> list[Path]:
    """Every data file of a series in one table, stale results included: to fingerprint the series' state (a
    report's reuse stamp), never to read rows (the view reads through the manifest)."""
    return series_files(store, table, model_id)


def checkpoint_sort_key(row: dict) -> tuple:
    """The series order of a `checkpoints` row (the same order as `Revision.sort_key`)."""
    return series_sort_key(row["revision"], row["stage"], row["ingredient"], row["step"], row["tokens"])


def _rows_in(t: pa.Table, column: str, values: pa.Array) -> pa.Table:
    """The rows of `t` whose `column` is one of `values`; `t` itself when all are (the usual case: a filter copies
    every column, which a series' whole transitions table would pay on each append)."""
    mask = pc.is_in(t.column(column), value_set=values)
    return t if pc.all(mask).as_py() is not False else t.filter(mask)
