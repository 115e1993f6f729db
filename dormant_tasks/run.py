"""One track run, in one place: lock -> state -> audit -> taus -> listing -> checkpoints -> derive -> report.

`track(model, store=..., **options)` is the public call (a notebook's, a script's): the options are `dormant
track`'s long options, dashes as underscores, with the same defaults; it runs in this process with no Prefect.
`run_track(request, executor)` is the run itself, for the CLI and the flow: `dormant track` runs it with
`flows.track.PrefectTasks` as its executor (its `run` starts the Prefect flow, whose body is this function again,
inside the flow run), so the run's sequence is written once, here, and only where the work runs differs.

The executor seam (`Executor`): where a checkpoint is scored (`score`: the taus' checkpoint; `compute`: every
other, returning rows), downloaded ahead (`fetch`), how many are computed at once (`window`: 1 keeps one model in
memory while the next downloads; None submits every one, for a cluster), and what is told of the run (`log`,
`progress`, `reported`). The base class runs everything in this process. A finished rerun (every selected
checkpoint stored) is the run's degenerate case: it answers from the store and needs no executor at all.

One writer: whatever computed a checkpoint returns its rows, and this process alone writes them
(`tracking.write_checkpoint`); a checkpoint that fails is recorded by the same function and the run goes on
(`fail_fast`: it stops).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import as_completed as futures_completed
from dataclasses import replace
from functools import partial

from dormant_tasks import tracking
from dormant_tasks.atomic import sweep_dead_temps
from dormant_tasks.checkpoints import fetch_revision, skipped_note, source_for
from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.errors import StoreError
from dormant_tasks.outputs import report_folder
from dormant_tasks.progress import early, progress_bar, waiting
from dormant_tasks.store import check_store, check_store_path, hold_series, stored_checkpoint_keys
from dormant_tasks.tracking import CheckpointResult, SeriesState, TrackRequest, TrackResult

LOG = logging.getLogger("dormant_tasks.track")


class Executor:
    """Where a track run's checkpoint work runs: here, in this process (a notebook's call, the tests). One
    checkpoint is computed at a time while the next one downloads (a disk that holds two checkpoints is enough)."""

    window: int | None = 1  # checkpoints computed at once (None: every one submitted at once)
    prefetch: bool = True  # a download ahead of its scoring lands on this process's disk

    def __init__(self) -> None:
        self._downloads: ThreadPoolExecutor | None = None

    @property
    def log(self) -> logging.Logger | logging.LoggerAdapter:
        return LOG

    def run(self, request: TrackRequest, state: SeriesState, work: Callable[[Executor], TrackResult]) -> TrackResult:
        """Run the run's work (`work(self)`) under this executor's orchestration: here, directly."""
        try:
            return work(self)
        finally:
            if self._downloads is not None:
                self._downloads.shutdown(wait=False, cancel_futures=True)

    def score(self, request: TrackRequest, revision) -> tuple:
        """Load and score the checkpoint the taus come from (`tracking.score_checkpoint`): its scores."""
        return tracking.score_checkpoint(request, revision)

    def compute(self, request: TrackRequest, revision, series) -> Future:
        """A checkpoint's rows (`tracking.compute_checkpoint`), as a future: computed now, in this thread."""
        return computed_now(tracking.compute_checkpoint, request, revision, series)

    def fetch(self, request: TrackRequest, revision) -> Future:
        """Download a Hub revision ahead of its scoring, in a thread beside it."""
        if self._downloads is None:
            self._downloads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dormant-download")
        return self._downloads.submit(fetch_revision, request.source, revision, request.cache_dir)

    def outcome(self, future):
        """A computed checkpoint's rows, or the failure that makes it fail, not the run."""
        return tracking.checkpoint_outcome(future.result)

    def as_completed(self, futures: list) -> Iterable:
        return futures_completed(futures)

    def waiting(self, request: TrackRequest) -> contextlib.AbstractContextManager:
        """Around the run's waiting for its computed checkpoints (and their writes)."""
        return contextlib.nullcontext()

    def round_size(self, request: TrackRequest) -> int:
        """How many checkpoints a `--budget` round scores: as many as are computed at once."""
        return self.window or 1

    def progress(self, done: int, total: int) -> None:
        """`done` of `total` checkpoints handled (the flow's progress artifact; nothing here)."""

    def reported(self, report) -> None:
        """The run's report was rendered (the flow publishes its summary as artifacts; nothing here)."""


def computed_now(compute: Callable, *args) -> Future:
    """`compute(*args)` run now, in this thread (where Ctrl-C stops it at once), as a finished future; an error is
    handed to `Executor.outcome`, which records a checkpoint's failure and raises anything else."""
    future: Future = Future()
    try:
        future.set_result(compute(*args))
    except Exception as e:
        future.set_exception(e)
    return future


def track(model: str | None = None, *, store: str = "data/store", executor: Executor | None = None, **options):
    """Track dormant heads through a series of checkpoints, in this process; returns the run's `TrackResult`.

    `model` and the keyword options are `dormant track`'s (`--max-batch-tokens N` is `max_batch_tokens=N`,
    `--no-report` is `no_report=True`, a repeatable option takes a list) with the same defaults, and give the same
    tables. No Prefect is started: the work runs here (`executor`: another `Executor` to run it elsewhere)."""
    wait = not options.pop("no_wait", False)
    request = TrackRequest.from_options(model=model, store=store, **options)
    return run_track(request, executor or Executor(), wait=wait)


def run_track(
    request: TrackRequest,
    executor: Executor | Callable[[TrackRequest], Executor],
    *,
    state: SeriesState | None = None,
    wait: bool = True,
    progress: bool = False,
    note: Callable[[str], None] | None = None,
) -> TrackResult:
    """The whole track run of `request`. One writer per series: the run holds it from its state to its last write
    (another run on the series waits, or with `wait=False` is refused). `state`: the series' state when the caller
    asked it under the same hold (the flow, started by this function, gets it). `note` receives the notes of the
    run's calibration sets (default: the log's warnings); `progress`: lines and bars on stderr. `executor` may be
    a function of the request that makes one, called only when the run has work (the CLI's: Prefect is imported
    then, never for a finished rerun)."""
    say = note or (executor.log.warning if isinstance(executor, Executor) else LOG.warning)
    with hold_series(request.store, request.model_id, wait=wait):
        if state is None:
            # An unknown folder or repo, an empty selection, sets or taus that differ from the stored series' fail
            # here, before anything is loaded; a rerun with nothing to do answers from it.
            with early(f"dormant track: {request.model_id}: listing its checkpoints and the stored results"):
                try:
                    state = tracking.series_state(request)
                except tracking.NothingSelected as e:
                    _record_set_aside(request, e.plan)
                    raise
            if state.request.report:
                from dormant_tasks.outputs import check_report_folder

                check_report_folder(state.request.store, state.request.model_id, state.request.reports_dir)
            for calibration in state.request.calibration_sets:
                for line in calibration.notes("track"):
                    say(line)
            if state.plan.skipped_names:  # as `dormant checkpoints` says it: no name is skipped silently
                say(f"dormant track: note: {skipped_note(state.plan.skipped_names)}")
        if state.done:
            return finished_rerun(state)
        check_store(state.request.store, "writes")
        if not isinstance(executor, Executor):
            executor = executor(state.request)
        return executor.run(state.request, state, partial(_work, state, progress=progress))


def _record_set_aside(request: TrackRequest, plan) -> None:
    """A run refused because its selection matches only checkpoints the audit set aside: what the audit found is
    recorded all the same (on a writable store that holds the series), and the derived tables follow, so the
    findings and the report stop reading the stored rows of checkpoints that are no longer points of training."""
    if not writable(request.store) or not tracking.SeriesView.exists(request.store, request.model_id):
        return
    tracking.record_audit(request, plan)
    tracking.rederive(request.store, request.model_id, request.fdr, request.fdr_method)


def finished_rerun(state: SeriesState) -> TrackResult:
    """A rerun of a fully stored selection: loads no model, needs no executor; records what the audit set aside
    and (on a writable store) the listing, brings derived tables that are missing, damaged or stale up to date
    (a read-only store whose tables are current answers too), and reuses or renders the report."""
    request = state.request
    refused = tracking.record_audit(request, state.plan)
    if writable(request.store):  # a read-only store answers a finished rerun: its listing stays as it is
        tracking.record_listing(request.store, request.model_id, state.plan, request.request_id)
    summary = tracking.rederive(request.store, request.model_id, request.fdr, request.fdr_method)
    report = str(_render_report(request).index_html) if request.report else None
    skipped = len(state.plan.selected)
    if request.budget is not None:  # a spent budget: the selected checkpoints it stored, not every one
        names = {key.revision for key in stored_checkpoint_keys(request.store, request.model_id)}
        skipped = sum(r.name in names for r in state.plan.selected)
    return TrackResult(
        model_id=request.model_id,
        store=request.store,
        analysed=0,
        skipped=skipped,
        failed=tuple((r.revision.name, r.failed or "") for r in refused),
        n_checkpoints=summary.n_checkpoints,
        n_transitions=summary.n_transitions,
        n_stale=summary.n_stale,
        request_id=request.request_id,
        report=report,
    )


def answer_from_store(request: TrackRequest) -> TrackResult | None:
    """The result of a finished rerun (`finished_rerun`), or None when the run has work to do (or no store)."""
    from dormant_tasks.store import is_store

    if not is_store(request.store):
        return None
    state = tracking.series_state(request)
    return finished_rerun(state) if state.done else None


def writable(store) -> bool:
    """Whether a run may bring the store's derived records up to date: not a read-only or published store."""
    try:
        check_store_path(store, "writes")
    except StoreError:
        return False
    return True


def _work(state: SeriesState, executor: Executor, *, progress: bool) -> TrackResult:
    """The run's work once its state asks for some: the audit's refusals recorded, the taus fixed (scoring one
    checkpoint for a new series), the listing recorded, every pending checkpoint computed and written, the
    transitions derived, the report rendered."""
    request, plan, log = state.request, state.plan, executor.log
    if request.report:  # report staging folders that a killed run left (the store's went as it took the series)
        sweep_dead_temps(report_folder(request.model_id, request.reports_dir).resolve().parent)
    refused = tracking.record_audit(request, plan)  # before any download: what the audit set aside, and why
    for name, flag in ({} if request.keep_duplicates else plan.set_aside).items():
        log.info("%s: set aside, not a point of training: %s", name, flag.text)
    log.info(
        "%s: %d of %d checkpoints selected (%s), calibration %s, request %s",
        request.model_id,
        len(plan.selected),
        len(plan.listed),
        request.selection.describe(),
        ", ".join(c.calibration_id for c in request.calibration_sets),
        request.request_id,
    )
    ahead = _prefetch_past_reference(state, executor)
    write = partial(_write_checkpoint, log)
    with _fixing_taus(state, progress):
        series = tracking.resolve_series_taus(request, state, executor.score, write)
    # the listing, once the series holds its taus (a run refused before then leaves nothing): what lies between pairs
    tracking.record_listing(request.store, request.model_id, plan, request.request_id)
    log.info(
        "taus %s: %s",
        series.taus_id,
        ", ".join(f"{t.score_fn} {t.direction} {t.value:.4g}" for t in series.taus.values()),
    )
    for warning in series.warnings:
        log.info("%s", warning)
    results = refused + _run_checkpoints(state, series, executor, write, progress, ahead)
    summary = tracking.derive_series(request)
    result = TrackResult.of(
        request,
        results,
        n_checkpoints=summary.n_checkpoints,
        n_transitions=summary.n_transitions,
        n_stale=summary.n_stale,
        taus_id=series.taus_id,
        warnings=tuple(series.warnings),
        input_scores=request.input_scores.value,
    )
    log.info(
        "%s: %d checkpoints analysed now, %d already stored, %d failed; series holds %d checkpoints, %d transitions",
        request.model_id,
        result.analysed,
        result.skipped,
        len(result.failed),
        summary.n_checkpoints,
        summary.n_transitions,
    )
    if request.report:
        report = _render_report(request)
        executor.reported(report)
        result = replace(result, report=str(report.index_html))
    return result


def _render_report(request: TrackRequest):
    """The series' evolution report (unchanged inputs: the report as it is)."""
    from dormant_tasks.reporting import ReportSettings, render_report
    from dormant_tasks.statistics import FDR_METHOD

    settings = ReportSettings(
        fdr=request.fdr, fdr_method=request.fdr_method or FDR_METHOD, paired_fdr=request.paired_fdr or "pair"
    )
    return render_report(request.store, request.model_id, request.reports_dir, settings, reuse=True)


def _fixing_taus(state: SeriesState, progress: bool):
    """While a series' taus are fixed by scoring one checkpoint (a new series, a --retau): a progress line every
    20 s on a pipe (`progress.waiting`), so that the run is not silent while it downloads, loads and scores it."""
    if not progress or state.taus is not None:
        return contextlib.nullcontext()
    return waiting(f"taus of {state.request.model_id}: {tracking.taus_step(state.request, state.plan)}")


def _prefetch_past_reference(state: SeriesState, executor: Executor) -> dict:
    """A new series: `resolve_series_taus` scores one checkpoint before any other (the reference of quantile
    taus, or the first selected one). Download it first (alone), then start the download of the first checkpoint
    the loop analyses, so that one overlaps that scoring too. Returns {revision: download future}. Only for a new
    series: there every selected checkpoint will be analysed, so no download is wasted."""
    request, plan = state.request, state.plan
    if not _downloads_ahead(request, executor) or not state.is_new or request.budget is not None:
        return {}  # (a budgeted run chooses its checkpoints as it goes)
    reference = tracking.taus_checkpoint(request, plan)
    first = next((r for r in plan.selected if r != reference), None)
    if first is None:
        return {}
    with contextlib.suppress(Exception):  # a failure is the taus' scoring's to report, as any download's
        executor.fetch(request, reference).result()
    return {first: executor.fetch(request, first)}


def _run_checkpoints(
    state: SeriesState, series, executor: Executor, write, progress: bool, ahead: dict
) -> list[CheckpointResult]:
    """Compute and write every selected checkpoint not yet stored; the taus' one (if selected) is already done. `write`: the run's one writer."""
    request, selected = state.request, state.plan.selected
    todo = tracking.pending_revisions(request, state, series)
    done = [series.reference] if series.reference is not None else []
    skipped = [
        CheckpointResult(r, tracking.known_commit(r) or "", True, {}, {})
        for r in selected
        if r not in todo and r not in [d.revision for d in done]
    ]
    results = done + skipped
    total = len(selected) if request.budget is None else max(len(results), min(len(selected), request.budget))
    executor.progress(len(results), total)
    # A bar on a terminal; on a pipe or file a plain line at least every 20 s, even while one checkpoint downloads.
    # It counts from 0 what is left to score; those already done (stored, or scored for the taus) are named beside it.
    before = f" ({len(results)} of {total} already done)" if results else ""
    bar = progress_bar(
        total=total - len(results), desc=f"checkpoints to score{before}", unit="ckpt", enabled=progress and bool(todo)
    )

    def advance(result: CheckpointResult) -> None:
        results.append(result)
        bar.update(1)
        executor.progress(len(results), total)

    try:
        if request.retau:  # checkpoints with kept per-input scores are re-aggregated here, without a model
            todo = [r for r in todo if not _reaggregated(request, r, series, write, advance)]
        if request.budget is not None:
            _run_budgeted(state, todo, series, executor, write, advance)
        else:
            for result in _computed(request, todo, series, executor, write, ahead):
                advance(result)
    finally:
        bar.close()
    return results


def _downloads_ahead(request: TrackRequest, executor: Executor) -> bool:
    """Whether the next checkpoint downloads while one is scored: the executor's disk is the scoring's, and the
    source downloads (a local folder is read in place)."""
    return executor.prefetch and source_for(request.source).is_remote


def _computed(request: TrackRequest, todo: list, series, executor: Executor, write, ahead: dict) -> Iterator:
    """Each checkpoint of `todo` computed by the executor (at most `window` at once; with `prefetch`, the next one
    downloading meanwhile, one download at a time) and written here as it comes back; their results."""
    window = executor.window or max(1, len(todo))
    ahead_too = _downloads_ahead(request, executor)
    queue: list = list(todo)
    running: dict = {}  # future -> its revision
    with executor.waiting(request):  # (on a cluster: its scheduler's lines off while the run waits)
        while queue or running:
            while queue and len(running) < window:
                current = queue.pop(0)
                if current in ahead:  # one download at a time: the next starts once this one is on disk (or failed,
                    with contextlib.suppress(Exception):  # and the computing retries it), else they share the bandwidth
                        ahead.pop(current).result()
                nxt = queue[0] if queue else None
                if ahead_too and nxt is not None and nxt not in ahead:
                    ahead[nxt] = executor.fetch(request, nxt)  # overlaps this scoring
                running[executor.compute(request, current, series)] = current
            future = next(iter(running)) if len(running) == 1 else next(iter(executor.as_completed(list(running))))
            revision = running.pop(future)
            yield write(request, revision, executor.outcome(future))


def _run_budgeted(state: SeriesState, todo: list, series, executor: Executor, write, advance) -> None:
    """`--budget`: the budgeted search over the selection (`tracking.run_budgeted`), the checkpoints stored already
    counted: its coarse pass, then rounds of refinement (`round_size` checkpoints a round), each round computed and
    written as any run's checkpoints are."""
    request, log = state.request, executor.log

    def run(revisions: list) -> list[CheckpointResult]:
        log.info("budget: scoring %s", ", ".join(r.name for r in revisions))
        outcomes = list(_computed(request, revisions, series, executor, write, {}))
        for result in outcomes:
            advance(result)
        return outcomes

    scored = tracking.run_budgeted(request, state.plan.selected, todo, run, executor.round_size(request))
    log.info(
        "budget: %d of %d selected checkpoints scored (budget %d)",
        len(scored),
        len(state.plan.selected),
        request.budget,
    )


def _write_checkpoint(log, request: TrackRequest, revision, outcome) -> CheckpointResult:
    """The run's one write of a checkpoint: `outcome` is the rows computed (or re-aggregated), or the failure that
    stopped its computing (`tracking.checkpoint_outcome`); the rows are committed, the failure recorded
    (`request.fail_fast`: raised), by `tracking.write_checkpoint`."""
    result = tracking.write_checkpoint(request, revision, outcome)
    if result.failed is not None:
        log.warning("%s: failed, recorded; the run goes on (a rerun retries it): %s", revision.name, result.failed)
    else:
        log.info(
            "%s: stored (write %.1fs); %s dormant %s",
            revision.name,
            result.seconds.get("write", 0),
            DEFAULT_FN,
            f"{result.pct_dormant[DEFAULT_FN]:.1f}%" if DEFAULT_FN in result.pct_dormant else "n/a",
        )
    return result


def _reaggregated(request: TrackRequest, revision, series, write, advance) -> bool:
    """--retau: re-aggregate a checkpoint whose per-input scores were kept, and write it; False when they were
    not (the checkpoint is scored again)."""
    rows = tracking.reaggregate_from_input_scores(request, revision, series)
    if rows is not None:
        advance(write(request, revision, rows))
    return rows is not None


def stored_note(request: TrackRequest) -> str:
    """The line an interrupted run prints: what the store holds of the series now."""
    n = len({key.revision for key in stored_checkpoint_keys(request.store, request.model_id)})
    return f"interrupted: {n} checkpoint{'s' if n != 1 else ''} of {request.model_id} stored, rerun to continue"
