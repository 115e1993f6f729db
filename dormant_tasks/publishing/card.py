"""The dataset card (`README.md`) of a publication (docs/PUBLISHING.md, "The dataset card"): the Hub's YAML header (one
config per table) and what a reader needs to trust and load the tables. Every value comes from the series' files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import pyarrow as pa

from dormant_tasks.checkpoints import format_tokens
from dormant_tasks.engine import get_score_function
from dormant_tasks.reporting import findings_lines
from dormant_tasks.store import SCHEMA_VERSION
from dormant_tasks.text import md, plural
from dormant_tasks.version import __version__

PAPER = "arXiv 2504.03889"
CITATION = """@misc{sandovalsegura2025inactive,
  title         = {Identifying and Evaluating Inactive Heads in Pretrained {LLMs}},
  author        = {Sandoval-Segura, Pedro and others},
  year          = {2025},
  eprint        = {2504.03889},
  archivePrefix = {arXiv},
  primaryClass  = {cs.CL},
  url           = {https://arxiv.org/abs/2504.03889}
}"""

# Each table a config, in the order the card lists them, with what one row is.
CONFIGS = {
    "findings": "one quantity of the paper's three findings (emergence, transitions, input dependence) per score "
    "function: its value, 95% interval, method and unit, as `findings --format json` states it",
    "head_scores": "one head (layer, head_index) of one checkpoint under one score function: its mean score, the tau, "
    "its dormant rate over the calibration inputs (with its Wilson interval) and whether it is dormant",
    "checkpoints": "one scored checkpoint: its revision, step, tokens, commit, calibration set and taus",
    "transitions": "one change of a head's dormant state between consecutive checkpoints, with whether it is a "
    "confident transition (q-values) or a blip",
    "head_histories": "one head under one score function: first checkpoint at which it is dormant, number of state "
    "changes, final state",
    "taus": "one score function's threshold: its value, direction and where it came from",
    "calibration_agreement": "one pair of calibration sets at one checkpoint: how far their dormancy masks agree",
    "evaluations": "one point of an intervention sweep: heads zeroed and the task accuracy kept",
    "failed_checkpoints": "one checkpoint that could not be scored, with the reason",
    "listed_checkpoints": "one checkpoint the series' source listed, scored or not: how many lie unscored between "
    "two scored ones",
    "input_scores": "one (input, score function, layer, head) score of a checkpoint (per-input, with --with-inputs)",
    "evaluation_items": "one item of an evaluation sweep setting (per-item, with --with-inputs)",
}


def dataset_card(
    views: Sequence,
    found: Sequence,
    files: Mapping[str, Path | bytes],
    *,
    repo_id: str | None,
    license: str,
    with_inputs: bool,
    evaluations: pa.Table,
) -> str:
    """The README.md of a publication of the series of `views` (its calibration sets, the primary first), with the
    findings `found` and the `files` it holds (by path in the repo)."""
    primary = views[0]
    model_id = primary.model_id
    repo = repo_id or "ORG/NAME"
    configs = [t for t in CONFIGS if any(PurePosixPath(p).parts[0] == t for p in files)]
    header = {
        "license": license,
        "pretty_name": f"Dormant attention heads of {model_id}",
        "tags": ["dormant-heads", "attention-heads", "interpretability", "training-dynamics"],
    }
    lines = ["---", *(f"{k}: {json.dumps(v)}" for k, v in header.items()), "configs:"]
    for t in configs:
        lines += [f"- config_name: {t}", f'  data_files: "{t}/*/*.parquet"']  # the one series' partition folder
        if t == "findings":
            lines.append("  default: true")
    lines += ["---", ""]
    lines += _about(primary, model_id, repo_id)
    lines += _series(views)
    lines += _findings(found)
    lines += _tables(configs, files, with_inputs, evaluations)
    lines += _loading(configs, repo, repo_id is None, primary.calibration_id)
    lines += [
        "## Cite",
        "",
        f"The score functions and the dormant-head definitions are those of Sandoval-Segura et al. ({PAPER}; v1: "
        '"Using Attention Sinks to Identify and Evaluate Dormant Heads in Pretrained LLMs"):',
        "",
        "```bibtex",
        CITATION,
        "```",
        "",
        "## Licence",
        "",
        f"These tables are published under `{license}`, the licence their publisher chose. The model's own licence "
        "is its own; the calibration texts keep theirs.",
        "",
    ]
    return "\n".join(lines)


def _about(view, model_id: str, repo_id: str | None) -> list[str]:
    hub = "/" in model_id and not model_id.startswith(("/", "."))
    model = f"[{md(model_id)}](https://huggingface.co/{model_id})" if hub else f"the local series {md(model_id)}"
    out = [
        f"# Dormant attention heads through the training of {md(model_id)}",
        "",
        f"Every attention head of {model}, at each of its {plural(len(view.checkpoints), 'checkpoint')}, scored with "
        f"the score functions of {PAPER} over a calibration set: whether the head is dormant (inactive) under the "
        "series' fixed thresholds, the state changes between consecutive checkpoints, and the paper's three "
        "training-dynamics findings with their intervals. Written by dormant-heads "
        f"{__version__} (`dormant publish`); the files are a dormant-heads store of this one series (schema version "
        f"{SCHEMA_VERSION}), so the tool reads them back without scoring anything:",
        "",
        "```",
        f"dormant findings --store hf://datasets/{repo_id or 'ORG/NAME'}",
        f"dormant report --store hf://datasets/{repo_id or 'ORG/NAME'}",
        "```",
        "",
    ]
    if repo_id is None:
        out += [
            "(Written to a folder: `ORG/NAME` stands for the dataset repo it is uploaded to.)",
            "",
        ]
    return out


def _series(views) -> list[str]:
    primary = views[0]
    c = primary.checkpoints
    first, last = c[0], c[-1]
    out = [
        "## The series",
        "",
        f"- Model: {md(primary.model_id)}, {c[0]['n_layers']} layers x {c[0]['n_heads']} query heads.",
        f"- Checkpoints: {len(c)}, from {md(first['revision'])} (step {first['step']}, "
        f"{format_tokens(first['tokens'])} tokens) to {md(last['revision'])} (step {last['step']}, "
        f"{format_tokens(last['tokens'])} tokens), each pinned to the commit in `checkpoints.commit`.",
        f"- Scoring version {md(c[0]['scoring_version'])}; scored in {md(c[0]['dtype'])}.",
        "",
        "Calibration sets (the primary one first; every table carries `calibration_id`):",
        "",
        "| calibration_id | inputs | taus_id | checkpoints |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {md(v.calibration_id)} | {v.checkpoints[0]['n_inputs']} | {md(v.taus_id)} | {len(v.checkpoints)} |"
        for v in views
        if v.checkpoints
    ]
    out += [
        "",
        "Score functions and their taus (a head is dormant at a checkpoint when its score is on the inactive side of "
        "tau on at least half of the inputs; the taus are fixed once for the whole series):",
        "",
        "| score_fn | name in the paper | dormant if | tau from |",
        "|---|---|---|---|",
    ]
    for fn, tau in primary.taus.items():
        source = (
            f"quantile {tau.quantile:g} of {md(tau.reference_revision)}'s scores"
            if tau.source == "quantile" and tau.quantile is not None
            else tau.source
        )
        out.append(
            f"| {fn} | {md(get_score_function(fn).paper_name)} | score {tau.direction} {tau.value:.6g} | {source} |"
        )
    out += [
        "",
        "<details><summary>Every checkpoint</summary>",
        "",
        "| revision | stage | step | tokens |",
        "|---|---|---|---|",
    ]
    out += [f"| {md(r['revision'])} | {r['stage']} | {r['step']} | {format_tokens(r['tokens'])} |" for r in c]
    return [*out, "", "</details>", ""]


def _findings(found) -> list[str]:
    out = ["## Findings", ""]
    for f in found:
        out += [*findings_lines(f, esc=md), ""]
    out += [
        "Every number above, with its interval, method and unit, is a row of the `findings` config (defaults: the "
        "Benjamini-Hochberg rule at a false discovery rate of 0.05, seeded resampling).",
        "",
    ]
    return out


def _tables(
    configs: list[str], files: Mapping[str, Path | bytes], with_inputs: bool, evaluations: pa.Table
) -> list[str]:
    out = ["## Tables", "", "| config | one row is | files | MiB |", "|---|---|---|---|"]
    for t in configs:
        mine = [c for p, c in files.items() if PurePosixPath(p).parts[0] == t]
        size = sum(len(c) if isinstance(c, bytes) else c.stat().st_size for c in mine)
        out.append(f"| `{t}` | {CONFIGS[t]} | {len(mine)} | {size / 2**20:.2f} |")
    out.append("")
    if not with_inputs:
        out += ["Per-input scores and per-item evaluation rows are not published here.", ""]
    if evaluations.num_rows:
        tasks = sorted(set(evaluations.column("task").to_pylist()))
        out += [f"Evaluated tasks: {', '.join(md(t) for t in tasks)}.", ""]
    out += [
        "Columns, units and keys: the dormant-heads data contract (docs/DATA_CONTRACT.md of the tool). Names "
        "starting with `_` are the store's bookkeeping (`_published.json`: every file's SHA-256).",
        "",
    ]
    return out


def _loading(configs: list[str], repo: str, placeholder: bool, calibration_id: str) -> list[str]:
    first = "findings" if "findings" in configs else configs[0]
    out = [
        "## Load it",
        "",
        "With `datasets` (one config per table):",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
    ]
    out += [f'{t} = load_dataset("{repo}", "{t}", split="train")' for t in configs]
    out += [
        "```",
        "",
        "With pandas (through huggingface_hub's `hf://` file system):",
        "",
        "```python",
        "import pandas as pd",
        "",
    ]
    out += [f'{t} = pd.read_parquet("hf://datasets/{repo}/{t}")' for t in configs]
    out += [
        "```",
        "",
        "With DuckDB (the fraction of heads dormant per checkpoint under each function, on the primary calibration "
        "set: every table holds the rows of each set, `calibration_id` says which):",
        "",
        "```sql",
        "SELECT score_fn, step, tokens, avg(dormant::INT) AS frac_dormant",
        f"FROM 'hf://datasets/{repo}/head_scores/*/*.parquet'",
        f"WHERE calibration_id = '{calibration_id}'",
        "GROUP BY score_fn, step, tokens ORDER BY score_fn, step;",
        f"SELECT * FROM 'hf://datasets/{repo}/{first}/*/*.parquet';",
        "```",
        "",
    ]
    if placeholder:
        out += ["From the folder itself, before an upload: the same calls with the folder's path for the repo.", ""]
    return out
