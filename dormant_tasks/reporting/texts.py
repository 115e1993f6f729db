"""Every text of a series' report: summary.md (`report_markdown`), the findings' paragraphs (`findings_lines`,
also `dormant findings` and the page's Findings section) and the notes and labels that index.html (`page.py`)
and summary.md share, so that both say the same thing in the same words. Every user's string in the Markdown
(series, revision, calibration set, task names, failure reasons) goes through `text.md`; the page gets the same
texts unescaped (its template escapes them for HTML)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

from dormant_tasks.checkpoints import format_tokens
from dormant_tasks.engine import DORMANT_RULE
from dormant_tasks.evaluation import AUC_UNIT, WARNED
from dormant_tasks.findings import EARLY, MIN_RATE_TOKENS, T_SEEDS, WELCH, Findings, Quantities
from dormant_tasks.reporting.figure_data import evaluation_groups, summary_rows
from dormant_tasks.reporting.role_texts import roles_line
from dormant_tasks.reporting.series_data import ReportSeries
from dormant_tasks.reporting.sets import CalibrationSets
from dormant_tasks.statistics import MIN_UNITS, Estimate, Share
from dormant_tasks.text import md, plural
from dormant_tasks.tracking import QUANTILE_DEFAULTS, set_aside_label

# ---------------------------------------------------------------- summary.md


def report_markdown(
    series: ReportSeries, sets: CalibrationSets | None = None, found: Findings | None = None, positions=()
) -> str:
    """The keyed markdown summary of a series (summary.md, and the track flow's Prefect artifact); with `sets`
    (several calibration sets), a line of their agreement and a table of each set's transitions; with `found`,
    the findings (`findings_lines`); with `positions` (`tau_positions`), where each tau sits."""
    t = series.tokens
    lines = [
        f"# Dormant heads: {md(series.model_id)}",
        "",
        f"{plural(len(t), 'checkpoint')} from {md(series.revisions[0])} ({format_tokens(t[0])} tokens) to "
        f"{md(series.revisions[-1])} ({format_tokens(t[-1])} tokens); {series.n_layers} layers x "
        f"{series.n_heads} heads; calibration set {md(series.checkpoints[0]['calibration_id'])} (its name, text "
        f"count and a hash of its texts); taus {md(series.checkpoints[0]['taus_id'])} (a hash of every function's "
        "threshold: a change of any tau starts a new one, and `dormant track --retau` rescores under it).",
        "",
        DORMANT_RULE,
        "",
        "| score function | tau | first checkpoint with a dormant head | final % dormant | fell dormant | woke "
        "| confident | blips | heads that changed state |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary_rows(series):
        lines.append(
            f"| {r['score_fn']} | {r['direction']} {r['tau']:g} | {md(first_dormant_label(r))} | "
            f"{r['final_pct_dormant']:.2f} | "
            f"{r['fell_dormant']} | {r['woke']} | {r['confident']} | {r['blips']} | {r['heads_ever_changed']} |"
        )
    note = raw_quantile_note(series.tau_sources)
    if note:
        lines += ["", f"Note: {md(note)}"]
    windows = windows_note(series)
    if windows:
        lines += ["", f"Note: {md(windows)}"]
    if series.failed:
        lines += ["", f"{failed_note(series.failed)}:", ""]
        lines += [f"- {md(r['revision'])}: {md(r['reason'])}" for r in series.failed]
    lines += integrity_lines(series)
    if positions:
        lines += [
            "",
            "Where each tau sits at the reference checkpoint: share of (input, head) pairs it marks inactive "
            "(quantile of tau among the per-input scores).",
            "",
            "| score function | reference checkpoint | marks | quantile of tau |",
            "|---|---|---:|---:|",
        ]
        for p in positions:
            if p.share is None:
                lines.append(f"| {p.score_fn} | {md(p.reference_revision)} | not scored there | |")
            else:
                lines.append(f"| {p.score_fn} | {md(p.reference_revision)} | {100 * p.share:.1f}% | {p.quantile:.3f} |")
        lines += [f"Warning: {md(p.warning)}." for p in positions if p.warning]
    lines += [
        "",
        "Each head's score over training, with its tau: in the per-head view of index.html (pick a head; the "
        "page draws it, no server needed).",
    ]
    if found is not None:
        lines += ["", "## Findings", "", *findings_lines(found)]
    if sets is not None:
        lines += ["", calibration_sets_line(sets), "", *calibration_sets_table(sets)]
    for g in evaluation_groups(series):
        lines += [
            "",
            f"## {md(g.task)}, {g.shots}-shot, {md(g.revision)}: % of heads zeroed within 1 point "
            f"(base accuracy {g.base_accuracy:.2f}%, {g.n_items} items)",
            "",
            f"Protocol: {md(g.protocol)}.",
            "",
            f"| score function | % zeroed within 1 point | normalised AUC ({AUC_UNIT}) |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {f} | {g.within_text(f)}{WARNED if g.warnings.get(f) else ''} | {g.auc[f]:.2f} |" for f in g.curves
        ]
        lines += [f"Warning (!): {md(w)}." for w in g.warning_lines()]
    return "\n".join(lines) + "\n"


def calibration_sets_line(sets: CalibrationSets) -> str:
    """summary.md's line: per pair of sets, the mean Jaccard (over score functions) at its last checkpoint."""
    last = {rev for rev, _ in sets.last_jaccard.values()}
    one = len(last) == 1  # the usual case: every pair's last shared checkpoint is the series' last
    parts = [
        f"{md(a)} vs {md(b)} {'undefined' if np.isnan(j) else f'{j:.2f}'}{'' if one else f' ({md(rev)})'}"
        for (a, b), (rev, j) in sets.last_jaccard.items()
    ]
    at = f" ({md(next(iter(last)))})" if one else ""
    return (
        f"Calibration sets ({len(sets.calibration_ids)}): mean Jaccard of the dormant masks at the last checkpoint"
        f"{at}, over the score functions both sets track and that mark a head on either (undefined when both "
        f"masks are empty): {'; '.join(parts) or 'no checkpoint shared'}."
    )


def calibration_sets_table(sets: CalibrationSets) -> list[str]:
    """summary.md's table of the sets: per set its checkpoints, % dormant at its last one and its transitions
    under the report's function, with the confident ones and the blips (the summary above is the primary set's)."""
    fn = sets.score_fn
    lines = [
        f"| calibration set | checkpoints | last checkpoint | % dormant there ({fn}) | fell dormant | woke "
        "| confident | blips |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in sets.set_rows:
        pct = "not tracked" if r["final_pct_dormant"] is None else f"{r['final_pct_dormant']:.2f}"
        lines.append(
            f"| {md(r['calibration_id'])} | {r['n_checkpoints']} | {md(r['last_revision'] or '')} | {pct} | "
            f"{r['fell_dormant']} | {r['woke']} | {r['confident']} | {r['blips']} |"
        )
    return lines


# ---------------------------------------------------------------- labels and notes (index.html and summary.md)


def first_dormant_label(row: dict) -> str:
    """A summary row's first checkpoint with a dormant head, e.g. 'stage1-step10-tokens1000 (1K tokens)'."""
    if not row["first_dormant_revision"]:
        return "never"
    return f"{row['first_dormant_revision']} ({format_tokens(row['first_dormant_tokens'])} tokens)"


def raw_quantile_note(tau_sources: list[dict]) -> str | None:
    """Why the raw-unit functions with a quantile tau do not read like the _ln ones (HTML and summary.md).

    Their tau is the q-quantile of the reference checkpoint's own pooled scores, so their curve is pinned
    near q there whatever the heads do; elsewhere it follows the raw scale of the layers, which training
    grows and shrinks. None when no such function is in the series.
    """
    rows = [r for r in tau_sources if r["source"] == "quantile" and r["score_fn"] in QUANTILE_DEFAULTS]
    if not rows:
        return None
    fns = ", ".join(f"{r['score_fn']} (q = {r['quantile']:g})" for r in rows)
    refs = ", ".join(sorted({str(r["reference_revision"]) for r in rows}))
    return (
        f"Raw-unit functions with a quantile tau: {fns}. Each tau is the q-quantile of the pooled per-input "
        f"scores of the reference checkpoint {refs} (by default the series' last), so these functions mark "
        "about q of the (input, head) pairs inactive there and their % dormant ends near q by construction. "
        'Raw norms and entropies change scale as training proceeds, so their "dormant" heads at earlier '
        "checkpoints reflect the layer's scale rather than the head's behaviour: their curves are not "
        "comparable with those of the _ln functions."
    )


def windows_note(series: ReportSeries) -> str | None:
    """One line when the series has windowed layers: how many, their window, and where their reading is."""
    if not series.windows:
        return None
    sizes = sorted({w for _, w in series.windows})
    n = len(series.windows)
    return (
        f"{n} of {series.n_layers} layers attend over a sliding window of {' or '.join(f'{w:,}' for w in sizes)} "
        f"tokens (layers {_layer_list([layer for layer, _ in series.windows])}): their scores follow the windowed "
        "attention, so first-token scores (awft, aeqd) there compare only with layers of the same window on inputs "
        "of the same length, and their dormancy is flagged, not equated with a full layer's (docs/SCORES.md, \"Windowed "
        'layers")'
    )


def _layer_list(layers: list[int], most: int = 12) -> str:
    shown = ", ".join(str(x) for x in layers[:most])
    return shown + (f", ... ({len(layers) - most} more)" if len(layers) > most else "")


def integrity_lines(series) -> list[str]:
    """What the integrity audit set aside, and checkpoints of bit-identical scores (summary.md; the page's
    provenance table shows the same)."""
    lines = []
    if getattr(series, "set_aside", ()):
        lines += ["", "Set aside by the integrity audit (`dormant checkpoints --audit`), not points of training:", ""]
        lines += [
            f"- {md(d['revision'])}: {md(set_aside_label(d))}" + (" (kept anyway, marked)" if d["kept"] else "")
            for d in series.set_aside
        ]
    for group in getattr(series, "identical", ()):
        lines += [
            "",
            f"Warning: bit-identical scores for every head and function: {md(' = '.join(group))} (likely "
            "copies of one checkpoint)",
        ]
    return lines


def failed_note(failed) -> str:
    """The heading of a series' failed checkpoints (`failed_checkpoints` rows), in the report and summary.md."""
    n = len(failed)
    return f"{n} checkpoint{'s' if n != 1 else ''} failed, not stored (a rerun of `dormant track` retries)"


def tau_source(row: dict | None) -> str:
    if row is None:
        return "not recorded"
    if row["source"] == "quantile":
        return f"quantile {row['quantile']:g} of {row['reference_revision']}'s per-input scores, pooled"
    return str(row["source"])


# ---------------------------------------------------------------- findings (docs/SCORES.md §7)


def no_interval(x: Estimate | Share) -> str:
    """Why a number stands without an interval: too few units behind it, or none drawn."""
    if 0 < getattr(x, "n_units", 0) < MIN_UNITS:
        return f"no interval: {x.n_units} {_units_of(x.method, x.n_units)}, fewer than {MIN_UNITS}"
    return "no interval"


def few_units(x: Estimate | Share) -> str:
    """ "; only n heads: few" after an interval that fewer than MIN_UNITS units back (Wilson's interval of 1 of 3
    heads is drawn, but it rests on 3 heads): shown, marked, with its n; "" otherwise."""
    n = int(getattr(x, "n_units", 0) or 0)  # any value with an interval (`compare_tables.cell_text`)
    return f"; only {n} {_units_of(getattr(x, 'method', ''), n)}: few" if 0 < n < MIN_UNITS else ""


def _units_of(method: str, n: int) -> str:
    unit = next((u for u in ("layer", "seed", "cluster", "item") if f"{u}s" in method), "head")
    return unit if n == 1 else unit + "s"


def _pct(share: Share | None, of: str = "heads") -> str:
    if share is None or not share.n:
        return "undefined (0 of 0)"
    ci = (
        no_interval(share)
        if math.isnan(share.low)
        else f"95% CI {100 * share.low:.1f}-{100 * share.high:.1f}%{few_units(share)}"
    )
    return f"{share.k} of {share.n} {of} ({100 * share.value:.1f}%, {ci})"


def _num(x: float) -> str:
    """A count-like number to three significant digits, never in scientific notation (6,840, 12.3, 0.0412)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ci(e: Estimate, fmt=_num, unit: str = "") -> str:
    """The value, its unit and "(95% CI low-high)" ("low to high" when an end is negative); or "undefined";
    an infinite value or end (right-censored) reads "not reached"."""
    if math.isnan(e.value):
        return "undefined"
    if math.isinf(e.value):
        return "not reached"

    def end(x: float) -> str:
        return "not reached" if math.isinf(x) else fmt(x)

    dash = " to " if min(e.low, e.high) < 0 or math.isinf(e.high) else "-"
    ci = no_interval(e) if math.isnan(e.low) else f"95% CI {end(e.low)}{dash}{end(e.high)}{few_units(e)}"
    return f"{fmt(e.value)}{unit} ({ci})"


def _settled_list(q: Quantities, most: int = 20) -> str:
    """Per head that settled dormant, where it settled (dormant at >= STABLE from then on), earliest first."""
    heads, settled = q["emergence.heads"], q["emergence.settled_tokens"]
    order = np.argsort(settled, kind="stable")
    parts = [f"{heads[i]} at {format_tokens(settled[i])}" for i in order[:most]]
    return ", ".join(parts) + (f", and {len(order) - most} more" if len(order) > most else "")


def _interval_list(q: Quantities, most: int = 12) -> str:
    """Each compared interval's changes with its checkpoint spacing (the first `most` of them)."""
    tokens, spacing, steps = (q[f"transitions.interval_{x}"] for x in ("tokens", "spacing", "steps"))
    confident, other = q["transitions.interval_confident"], q["transitions.interval_other"]
    parts = [
        f"to {format_tokens(tokens[i])} (spacing {format_tokens(spacing[i])} tokens, {steps[i]} "
        f"steps): {confident[i]} confident of {confident[i] + other[i]}"
        for i in range(min(most, len(tokens)))
    ]
    more = len(tokens) - most
    return "; ".join(parts) + (f"; and {more} more intervals" if more > 0 else "")


def tau_marks_nothing(score_fn: str, direction: str, tau: float, n_checkpoints: int) -> str:
    """The words for a function under which no head is dormant at any checkpoint: its tau marks nothing here,
    which says where the tau sits on this model's scores, not that every head is active."""
    return (
        f"no head is ever dormant: {score_fn}'s tau (inactive if score {direction} {tau:g}) marks no head at any of "
        f"the {n_checkpoints} checkpoints, so it says where this tau sits on this model's scores, not that every head "
        "is active (the report's taus table gives the share of (input, head) pairs it marks)"
    )


# Findings one checkpoint cannot support: how heads change needs two checkpoints, a rate over intervals three
MIN_DYNAMICS_CHECKPOINTS, MIN_RATE_CHECKPOINTS = 2, 3


def findings_lines(f: Findings, esc: Callable[[str], str] = md) -> list[str]:
    """The three findings (and the head roles', when tracked) as markdown paragraphs (`dormant findings`, summary.md, the report); `esc` escapes the
    user's strings (`text.md`; `str` for a page or a terminal, which escape nothing or differently). Every number
    is read from the findings table by its quantity id (`Quantities`). A caveat repeated within a paragraph is
    said once (`_said_once`)."""
    q = Quantities(f)
    paragraphs = [_emergence_line(q, esc), _transitions_line(q), _dependence_line(q, esc)]
    paragraphs += [] if f.role_shares is None else [roles_line(q["role_shares"], esc)]  # the head roles, if tracked
    out = [_findings_header(q, esc), ""]
    for paragraph in paragraphs:
        out += [_said_once(paragraph), ""]
    return [*out, _intervals_line(f)]


def _findings_header(q: Quantities, esc: Callable[[str], str]) -> str:
    return (
        f"Findings for {esc(q['model_id'])} under {q['score_fn']} (inactive if score {q['direction']} {q['tau']:g}, "
        f"dormant when inactive on at least half of the inputs), calibration "
        f"set {esc(q['calibration_id'])}, {plural(q['n_checkpoints'], 'checkpoint')} to "
        f"{esc(q['emergence.final_revision'])} ({format_tokens(q['emergence.final_tokens'])} tokens)."
    )


def _too_few(q: Quantities, need: int, what: str) -> str | None:
    """Why a finding is not stated: the series has fewer checkpoints than it needs (None when it has enough)."""
    if q["n_checkpoints"] >= need:
        return None
    return (
        f"Not measured: {what} needs at least {need} checkpoints and the series has {q['n_checkpoints']}; track more "
        f"(`dormant track --model {q['model_id']} --max N`)."
    )


def _emergence_line(q: Quantities, esc: Callable[[str], str]) -> str:
    e, _frac = q.within("emergence"), "{:.1%}".format
    n_heads = e["n_heads"]
    head = f"1. **Emergence.** Dormant {e['pct_dormant_first']:.1f}% -> {e['pct_dormant_last']:.1f}% of {n_heads} heads"
    if too_few := _too_few(q, MIN_DYNAMICS_CHECKPOINTS, "when heads fall dormant"):
        return f"1. **Emergence.** Dormant {e['pct_dormant_last']:.1f}% of {n_heads} heads at the one checkpoint. {too_few}"
    stable = f"dormant at >= {100 * e['stable']:.0f}% of the checkpoints from then on, over {e['min_run']} or more"
    if e["n_settled"]:
        emerge = (
            f"{e['n_settled']} of {n_heads} heads settled dormant ({stable}), {e['n_censored']} had not by the end "
            f"(right-censored); over every head the median settling time is "
            f"{_ci(e['settled_median_all'], format_tokens, ' tokens')}. Among the heads that settled, the median was first "
            f"dormant at {_ci(e['first_median'], format_tokens, ' tokens')}, "
            f"{_ci(e['first_fraction'], _frac, ' of the series')}, "
            f"and settled at {_ci(e['settled_median'], format_tokens, ' tokens')}, "
            f"{_ci(e['settled_fraction'], _frac, ' of the series')}; {_pct(e['early'], 'settled heads')} had settled by "
            f"{int(100 * EARLY)}% of the tokens ({format_tokens(e['early_tokens'])}); per head: {_settled_list(q)}."
            f"{_censored_note(q)}"
        )
    else:
        emerge = f"no head has settled dormant ({stable}): all {n_heads} are right-censored at the end."
    first = (
        f"first dormant head at {esc(e['first_dormant_revision'])} ({format_tokens(e['first_dormant_tokens'] or 0)} tokens)"
        if e["first_dormant_revision"]
        else tau_marks_nothing(q["score_fn"], q["direction"], q["tau"], q["n_checkpoints"])
    )
    return f"{head}; {first}; {emerge}"


def _transitions_line(q: Quantities) -> str:
    t = q.within("transitions")
    if too_few := _too_few(q, MIN_DYNAMICS_CHECKPOINTS, "a transition"):
        return f"2. **Transitions.** {too_few}"
    undetermined = t["undetermined"]
    reach = f" ({t['reach_note']})" if t["reach_note"] else ""  # 0 confident read as what the clusters allow
    return (
        f"2. **Transitions.** {plural(t['n_transitions'], 'change')} of the mask ({t['fell_dormant']} fell dormant, "
        f"{t['woke']} woke); {plural(t['n_confident'], 'confident transition')}{reach}, from a confident state to "
        "the opposite "
        f"one ({t['correction']}: {plural(t['n_selected'], 'head')}; a state is confident when its p over the head's "
        f"checkpoints (null: its dormant rate never crosses 0.5; whole clusters of inputs resampled) is <= "
        f"{t['state_level']:.2g}, the level that correction sets; "
        f"{undetermined.k} of {undetermined.n} "
        f"head-checkpoints undetermined); {plural(t['n_blips'], 'blip')} of the mask, {t['n_confident_blips']} with "
        "both legs confident. McNemar's exact test (null: the same dormant rate on these inputs at both checkpoints) "
        f"gives p < 0.05 for {t['n_raw']} of the {t['n_paired']} mask changes it could test, uncorrected. Heads whose "
        f"mask ever changed: {_pct(t['ever_changed'])}; more than once: {_pct(t['more_than_once'])}; with a confident "
        f"transition: {_pct(t['confidently_changed'])}; with two or more: {t['confidently_more_than_once']}. "
        f"{_rates(q)} Per interval: {_interval_list(q) or 'none'}.{_resolution_note(t['resolution'])}{_paired_note(t)}"
    )


def _censored_note(q: Quantities) -> str:
    """Where checkpoints were left unscored before a head's settling checkpoint, its time is an interval."""
    n_interval = q["emergence.n_interval"]
    if not n_interval:
        return ""
    return (
        f" {n_interval} of these {q['emergence.n_settled']} settling times lie between a scored checkpoint and the "
        "scored one before it with listed checkpoints unscored in between: interval-censored, the medians' intervals "
        "span both ends (docs/SCORES.md §7)."
    )


def resolution_text(r, most: int = 8) -> str:
    """Which confident transitions are resolved to adjacent checkpoints, and the pairs that are not: "between 117B
    and 264B tokens: 3 checkpoints unscored"; "" without confident transitions."""
    if r is None or not r.n_confident:
        return ""
    if not r.known:
        return (
            f"Resolution of the {plural(r.n_confident, 'confident transition')}: unknown (the store keeps no listing "
            "of the series' checkpoints: it was tracked before they were recorded; the next `dormant track` of the series "
            "records it, even one with nothing left to score)."
        )
    if not r.unresolved and not r.n_unknown:
        return f"All {plural(r.n_confident, 'confident transition')} resolved to adjacent checkpoints."
    pairs = [
        f"between {format_tokens(u.from_tokens)} and {format_tokens(u.to_tokens)} tokens: {plural(u.unscored, 'checkpoint')} unscored"
        + (f" ({u.n_confident} transitions)" if u.n_confident > 1 else "")
        for u in r.unresolved[:most]
    ]
    more = f"; {len(r.unresolved) - most} more pairs" if len(r.unresolved) > most else ""
    unknown = f"; {r.n_unknown} the listing cannot place" if r.n_unknown else ""
    return (
        f"Of the {plural(r.n_confident, 'confident transition')}, {r.n_resolved} resolved to adjacent checkpoints, "
        f"{r.n_confident - r.n_resolved - r.n_unknown} not: {'; '.join(pairs)}{more}{unknown}."
    )


def _resolution_note(r) -> str:
    return f" {text}" if (text := resolution_text(r)) else ""


def _paired_note(t: Quantities) -> str:
    """The heads that changed on these inputs, as a sentence ("" where none were tested)."""
    if t["paired_test"] is None:
        return ""
    return (
        f" Heads that changed on these inputs ({t['paired_test']}): {t['paired_changes']} adjacent pair x head "
        f"changes, in {plural(t['paired_heads'] or 0, 'head')}."
    )


def _rates(q: Quantities) -> str:
    """Each stage's rate of confident transitions per billion tokens, or why none is stated."""
    if too_few := _too_few(q, MIN_RATE_CHECKPOINTS, "a rate of transitions per token"):
        return f"Rates: {too_few[0].lower()}{too_few[1:]}"
    parts = [
        f"stage {g.stage}: {plural(g.n_transitions, 'mask change')}, {g.n_confident} confident over "
        f"{format_tokens(g.tokens)} tokens{_rate(g)}; checkpoint spacing "
        f"{format_tokens(g.spacing.value)} tokens (median; {format_tokens(g.spacing.low)}-{format_tokens(g.spacing.high)})"
        if g.tokens > 0
        else f"stage {g.stage}: {plural(g.n_transitions, 'mask change')}, {g.n_confident} confident (no token span)"
        for g in q["transitions.stages"]
    ]
    return (
        f"{'; '.join(parts) or 'A single checkpoint: none yet'}. A rate per token depends on how densely the "
        "checkpoints are spaced: compare series by the shares of heads."
    )


def _rate(g) -> str:
    """A stage's rate per billion tokens, or why it is withheld: over fewer tokens than the unit it would be an
    extrapolation (`findings.MIN_RATE_TOKENS`)."""
    if g.tokens < MIN_RATE_TOKENS:
        return (
            f"; no rate per billion tokens: the stage spans {format_tokens(g.tokens)} tokens, under the "
            f"{format_tokens(MIN_RATE_TOKENS)} a rate per billion is stated from (scaling its count up would extrapolate)"
        )
    return (
        f" = {_ci(g.per_billion)} confident per billion tokens (exact Poisson, as if independent: "
        f"{_num(g.poisson.low)}-{_num(g.poisson.high)})"
    )


def _dependence_line(q: Quantities, esc: Callable[[str], str]) -> str:
    d = q.within("input_dependence")
    calibration_ids, revisions = d["calibration_ids"], d["revisions"]
    if len(calibration_ids) < 2 or not revisions:  # (`InputDependence.measured`)
        return (
            f"3. **Input dependence.** Not measured: the series is tracked on "
            f"{plural(len(calibration_ids), 'calibration set')}; add others with `dormant track --model "
            f"{q['model_id']} --calibration winogrande:1 --calibration winogrande:2 --calibration wikipedia:1 "
            "--retau` (two draws of one text are the reference; or any `--calibration FILE`)."
        )
    first, last = d["first"], d["last"]
    first_j = "undefined throughout" if first is None else f"{first[1]:.2f} at {esc(first[0])}"
    last_j = _ci(last, lambda x: f"{x:.2f}") if last is not None else "undefined"
    return (
        f"3. **Input dependence.** {len(calibration_ids)} calibration sets; Jaccard of their masks (pooled "
        f"over pairs): first defined {first_j}; at the last shared checkpoint {esc(revisions[-1])}: {last_j}; "
        f"heads dormant on every set, of those dormant on any: {_pct(d['all_of_any'])}. {_noise_floor(q, esc)}"
    )


def _noise_floor(q: Quantities, esc: Callable[[str], str]) -> str:
    nf = q["input_dependence.noise_floor"]
    if nf is None:
        return f"Noise floor: not measured ({q['input_dependence.noise_floor_note']})."
    two = lambda x: f"{x:+.2f}"  # noqa: E731
    reference = "the cluster-whole halves of each set" if nf.halves else "disjoint sets of the same kind"
    kinds = ", ".join(esc(k) for k in dict.fromkeys(nf.kinds))
    return (
        f"Noise floor at {esc(nf.revision)} ({nf.n_inputs} inputs in {nf.n_clusters} clusters; kinds: {kinds}): "
        f"agreement within a kind ({reference}) {_ci(nf.within, lambda x: f'{x:.2f}')}, across kinds "
        f"{_ci(nf.across, lambda x: f'{x:.2f}')}; across minus within {_ci(nf.difference, two)}, "
        f"permutation p = {nf.p_value:.3g} (two-sided; {nf.permutations} permutations of whole clusters "
        f"between the sets; the interval inverts the same test, so it excludes 0 exactly when p < 0.05). "
        f"{'Input dependent' if nf.p_value < 0.05 else 'Not shown input dependent'} at 0.05."
    )


def _intervals_line(f: Findings) -> str:
    return (
        f"Intervals: 95%. Over heads: {f.resampling.method}, the layers as the units (the heads of a layer are not "
        f"independent); with fewer than {MIN_UNITS} layers a number stands without one. They say how a number varies "
        "over heads like these of this one model; a group of seeds (`dormant findings --seed-group`) is what speaks "
        "for the recipe (docs/SCORES.md §7)."
    )


def _said_once(paragraph: str) -> str:
    """A paragraph with each "no interval: N layers, fewer than 5" after its first shortened to "no interval"."""
    seen: set[str] = set()

    def once(m: re.Match) -> str:
        if m.group(0) in seen:
            return "no interval"
        seen.add(m.group(0))
        return m.group(0)

    return re.sub(rf"no interval: \d+ \w+, fewer than {MIN_UNITS}", once, paragraph)


def seed_group_lines(r, esc: Callable[[str], str] = md) -> list[str]:
    """A seed group's findings (`findings.ReplicatedFindings`) as Markdown: per headline number, its mean over the
    seeds with the interval over seeds, the range, and each seed's own value with its interval over heads; `esc`
    as for `findings_lines`."""
    out = [
        f"Findings over {len(r.model_ids)} seeds of one recipe ({', '.join(map(esc, r.model_ids))}) under "
        f"{r.score_fn}, calibration set {esc(r.calibration_id)}, {r.n_checkpoints} checkpoints each.",
        "",
    ]
    for x in r.numbers:
        per = "; ".join(_seed_value(v) for v in x.per_seed)
        rng = "" if math.isnan(x.spread[0]) else f", range {_num(x.spread[0])} to {_num(x.spread[1])}"
        left = getattr(x, "missing", ())
        gone = (
            f" {len(left)} of {len(x.per_seed)} seeds left out, without a value: "
            + "; ".join(f"{esc(m)} ({why})" for m, why in left)
            + "."
            if left
            else ""
        )
        out.append(
            f"- **{x.name}** ({x.unit}): over seeds {_ci(x.over_seeds)}{rng}.{gone} Per seed, interval over layers: "
            f"{per}."
        )
    out += [
        "",
        f"Intervals over seeds: {T_SEEDS}, 95%; with fewer than {MIN_UNITS} seeds the mean and range stand alone. "
        "The per-seed intervals are over the layers and heads of that one trained model: they do not speak for the "
        "recipe; the interval over seeds does (docs/SCORES.md §7).",
    ]
    return out


def _seed_value(v) -> str:
    if v is None:
        return "not measured"
    if isinstance(v, Share):
        return _pct(v)
    if isinstance(v, Estimate):
        return _ci(v)
    return _num(float(v))


def seed_comparison_lines(a, b, diffs) -> list[str]:
    """Two seed groups (two recipes) side by side: a Markdown table of each headline number's mean over seeds and
    the difference b - a with Welch's t interval."""
    out = [
        f"Recipe a: {', '.join(map(md, a.model_ids))}; recipe b: {', '.join(map(md, b.model_ids))} ({a.score_fn}).",
        "",
        "| number | unit | a, over seeds | b, over seeds | b - a |",
        "|---|---|---|---|---|",
    ]
    out += [f"| {d.name} | {d.unit} | {_ci(d.a)} | {_ci(d.b)} | {_ci(d.difference)} |" for d in diffs]
    out += ["", f"Intervals: 95%, {T_SEEDS}; the difference: {WELCH}."]
    return out
