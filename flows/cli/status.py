"""`dormant status`: one line per model series of a store (checkpoints, steps, % dormant, transitions).

Counts are of the series' current results (`SeriesView`): its current taus and calibration set.
"""

from __future__ import annotations

import sys

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.grammar import store_option
from dormant_tasks.options import Option
from dormant_tasks.text import plural

from .options import add_options

# The v1 "dormant head" rule, the function the status line summarises.
MAIN_FN = DEFAULT_FN


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "status", help="summarise the model series stored in a Parquet store", description=__doc__.split("\n\n")[0]
    )
    add_options(
        p,
        [
            store_option(published=True),
            Option(
                "--verify",
                "read every byte of the store: each file's content checksum and page checksums (plain status checks "
                "every file's size, footer and columns, and the content of all but the per-checkpoint results)",
                kw={"action": "store_true"},
            ),
        ],
    )
    p.set_defaults(func=run)


def series_line(store, model_id: str) -> str:
    """The series' line (its primary calibration set), and one indented line per further calibration set."""
    from dormant_tasks.evaluation import series_evaluations
    from dormant_tasks.tracking import open_views

    views = open_views(store, model_id)  # every calibration set, the primary first
    if not views:
        n_eval = series_evaluations(store, model_id).num_rows
        return f"{model_id}: not tracked ({n_eval} evaluation rows)" + failed_lines(store, model_id)
    view = views[0]
    n = len(view.checkpoints)
    parts = [f"{n} checkpoint{'s' if n != 1 else ''}"]
    if n:
        parts.append(f"steps {view.checkpoints[0]['step']}..{view.checkpoints[-1]['step']}")
    parts += _set_parts(view)
    kept = sum(bool(c["input_scores_kept"]) for c in view.checkpoints)
    parts.append(f"per-input scores kept for {kept}/{n}")
    line = f"{model_id}: " + ", ".join(parts)
    if view.n_stale:
        line += (
            f" ({view.n_stale} more checkpoint{'s' if view.n_stale != 1 else ''} stored under older taus or "
            "calibration: `dormant track --retau` on the whole series brings them in)"
        )
    if view.set_aside:
        k = len(view.set_aside)
        line += (
            f" ({k} checkpoint{'s' if k != 1 else ''} of another architecture set aside, e.g. {view.set_aside[0]}: "
            "a series compares the same heads throughout; track them as a series of their own)"
        )
    if len(views) > 1:
        line += f"\n  calibration {view.calibration_id} (primary, of {len(views)} sets)"
        for other in views[1:]:
            m = len(other.checkpoints)
            line += f"\n  calibration {other.calibration_id}: {m} checkpoint{'s' if m != 1 else ''}, "
            line += ", ".join(_set_parts(other))
    return line + listing_line(view) + set_aside_lines(view) + identical_lines(view) + failed_lines(store, model_id)


def listing_line(view) -> str:
    """How much of the series' listing is scored, when a run left listed checkpoints unscored (a --budget search,
    a --max or --every grid); '' when every available one is scored or no listing is recorded."""
    from dormant_tasks.tracking import listed_checkpoints

    rows = listed_checkpoints(view.store, view.model_id) or []
    available = [r for r in rows if r["available"]]
    scored = set(view.revisions)
    open_ = [r for r in available if r["revision"] not in scored]
    if not open_:
        return ""
    return (
        f"\n  listed: {plural(len(available), 'checkpoint')} a run may score, {len(open_)} not scored (changes between "
        "scored checkpoints are located to intervals: `dormant findings` says which)"
    )


def set_aside_lines(view) -> str:
    """One indented line per branch the integrity audit set aside (a duplicate, never a point of training; or
    kept by --keep-duplicates, marked), with the branch kept in its place; '' when none."""
    if not view.duplicates:
        return ""
    n = len(view.duplicates)
    out = f"\n  {n} branch{'es' if n != 1 else ''} set aside by the integrity audit (`dormant checkpoints --audit`):"
    from dormant_tasks.tracking import set_aside_label

    for d in view.duplicates:
        mark = "kept anyway (--keep-duplicates), marked" if d["kept"] else "not a point of training"
        out += f"\n    {d['revision']}: {set_aside_label(d)}, {mark}"
    return out


def identical_lines(view) -> str:
    """The second net: checkpoints whose stored scores are bit-identical for every head and function (a copy
    the audit could not see, or weights that differ only where no score looks); '' when none."""
    groups = view.identical_scores()
    if not groups:
        return ""
    out = "\n  checkpoints with bit-identical scores for every head and function (likely copies of one checkpoint):"
    for group in groups:
        out += f"\n    {' = '.join(group)}"
    return out


def failed_lines(store, model_id: str) -> str:
    """One indented line per checkpoint that failed (could not be downloaded, loaded or scored) and was not
    stored since, with its reason; '' when none."""
    from dormant_tasks.tracking import failed_checkpoints

    rows = failed_checkpoints(store, model_id)
    if not rows:
        return ""
    n = len(rows)
    out = f"\n  {n} checkpoint{'s' if n != 1 else ''} failed, not stored (a rerun of `dormant track` retries):"
    for r in rows:
        out += f"\n    {r['revision']}: {r['reason']}"
    return out


PENDING_NOTE = "confident ones not decided yet: the report decides them"


def _set_parts(view) -> list[str]:
    """% dormant at the first and last checkpoint (two files, at any series length) and the transitions."""
    parts = []
    if MAIN_FN in view.taus and view.checkpoints:
        ends = [view.revisions[0], view.revisions[-1]]
        heads = view.head_scores([MAIN_FN], ends).to_pydict()
        pct = {r: [d for rr, d in zip(heads["revision"], heads["dormant"]) if rr == r] for r in ends}
        first, last = (100 * sum(pct[r]) / max(len(pct[r]), 1) for r in ends)
        parts.append(f"{MAIN_FN} dormant {first:.1f}% -> {last:.1f}%")
    import pyarrow.compute as pc

    from dormant_tasks.tracking import derived_lag, fdr_rule, mask_change_counts

    # the counts, never the decision: the functions' counts from the files' metadata, MAIN_FN's rows counted in Arrow
    by_fn = mask_change_counts(view)
    if not by_fn and len(view.checkpoints) > 1 and not view.derived():
        parts.append("transitions not derived yet (an interrupted run: `dormant track` derives them)")
        return parts
    lag = derived_lag(view)
    if lag is not None:
        parts.append(
            f"transitions derived over {lag[0]} of {lag[1]} checkpoints (a run stopped before deriving the rest: "
            "the next `dormant track` derives them)"
        )
    # every number of one function (the other functions' counts mix in quantile-tau artefacts): MAIN_FN's, with
    # the whole series' count said as such
    main = view.stored_transitions([MAIN_FN])
    confident, blips = (int(pc.sum(pc.fill_null(main.column(c), False)).as_py() or 0) for c in ("confident", "blip"))
    last = view.checkpoints[-1] if view.checkpoints else {}
    n_heads = int(last.get("n_layers") or 0) * int(last.get("n_heads") or 0)
    rule = confidence_rule(fdr_rule(view.store, view.model_id, view), n_heads)
    n_fns = len(view.taus) or len(by_fn)
    # an append leaves the decision over the whole series pending; the next read of the transitions takes it
    sure = PENDING_NOTE if view.decision_pending() else f"{confident} confident at {rule}{reach_note(view, n_heads)}"
    parts.append(
        f"{MAIN_FN} transitions {main.num_rows} ({sure}, {plural(blips, 'blip')}); "
        f"{plural(sum(by_fn.values()), 'transition')} over all {plural(n_fns, 'function')}"
    )
    return parts


def reach_note(view, n_heads: int) -> str:
    """ "; no state can be confident with these clusters at N heads ..." when the stored clusters of the inputs cannot
    carry a confident state (or only once several heads change): `statistics.cluster_reach`, from their sizes."""
    from dormant_tasks.statistics import FDR, FDR_METHOD, cluster_reach, cluster_sizes
    from dormant_tasks.tracking import fdr_rule, input_clusters

    labels = input_clusters(view.checkpoints_table(), view.model_id)
    if labels is None or not n_heads:
        return ""
    fdr, method = fdr_rule(view.store, view.model_id, view) or (FDR, FDR_METHOD)
    note = cluster_reach(cluster_sizes(labels), n_heads, fdr, method).message()
    return f"; {note}" if note else ""


def confidence_rule(rule: tuple[float, str] | None, n_heads: int | None = None) -> str:
    """Which rule decided the stored `confident` (docs/SCORES.md, "Confidence"): confident states with the
    recorded correction, its level and the family it is held over, or a rule not recorded (an older version's, or a
    run stopped before it recorded its rule: the files themselves are whole, so `store repair --check` finds nothing;
    the next `dormant track` or `store repair` derives them again)."""
    if rule is None:
        return (
            "a rule not recorded (an older version's, or a run stopped before recording it; the files are whole): "
            "`dormant store repair` derives them again"
        )
    level, method = rule
    return f"{method.upper()} q <= {level:g} over {plural(n_heads, 'head') if n_heads else 'heads'}"


def run(args) -> int:
    from dormant_tasks.errors import StoreError
    from dormant_tasks.store import (
        PUBLISHED,
        StoreFolder,
        damage_fix,
        damaged_files,
        list_models,
        publication_damage,
        publication_listed,
        unchecked_files,
    )

    store = StoreFolder.open(args.store)  # the one check of the store
    root = store.root
    models = list_models(store)
    if not models:
        raise StoreError(
            f"store {args.store!r} holds no model series yet: run `dormant track --model ... --store {args.store}` first"
        )
    # every file checked (sizes, footers, columns; with --verify every byte), a publication's also against its
    # record (its card and findings table too): each damaged one named once, with the fix this store takes
    found = damaged_files(store, verify=args.verify) + publication_damage(store, verify=args.verify)
    damage: dict = {}
    for d in found:  # one line a file, with its first reason
        damage.setdefault(d.path, d)
    fix = damage_fix(args.store)
    for d in damage.values():
        print(f"dormant status: error: damaged file {d.path.relative_to(root)} ({d.reason}); {fix}", file=sys.stderr)
    damaged = {d.model_id for d in damage.values()}
    failed = bool(damage)
    for model_id in models:
        if model_id in damaged:
            continue
        try:
            print(series_line(store, model_id))
        except StoreError as e:  # one inconsistent series should not hide the others: its error, then exit 2
            print(f"dormant status: error: {model_id}: {e}", file=sys.stderr)
            failed = True
    if args.verify and not failed:
        listed = publication_listed(store)  # a publication's files are checked against its record
        unchecked = [p for p in unchecked_files(store) if p not in listed]
        if unchecked and listed:
            print(
                f"verified: every file of the publication matches its {PUBLISHED}; {plural(len(unchecked), 'file')} "
                f"beside them it does not list (added since it was written; e.g. {unchecked[0].relative_to(root)}) "
                "are not part of it"
            )
        elif unchecked:
            print(
                f"verified: {len(unchecked)} file{'s' if len(unchecked) != 1 else ''} of the store have no recorded "
                f"checksum yet (written before the store kept them, or a result left by a write that did not finish, "
                f"which no manifest row names and no read sees; e.g. {unchecked[0].relative_to(root)}): their footers "
                f"and page checksums are whole; `dormant store repair --store {args.store}` records the first and "
                "deletes the second"
            )
        else:
            print("verified: every file matches its recorded checksum")
    return 2 if failed else 0
