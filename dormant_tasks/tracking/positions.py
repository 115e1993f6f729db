"""Where each tau of a series sits at its reference checkpoint, and the warnings about taus that cannot mark what
they aim at: the one source of those warnings for the terminal (`dormant track`, `demo`, also a rerun) and the
report, read from the store, so the same series gives the same lines everywhere.

The share of (input, head) pairs a tau marks inactive at the reference checkpoint is the mean `dormant_rate`
over the heads (each rate is k of the same n inputs), so it needs no kept per-input scores; NaN scores count as
not inactive, as in the rate. For a "<" function that share is tau's quantile among the pooled per-input scores,
for ">" one minus it (ties at tau aside).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dormant_tasks.engine import SCORE_FUNCTIONS
from dormant_tasks.tracking.series import SeriesView, open_views

TAU_MARKS_LOW, TAU_MARKS_HIGH = 0.01, 0.99  # a tau marking fewer / more (input, head) pairs is warned about


@dataclass(frozen=True)
class TauWarning:
    """A tau that cannot mark what it aims at: this set's numbers apart from the advice, which is the same on
    every calibration set of a series, so the terminal says it once per function (`tau_warnings_of`)."""

    score_fn: str
    tau: str  # the tau as the warning names it, "tau (score < 0.5, fixed)" ("": the random baseline's)
    marks: str  # what it marks at the reference, "0.00%" ("": nothing set-specific to say)
    reference: str  # where it was measured: "the reference checkpoint REV", or the last tracked one when that is not
    advice: str  # what that means and what to do

    def detail(self, marks: str | None = None) -> str:
        if not self.tau:
            return ""
        return (
            f"{self.tau} marks {self.marks if marks is None else marks} of the (input, head) pairs inactive at "
            f"{self.reference}"
        )

    def __str__(self) -> str:
        detail = self.detail()
        return f"{self.score_fn}: {detail}: {self.advice}" if detail else f"{self.score_fn}: {self.advice}"


@dataclass(frozen=True)
class TauPosition:
    """Where a function's tau sits among the reference checkpoint's per-input scores."""

    score_fn: str
    tau: float
    direction: str
    reference_revision: str
    share: float | None  # fraction of (input, head) pairs inactive under tau there (None: not scored there)
    quantile: float | None  # tau's quantile among those per-input scores: share ("<") or 1 - share (">")
    note: TauWarning | None  # a tau that marks (almost) nothing or everything, or the random baseline below 0.5

    @property
    def warning(self) -> str | None:
        return None if self.note is None else str(self.note)


def reference_of(view: SeriesView) -> str:
    """The series' reference checkpoint: the one its quantile taus came from, else the one its taus were fixed
    at; the last checkpoint when that is not tracked."""
    return next((r for r in _named_references(view) if r in view.revisions), view.revisions[-1])


def _named_references(view: SeriesView) -> list[str]:
    rows = view.tau_rows()
    refs = [r["reference_revision"] for r in rows if r.get("reference_revision")]
    return [*refs, *sorted({r["revision"] for r in rows if r.get("revision")})]


def measured_at(view: SeriesView, ref: str) -> str:
    """Where the taus' positions were measured, in words: the reference checkpoint, or the last tracked one when the
    reference is not among the tracked checkpoints (a run of part of the series: `--steps`, `--max`)."""
    named = _named_references(view)
    if not named or ref in named:
        return f"the reference checkpoint {ref}"
    return f"the last tracked checkpoint {ref} (the reference, {named[0]}, is not tracked)"


def tau_positions(view: SeriesView) -> list[TauPosition]:
    """Per tracked function of one calibration set (`view`), where its tau sits at the reference checkpoint (none
    before a checkpoint is stored)."""
    if not view.revisions:
        return []
    ref = reference_of(view)
    where = measured_at(view, ref)
    heads = view.head_scores(revisions=[ref], columns=["score_fn", "dormant_rate"]).to_pydict()
    rates: dict[str, list[float]] = {}
    for fn, rate in zip(heads["score_fn"], heads["dormant_rate"]):
        rates.setdefault(fn, []).append(rate)
    out = []
    for fn, tau in view.taus.items():
        values = rates.get(fn)
        share = float(np.mean(values)) if values else None
        quantile = None if share is None else share if tau.direction == "<" else 1.0 - share
        out.append(TauPosition(fn, tau.value, tau.direction, ref, share, quantile, _warning(tau, where, share)))
    return out


def _warning(tau, ref: str, share: float | None) -> TauWarning | None:
    fn = tau.score_fn
    if fn == "random":
        if tau.value >= 0.5:
            return None
        return TauWarning(
            fn,
            "",
            "",
            ref,
            f"tau = p = {tau.value:g} < 0.5, but a head is dormant only when inactive on at least half the "
            f"inputs; its dormant rate is Binomial(n, {tau.value:g})/n, so random marks a head dormant only by "
            "chance fluctuation (read it as a zero baseline). For a baseline that marks heads, use --tau random=P "
            "with P near 0.5",
        )
    if share is None or SCORE_FUNCTIONS[fn].role is not None:  # a role is Xu's selectivity, not this tau's mask
        return None
    quantile_tau = tau.source == "quantile" and tau.quantile is not None
    ties = quantile_tau and share < tau.quantile / 2  # far fewer than q beyond tau: the scores tie at it
    if not (ties or share < TAU_MARKS_LOW or share > TAU_MARKS_HIGH):
        return None
    what = "almost everything" if share > TAU_MARKS_HIGH else "almost nothing"
    where = f"quantile {tau.quantile:g} of {tau.reference_revision}" if quantile_tau else "fixed"
    fix = (
        f"its quantile tau sits where the scores tie: use a fixed --tau {fn}=VALUE with --retau, or drop {fn} "
        "from --scores"
        if quantile_tau
        else f"choose a tau inside the scores' range, e.g. --tau {fn}=q0.15 (a quantile of the reference) with --retau"
    )
    return TauWarning(
        fn,
        f"tau (score {tau.direction} {tau.value:g}, {where})",
        f"{100 * share:.2f}%",
        ref,
        f"{fn} marks {what}, so its % dormant is not comparable with the other functions'; {fix}",
    )


def tau_warnings_of(store, model_id: str) -> list[str]:
    """The series' tau warnings, one line per function (and advice) across its calibration sets, naming the sets:
    a line per set would repeat the same advice (the demo's 3 sets, 21 lines for 7 functions). Where the sets'
    numbers differ, each number is followed by its set in parentheses."""
    found: dict[tuple[str, str], list[tuple[str, TauWarning]]] = {}  # (function, advice) -> (set, its warning)
    for view in open_views(store, model_id):
        for p in tau_positions(view):
            if p.note is not None:
                found.setdefault((p.score_fn, p.note.advice), []).append((view.calibration_id, p.note))
    lines = []
    for (fn, advice), warned in found.items():
        taus: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (tau, reference) -> (set, what it marks)
        for calibration_id, w in warned:
            taus.setdefault((w.tau, w.reference), []).append((calibration_id, w.marks))
        details = []
        for (tau, reference), marks in taus.items():
            one = marks[0][1] if len({m for _, m in marks}) == 1 else ", ".join(f"{m} ({c})" for c, m in marks)
            details.append(TauWarning(fn, tau, one, reference, advice).detail())
        if len(details) > 1:  # taus that differ between the sets (quantile ones): each names its sets
            details = [f"{d} ({', '.join(c for c, _ in m)})" for d, m in zip(details, taus.values())]
        body = "; ".join(d for d in details if d)
        lines.append(f"{_sets([c for c, _ in warned])}: {fn}: " + (f"{body}: {advice}" if body else advice))
    return lines


def _sets(calibration_ids: list[str]) -> str:
    if len(calibration_ids) == 1:
        return f"calibration set {calibration_ids[0]}"
    return f"calibration sets {', '.join(calibration_ids[:-1])} and {calibration_ids[-1]}"
