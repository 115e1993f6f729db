"""The report's index.html: a Jinja2 template (`templates/report.html.j2`, package data) filled with plain values.

This module turns a `series_data.Series` and the figure names into the template's context (strings, tables as
header + rows, figures as name + caption); the template lays them out and escapes every value (autoescape),
so no HTML is built by string concatenation. The figures' captions are the page's own; the texts it shares with
summary.md (labels, notes, the findings) are `texts.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from dormant_tasks.checkpoints import format_tokens
from dormant_tasks.engine import DORMANT_RULE
from dormant_tasks.evaluation import AUC_UNIT, WARNED
from dormant_tasks.reporting.figure_data import dormancy_fns, head_view, raw_quantile_fns
from dormant_tasks.reporting.texts import (
    failed_note,
    findings_lines,
    first_dormant_label,
    raw_quantile_note,
    tau_source,
    windows_note,
)
from dormant_tasks.text import plural
from dormant_tasks.tracking import set_aside_label

if TYPE_CHECKING:
    from dormant_tasks.findings import Findings
    from dormant_tasks.reporting.series_data import ReportSeries
    from dormant_tasks.reporting.sets import CalibrationSets

FIGURE_CAPTIONS = {
    "dormant_percent": "Percentage of heads dormant at each checkpoint, one line per score function "
    "({styles}); the legend, beside the plot, lists the lines as they end, highest first, each with its last value "
    "(lines at 0% throughout lie on one another: the legend names them).",
    "raster": "Every head's state at every checkpoint under {fn}: rows are heads grouped by layer (layer 0 "
    "on top), columns are checkpoints in series order; red / green cells mark the checkpoint where "
    "a head fell dormant / woke.",
    "layers": "Number of dormant heads per layer at each checkpoint under {fn}.",
    "transitions": "Transitions under {fn} between consecutive checkpoints (from the store's transitions table): "
    "heads that fell dormant (up) and heads that woke (down) in each interval.",
    "rates": "Each checkpoint's reading of a head's state under {fn}, for the heads whose mask changed most (those "
    "with confident transitions first): the dormant rate (the share of calibration inputs on which the head is "
    "inactive) with its 95% interval, stored with it (dormant_rate_low/high: the confident states' rule, over the "
    'same clusters of inputs, one checkpoint at a time, docs/SCORES.md "Interval"); a star where a confident '
    "transition lands (the series' decision also counts every checkpoint and head it searched: it asks more).",
    "scores": "Distribution over heads of the per-head {fn} score (each head's mean over the calibration "
    "inputs, from head_scores): median and 10–90% band, with the series' tau; over the band, in red, each head "
    "that is dormant at one checkpoint or more (up to 24, the most often dormant), a dot where it is dormant.",
    "agreement": "Agreement between score functions at the last checkpoint: intersection over union of "
    "their dormant head sets (– where both sets are empty).",
    "set_agreement": "Input dependence (the findings' third) and the agreement of the calibration sets through "
    "training under {fn}: one line per pair of sets, the Jaccard index of their dormant head sets (heads "
    "dormant on both / heads dormant on either; undefined where neither has a dormant head: a gap in the line), "
    "each set with its own taus, at the checkpoints both sets scored; below, the heads dormant on either set that "
    "each index rests on; the black diamond, the noise floor: the agreement two samples of one kind of text reach "
    "(the findings' within-kind Jaccard, with its 95% interval). Three agreement numbers on this page "
    "differ by what they average: this figure's per pair of sets under {fn}; the findings' one pools the pairs "
    "(|A n B| summed over pairs / |A u B| summed); the calibration-set table's is the mean over score functions.",
    "set_raster": "Every head's state at every checkpoint scored on two or more calibration sets under {fn}: "
    "dormant on every set, on some of them, or on none; rows are heads grouped by layer (layer 0 on top).",
    "set_length": "The heads whose {fn} dormant rate differs most between the calibration sets at the last "
    "checkpoint they share, and for each set how the head's {fn} score changes per doubling of the input "
    "length (length_slope: least squares over the set's inputs). Where it is undefined (NaN: the set's input "
    "lengths do not vary, or the result was re-aggregated by --retau from kept per-input scores, which keep no "
    "token counts) no bar is drawn, and heads undefined on every set are left out.",
    "accuracy_vs_zeroed": "Accuracy against the measured % of heads zeroed (dynamic zeroing, thresholds at "
    "quantiles of the un-intervened scores), with the base accuracy and base − 1 point.",
    "findings_emergence": "Emergence under {fn}: of the heads that settled dormant (dormant at >= 80% of the "
    "checkpoints from then on), the share settled by each token count; the point marks 10% of the tokens, with its "
    "95% interval where one is drawn (the legend says when too few units back it).",
    "findings_transitions": "Transitions under {fn} into each checkpoint: confident ones (the paired test on the "
    "calibration inputs whose indicator changed, docs/SCORES.md) and the others.",
    "findings_roles": 'Head roles through training (Xu 2026; docs/SCORES.md, "Head roles"): the share of heads '
    "whose best selectivity (attention of the last query to a class's target over attention to the baseline, "
    "ratio of means over the calibration inputs) reaches 30x, by role, at each checkpoint; right, per layer at "
    "the last checkpoint.",
}

STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:90%}"
    "th{background:#f2f2f2}figure{margin:1.5em 0}img{max-width:100%;height:auto}"
    "#head-view svg{width:100%;max-width:900px;height:auto;background:#fff;border:1px solid #ddd}"
    "figcaption{font-size:90%;color:#444}.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em}"
)


@cache
def _template(name: str = "report.html.j2"):
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("dormant_tasks.reporting", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a context key the template names but the code forgot: an error, not ""
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.get_template(name)


def _table(header: list[str], rows: list[list]) -> dict:
    return {"header": header, "rows": [[str(c) for c in r] for r in rows]}


def compare_html(context: dict) -> str:
    """index.html of a comparison of series (`compare.render_comparison` builds the context: plain values)."""
    return _template("compare.html.j2").render(style=STYLE, **context)


RAW_PANEL = (
    " The raw-unit functions whose tau is a quantile of the reference checkpoint's own scores ({fns}) are in a "
    "panel of their own below (at that checkpoint they sit near their quantile by construction)."
)


def _figure(kind: str, name: str, fn: str, **extra: str) -> dict:
    caption = FIGURE_CAPTIONS[kind.rstrip("_0123456789") if kind.startswith("accuracy") else kind]
    return {"name": name, "caption": caption.format(fn=fn, **extra)}


def line_styles(score_fns) -> str:
    """The line styles of `figures.draw_dormant_percent` that these functions use, in words."""
    styles = [
        (lambda f: not f.endswith(("_ln", "_hn")), "raw scores solid"),
        (lambda f: f.endswith("_ln"), "layer-normalised _ln dashed"),
        (lambda f: f.endswith("_hn"), "head-normalised _hn dotted"),
    ]
    return ", ".join(words for used, words in styles if any(map(used, score_fns)))


def dormant_percent_figure(name: str, fn: str, score_fns, raw_panel) -> dict:
    """The caption says what is drawn: the styles used, and the second panel only when it is drawn (`raw_panel`:
    the functions it holds, `figure_data.raw_quantile_fns`)."""
    f = _figure("dormant_percent", name, fn, styles=line_styles(score_fns))
    shown = [x for x in score_fns if x in raw_panel]
    if shown and len(shown) < len(score_fns):  # all of them: one panel, the raw one
        f["caption"] += RAW_PANEL.format(fns=", ".join(shown))
    return f


@dataclass(frozen=True)
class ReportPage:
    """What index.html shows of a series."""

    series: ReportSeries
    fn: str  # the function of the per-function figures
    figures: dict[str, str]  # figure kind -> its file name
    rows: list[dict]  # the summary's rows (`figure_data.summary_rows`)
    groups: list  # the interventions' groups (`figure_data.evaluation_groups`)
    sets: CalibrationSets | None = None  # several calibration sets only: the "Calibration sets" section
    found: Findings | None = None  # the "Findings" section
    positions: tuple = ()  # `tracking.TauPosition` per function: where each tau sits
    linked: tuple = ()  # `comparisons.comparisons_of`: (title, href) of the comparisons that include the series

    def figure(self, kind: str) -> dict:
        """The template's figure of `kind` (file name and caption)."""
        if kind == "dormant_percent":
            fns = [self.series.score_fns[i] for i in dormancy_fns(self.series)]
            return dormant_percent_figure(self.figures[kind], self.fn, fns, raw_quantile_fns(self.series))
        return _figure(kind, self.figures[kind], self.fn)


def report_html(p: ReportPage) -> str:
    """index.html of the page's series."""
    series, fig = p.series, p.figures
    t = series.tokens
    context = {
        "model_id": series.model_id,
        "score_fn": p.fn,
        "comparisons": list(p.linked),
        "style": STYLE,
        "intro": f"{plural(len(t), 'checkpoint')}, {series.revisions[0]} ({format_tokens(t[0])} tokens) to "
        f"{series.revisions[-1]} ({format_tokens(t[-1])} tokens); {series.n_layers} layers × {series.n_heads} heads",
        "rule": DORMANT_RULE,
        "provenance": _provenance(series),
        "taus": _taus_table(series, p.positions),
        "tau_warnings": [q.warning for q in p.positions if q.warning],
        "summary": _summary_table(p.rows),
        "note": raw_quantile_note(series.tau_sources),
        "figures": {kind: p.figure(kind) for kind in fig if not kind.startswith(("accuracy", "set_", "findings"))},
        "findings": None,
        "roles_shown": False,  # the head roles' paragraph follows the three findings (`findings_lines`)
        "findings_figures": [
            p.figure(k)
            for k in ("findings_emergence", "findings_transitions", "set_agreement", "findings_roles")
            if k in fig
        ],
        "sets": None if p.sets is None else _sets_context(p.sets, p.figure, fig),
        "interventions": _interventions(p) if series.evaluations else [],
        "static": _static_table(series.evaluations),
        "checkpoints": _checkpoints_table(series.checkpoints),
    }
    context["head_view"] = script_json(head_view(series, p.fn))
    if p.found is not None:
        context["findings"] = [line.replace("**", "") for line in findings_lines(p.found, esc=str)[2:] if line]
        context["roles_shown"] = p.found.role_shares is not None
    return _template().render(**context)


def _provenance(series: ReportSeries) -> dict:
    """What the series was scored with: calibration set, taus, code, dtype and device, windows, failures."""
    c0 = series.checkpoints
    distinct = lambda key: ", ".join(sorted({str(c.get(key)) for c in c0}))  # noqa: E731
    return _table(
        ["item", "value"],
        [
            ["calibration set", f"{c0[0]['calibration_id']} ({distinct('n_inputs')} inputs)"],
            ["taus id", f"{c0[0]['taus_id']} (a hash of every function's tau: a new tau, a new id)"],
            ["code version", distinct("code_version")],
            ["scoring version", distinct("scoring_version")],
            ["dtype / device", f"{distinct('dtype')} / {distinct('device')}"],
            *([["rescored in float32", rescored]] if (rescored := rescored_note(c0)) else []),
            *([["sliding windows", note]] if (note := windows_note(series)) else []),
            *(
                [[failed_note(series.failed), "; ".join(f"{r['revision']}: {r['reason']}" for r in series.failed)]]
                if getattr(series, "failed", ())
                else []
            ),
            *([["set aside (integrity audit)", note]] if (note := set_aside_note(series)) else []),
            *(
                [["bit-identical scores", "; ".join(" = ".join(g) for g in series.identical)]]
                if getattr(series, "identical", ())
                else []
            ),
        ],
    )


def rescored_note(checkpoints) -> str:
    """The checkpoints scored again in float32 because their half-precision pass was not finite; '' when none."""
    rescored = {c["revision"]: c["rescored_from"] for c in checkpoints if c.get("rescored_from")}
    return "; ".join(f"{rev} (its {dtype} pass gave NaN or infinite scores)" for rev, dtype in rescored.items())


def set_aside_note(series) -> str:
    """The branches the integrity audit set aside, each with the branch kept in its place; '' when none."""
    return "; ".join(
        f"{d['revision']}: {set_aside_label(d)}" + (" (kept, marked)" if d["kept"] else "")
        for d in getattr(series, "set_aside", ())
    )


def _taus_table(series: ReportSeries, positions) -> dict:
    """Each function's tau: the rule, where it comes from, and where it sits at its reference checkpoint."""
    sources = {r["score_fn"]: r for r in series.tau_sources}
    where = {q.score_fn: q for q in positions}
    return _table(
        ["score function", "dormant if", "source", "reference checkpoint", "marks there", "quantile of tau"],
        [
            [f, f"score {d} {tau:g}", tau_source(sources.get(f)), *_position_cells(where.get(f))]
            for f, (tau, d) in series.taus.items()
        ],
    )


def _summary_table(rows: list[dict]) -> dict:
    return _table(
        [
            "score function",
            "first checkpoint with a dormant head",
            "final % dormant",
            "fell dormant",
            "woke",
            "confident",
            "blips",
            "heads that changed state",
        ],
        [
            [
                r["score_fn"],
                first_dormant_label(r),
                f"{r['final_pct_dormant']:.2f}",
                r["fell_dormant"],
                r["woke"],
                r["confident"],
                r["blips"],
                r["heads_ever_changed"],
            ]
            for r in rows
        ],
    )


def _interventions(p: ReportPage) -> list[dict]:
    """One block per group of stored dynamic sweeps: its protocol, each function's metric, warnings, figure."""
    return [
        {
            "title": f"{g.task}, {g.shots}-shot, {g.revision}: base accuracy {g.base_accuracy:.2f}% on {g.n_items} items",
            "protocol": g.protocol,
            "table": _table(
                ["score function", "% zeroed within 1 point", f"normalised AUC ({AUC_UNIT})"],
                [[f, f"{g.within_text(f)}{WARNED if g.warnings.get(f) else ''}", f"{g.auc[f]:.2f}"] for f in g.curves],
            ),
            "warnings": g.warning_lines(),
            "figure": p.figure(f"accuracy_vs_zeroed_{k}"),
        }
        for k, g in enumerate(p.groups)
    ]


def _checkpoints_table(checkpoints: list[dict]) -> dict:
    return _table(
        ["revision", "stage", "step", "tokens", "analysed at", "seconds"],
        [
            [
                c["revision"],
                c["stage"],
                c["step"],
                format_tokens(c["tokens"]),
                c["analyzed_at"],
                f"{c['seconds']:.1f}" if c["seconds"] is not None else "",
            ]
            for c in checkpoints
        ],
    )


def script_json(data) -> str:
    """`data` as JSON safe inside a <script type="application/json"> element: "<", ">" and "&" as \\u escapes,
    so no "</script>" or comment opener can end it early; the page parses it back (JSON.parse) unchanged."""
    import json

    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _position_cells(p) -> list[str]:
    if p is None or p.share is None:
        return ["", "not known", ""]
    return [p.reference_revision, f"{100 * p.share:.1f}% of (input, head) pairs", f"{p.quantile:.3f}"]


def _sets_context(sets, figure, fig: dict[str, str]) -> dict:
    fn = sets.score_fn
    return {
        "n": len(sets.calibration_ids),
        "table": _table(
            [
                "calibration set",
                "checkpoints",
                "last checkpoint",
                f"% dormant there ({fn})",
                "fell dormant",
                "woke",
                "confident",
                "blips",
            ],
            [
                [
                    r["calibration_id"],
                    r["n_checkpoints"],
                    r["last_revision"] or "",
                    "not tracked" if r["final_pct_dormant"] is None else f"{r['final_pct_dormant']:.2f}",
                    r["fell_dormant"],
                    r["woke"],
                    r["confident"],
                    r["blips"],
                ]
                for r in sets.set_rows
            ],
        ),
        "jaccard": _table(
            ["pair of sets", "last shared checkpoint", "mean Jaccard there (over score functions that mark a head)"],
            [
                [f"{a} vs {b}", rev, "undefined" if j != j else f"{j:.2f}"]  # j != j: NaN
                for (a, b), (rev, j) in sets.last_jaccard.items()
            ],
        )
        if sets.last_jaccard
        else None,
        "figures": [figure(k) for k in ("set_raster", "set_length") if k in fig],  # set_agreement: with the findings
    }


def _static_table(evaluations: list[dict]) -> dict | None:
    static = [e for e in evaluations if e["mode"] == "static"]
    if not static:
        return None
    return _table(
        ["revision", "task", "shots", "score function", "tau", "% zeroed", "accuracy", "base accuracy"],
        [
            [
                e["revision"],
                e["task"],
                e["shots"],
                e["score_fn"],
                e["tau"],
                f"{100 * e['frac_zeroed']:.2f}",
                f"{100 * e['accuracy']:.2f}",
                f"{100 * e['base_accuracy']:.2f}",
            ]
            for e in static
        ],
    )
