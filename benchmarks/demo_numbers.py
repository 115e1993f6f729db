"""The demo's numbers in the docs, produced by a demo run rather than typed.

README.md, docs/DEMO.md and docs/SCORES.md quote the demo (`make demo`: `dormant demo` with its defaults): its
summary lines, its whole output, its findings, its share of blips. Each such passage sits between marker comments, `<!-- demo:NAME -->` and
`<!-- /demo:NAME -->` (invisible in the rendered Markdown), and this script rewrites what lies between them
from one demo run: the terminal output the run printed (its summary lines and warnings, without paths or
timings) and the findings read from its store. tests/flows/test_demo_flow.py reads the test run's one demo (the
`demo_run` fixture, tests/conftest.py) and fails when a file differs from what this script would write.

Usage:
    .venv/bin/python benchmarks/demo_numbers.py            # runs `dormant demo` in a temp folder, rewrites the docs
    .venv/bin/python benchmarks/demo_numbers.py --demo DIR # the same from a run saved in DIR (run once if empty)
    .venv/bin/python benchmarks/demo_numbers.py --check    # rewrites nothing: exit 1 and name each passage that drifted
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/DEMO.md", "docs/SCORES.md")
MARKED = re.compile(r"(<!-- demo:(?P<name>[a-z-]+) -->)(?P<body>.*?)(<!-- /demo:(?P=name) -->)", re.S)
MODEL_ID = "tiny-olmo2"  # the demo series' name: its folder's


@dataclass(frozen=True)
class DemoRun:
    """One `dormant demo` with its defaults, into `folder` laid out as `make demo` lays out the repository
    (data/series/tiny-olmo2, data/store, reports/tiny-olmo2): its series, store, report, and what it printed."""

    folder: Path
    stdout: str
    stderr: str

    @property
    def store(self) -> Path:
        return self.folder / "data" / "store"

    @property
    def series(self) -> Path:
        return self.folder / "data" / "series" / MODEL_ID

    @property
    def reports(self) -> Path:
        return self.folder / "reports" / MODEL_ID


def run_demo(folder: Path, env: dict[str, str] | None = None) -> DemoRun:
    """`dormant demo` with the defaults of `make demo` (its folders in `folder`, one thread; `env`: the process's
    environment, default this one's); its output is saved beside them, so a later call on the same folder reads
    the run instead of repeating it."""
    folder = Path(folder)
    out, err = folder / "demo.stdout", folder / "demo.stderr"
    if not out.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        empty = DemoRun(folder, "", "")
        done = subprocess.run(
            [sys.executable, "-m", "flows.cli", "demo", "--model", str(empty.series), "--store", str(empty.store)]
            + ["--reports-dir", str(empty.reports)]
            + ["--threads", "1"],  # the same weights as any N; N > 1 crawls while other jobs hold the cores
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"dormant demo failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        err.write_text(done.stderr, encoding="utf-8")
        out.write_text(done.stdout, encoding="utf-8")  # last: its presence says the run finished
    return DemoRun(folder, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8"))


def _summary_lines(run: DemoRun) -> list[str]:
    """The summary the demo printed on stdout: the series line and one line per calibration set."""
    return [
        line
        for line in run.stdout.splitlines()
        if line.startswith(f"{MODEL_ID}: ") and "checkpoints analysed" not in line or line.startswith("  calibration ")
    ]


def _indented(lines: list[str]) -> str:
    return "\n" + "".join(f"    {line}\n" for line in lines) + "\n"


def output_block(run: DemoRun) -> str:
    """The demo's summary as printed (stdout: the series line and one line per calibration set; stderr: the
    warnings), as an indented Markdown block. Paths, timings and Prefect's log lines are left out."""
    warnings = [line for line in run.stderr.splitlines() if line.startswith("warning: ")]
    return _indented(_summary_lines(run) + warnings)


def _step(revision: str) -> int:
    return int(re.search(r"step(\d+)", revision).group(1))  # type: ignore[union-attr]


def numbers(run: DemoRun) -> dict[str, str]:
    """Each marked passage's text, from the run's output and its store (the primary set, WinoGrande, ahon_ln)."""
    from dormant_tasks.checkpoints.naming import format_tokens
    from dormant_tasks.findings import MIN_RATE_TOKENS, series_findings
    from dormant_tasks.text import plural
    from dormant_tasks.tracking import SeriesView

    view = SeriesView.open(run.store, MODEL_ID)
    found = series_findings(run.store, MODEL_ID)
    em, tr, dep = found.emergence, found.transitions, found.input_dependence
    steps, n_ckpt = view.checkpoints[-1]["step"], len(view.checkpoints)
    n_layers = int(view.checkpoints[-1]["n_layers"])
    # the series line's count: ahon_ln's transitions and blips on the primary set (WinoGrande)
    found_blips = re.search(r"ahon_ln transitions (\d+) \(.*?(\d+) blips?\)", run.stdout)
    assert found_blips, "the demo printed no series line"
    total, n_blips = map(int, found_blips.groups())
    blips = f"{n_blips} of the {total} ahon_ln transitions on WinoGrande, {100 * n_blips / max(total, 1):.0f}%,"
    if em.first_dormant_revision is None:
        first = "no head falls dormant"
    else:
        first = f"the first head falls dormant at step {_step(em.first_dormant_revision)} "
        first += f"({format_tokens(em.first_dormant_tokens)} tokens)"
    settled = ", ".join(f"{h} at {format_tokens(t)}" for h, t in zip(em.heads, em.settled_tokens))
    median_all = em.settled_median_all.value
    median = "not reached" if median_all == float("inf") else f"{format_tokens(median_all)} tokens"
    stage = tr.stages[0] if tr.stages else None
    rate = (
        f"a rate per token ({stage.per_billion.value:,.0f} confident per billion tokens; the exact Poisson interval "
        f"as if independent, {stage.poisson.low:,.0f}-{stage.poisson.high:,.0f}) comes with the checkpoint spacing "
        f"(median {format_tokens(stage.spacing.value)} tokens)"
        if stage and stage.n_confident and stage.tokens >= MIN_RATE_TOKENS
        else f"no rate per token: the run spans {format_tokens(stage.tokens)} tokens, under the "
        f"{format_tokens(MIN_RATE_TOKENS)} a rate per billion tokens is stated from"
        if stage and stage.n_confident
        else "no confident transition, so no rate per token"
    )
    findings = (
        f"(`dormant findings` on WinoGrande: {first}; {len(em.heads)} of the {em.n_heads} heads "
        + ("settles" if len(em.heads) == 1 else "settle")
        + " dormant"
        + (f" ({settled})" if settled else "")
        + f" and {em.n_censored} are right-censored, so the median settling time over every head is {median}; "
        f"of the {plural(tr.n_transitions, 'ahon_ln mask change')} ({tr.fell_dormant} "
        f"{'falls' if tr.fell_dormant == 1 else 'fall'} dormant, "
        f"{plural(tr.woke, 'wakes', 'wake')}, {plural(tr.n_blips, 'blip')}), {tr.n_confident} "
        f"{'is a confident transition' if tr.n_confident == 1 else 'are confident transitions'} between confident "
        f"states (Benjamini-Hochberg over the {tr.n_heads} heads; a state is confident when its p over the "
        f"head's checkpoints, whole clusters of inputs resampled, is <= {tr.state_level:.2g}, and {tr.undetermined.k} of the {tr.undetermined.n} head-checkpoints are "
        f"undetermined), while McNemar's test gives p < 0.05 for {tr.n_raw} of the {tr.n_paired} changes, "
        f"uncorrected. Intervals over layers need 5 layers: this model has {n_layers}, so each number says "
        f'"no interval: {n_layers} layers, fewer than 5" rather than print one that would not cover; {rate}.'
    )
    floor = dep.noise_floor
    if dep.last is not None and floor is not None and np.isfinite(dep.last.value):
        shown = "input dependent at 0.05" if floor.p_value < 0.05 else "not shown input dependent"
        findings += (
            f" Input dependence: the pooled Jaccard of the {len(dep.calibration_ids)} sets' masks at the last "
            f"checkpoint is {dep.last.value:.2f}, and against the agreement of each set's cluster-whole halves the "
            f"difference is {floor.difference.value:+.2f} (permutation p = {floor.p_value:.2g}, "
            f"{floor.permutations} permutations of whole clusters): {shown} on this model under ahon_ln."
        )
    elif dep.last is not None:
        findings += (
            f" Input dependence: no head is dormant on any of the {len(dep.calibration_ids)} sets at the last "
            "checkpoint, so their masks' Jaccard is undefined there."
        )
    return {
        "output": output_block(run),
        "summary": _indented(_summary_lines(run)),  # the README's: the summary lines alone, the warnings in DEMO.md
        "findings": textwrap.fill(findings, width=112, break_on_hyphens=False),
        "length": f"for {steps:,} steps",
        "checkpoints": f"{n_ckpt} checkpoints",
        "blips": blips,
    }


def rewrite(text: str, values: dict[str, str]) -> str:
    """`text` with every marked passage replaced by its value (a name without one is an error: a typo)."""

    def one(m: re.Match) -> str:
        if m["name"] not in values:
            raise KeyError(f"<!-- demo:{m['name']} --> names no demo number; known: {sorted(values)}")
        return m.group(1) + values[m["name"]] + m.group(4)

    return MARKED.sub(one, text)


def drifted(values: dict[str, str], root: Path = REPO) -> list[str]:
    """`file: passage` for each marked passage whose text differs from the run's."""
    out = []
    for name in DOCS:
        text = (root / name).read_text(encoding="utf-8")
        new = {m["name"]: m["body"] for m in MARKED.finditer(rewrite(text, values))}
        out += [f"{name}: {k}" for k, body in ((m["name"], m["body"]) for m in MARKED.finditer(text)) if new[k] != body]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, help="folder of a saved demo run (made there when empty)")
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a passage drifted")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="demo-numbers-") as tmp:
        values = numbers(run_demo(args.demo or Path(tmp)))
    if args.check:
        stale = drifted(values)
        print("\n".join(stale) or "the docs' demo numbers are the run's")
        return 1 if stale else 0
    for name in DOCS:
        path = REPO / name
        text = path.read_text(encoding="utf-8")
        if rewrite(text, values) != text:
            path.write_text(rewrite(text, values), encoding="utf-8")
            print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
