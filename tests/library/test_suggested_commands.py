"""Every command the tool or its docs suggest runs (issue 43, item 2).

Collected, not listed by hand:
- the advice of the tool's messages: every backticked `dormant ...` in a string of `dormant_tasks/` or `flows/`
  (docstrings aside), found by reading the source; `ADVICE` says how each is run on the demo store (its
  placeholders filled as the message fills them: the series it names, the store it names) or why it is not, and a
  test keeps `ADVICE` equal to what the source holds;
- every code block of README.md and docs/*.md: each `dormant` line of a shell block (`$ ` lines of a text block),
  each Python block, each SQL (DuckDB) block.

They run against one demo store, built once per pytest run whichever xdist worker asks first (`built_once` in
tests/conftest.py; the commands spread over the workers): a copy of the run's demo (`demo_run`: `make demo`, whose
numbers the docs quote), one `dormant evaluate` sweep on its last checkpoint (the README's, smaller), and four of
its checkpoints as a folder of `step{N}` checkpoints (`runs/my-run`, hard links). Each command runs on its own copy of the store
(hard links; series folders linked, so their sources stay the same), in-process as a user types it (tests/builders/cli.py: its `VAR=value` prefixes, `&&` and `>` read as the
shell reads them), its flows on the worker's Prefect test server; it must exit 0 with no traceback and print (or do)
what its doc says it prints (`PRINTS`: one check per line run, the doc it reads named). The few that need the Hub, a GPU, a cluster or
a second series are in `MARKED` with the reason; a command run with other values (a 2,000-step demo's checkpoint
name, a smaller --limit) is in `RUN_AS`. The recipes of docs/DATA_CONTRACT.md must also give the tool's numbers.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.builders.cli import Result, invoke
from tests.builders.processes import cli_env
from tests.builders.shared import built_once, linked_copy, shared_folder

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
HUB = "needs the Hub (a Hub --model; the tests have no Hub)"
GPU = "needs the Hub and a CUDA GPU"

# ---- the tool's advice ----

# backticked command (f-string fields as {}) -> the line run in the demo folder, or a reason it is not run
ADVICE: dict[str, str | None] = {
    "dormant checkpoints": "dormant checkpoints --model tiny-olmo2",  # "... of SERIES; run `dormant checkpoints`"
    "dormant checkpoints --audit": "dormant checkpoints --model data/series/tiny-olmo2 --audit",
    "dormant checkpoints --model ...": "dormant checkpoints --model data/series/tiny-olmo2",
    "dormant checkpoints --model {}": "dormant checkpoints --model data/series/tiny-olmo2",
    "dormant checkpoints --model {} --audit": "dormant checkpoints --model data/series/tiny-olmo2 --audit",
    "dormant evaluate --model ...": None,  # the module fixture's evaluate (RUN_AS of the README's evaluate)
    "dormant evaluate --model ... --mode dynamic": None,
    "dormant evaluate --model {} --mode dynamic": None,
    "dormant findings": "dormant findings",
    "dormant findings --seed-group": None,
    "dormant leaderboard --tasks T": "dormant leaderboard --tasks winogrande",
    "dormant pretrain-tiny": "dormant pretrain-tiny --model data/series/other --steps 2",
    "dormant publish": "dormant publish --model tiny-olmo2 --out published --license cc-by-4.0",
    # a damaged publication's advice (publish it again from its store: --model and --license as when first published)
    "dormant publish --store SOURCE --out {}": "dormant publish --model tiny-olmo2 --out published --license cc-by-4.0",
    "dormant pretrain-tiny --seed N": "dormant pretrain-tiny --model data/series/seed1 --seed 1 --steps 2",
    "dormant report": "dormant report",
    "dormant score": "dormant score --model data/series/tiny-olmo2/{last} --out scores.parquet --limit 4",
    "dormant serve": None,
    "dormant status": "dormant status",
    "dormant status --store {}": "dormant status --store data/store",
    "dormant store gc": "dormant store gc",
    "dormant store repair": "dormant store repair",
    "dormant store repair --store {}": "dormant store repair --store data/store",
    "dormant store upgrade": "dormant store upgrade",
    "dormant store upgrade --store {}": "dormant store upgrade --store data/store",
    "dormant track": "dormant track --model tiny-olmo2",  # "... of SERIES ...; run `dormant track` for it"
    "dormant track --help": "dormant track --help",
    "dormant track --model ...": "dormant track --model tiny-olmo2",  # "... holds none; run `dormant track --model ...`"
    "dormant track --model ... --store {}": "dormant track --model tiny-olmo2 --store data/store",
    "dormant track --model {}": "dormant track --model tiny-olmo2",  # "{series} ...; run `dormant track --model {}`"
    "dormant track --model {} --store {}": "dormant track --model tiny-olmo2 --store data/store",
    "dormant track --model {} --max N": "dormant track --model tiny-olmo2 --max 8",
    "dormant track --input-scores keep|auto": "dormant track --model tiny-olmo2 --input-scores keep",
    "dormant track --model {} --calibration <its own sets> --calibration <the set {} was tracked on, the same "
    "texts and --limit> --retau": "dormant track --model tiny-olmo2 --calibration winogrande --calibration wikipedia "
    "--calibration code --calibration mmlu --limit 8 --retau",
    "dormant track --model {} --calibration winogrande:1 --calibration winogrande:2 --calibration wikipedia:1 "
    "--retau": "dormant track --model tiny-olmo2 --calibration winogrande:1 --calibration winogrande:2 "
    "--calibration wikipedia:1 --retau --limit 8",
    "dormant track --retau": "dormant track --model tiny-olmo2 --retau",
    "dormant track --retau --scores ... {}": "dormant track --model tiny-olmo2 --retau --scores ahon_ln awft",
    "dormant {}": None,
    "dormant {} --help": "dormant report --help",
}
ADVICE_NOT_RUN = {
    "dormant evaluate --model ...": "run as the module fixture's sweep (the README's evaluate, RUN_AS)",
    "dormant evaluate --model ... --mode dynamic": "run as the module fixture's sweep (--mode dynamic)",
    "dormant evaluate --model {} --mode dynamic": "run as the module fixture's sweep (--mode dynamic)",
    "dormant findings --seed-group": "needs two or more seeds of one recipe; the demo store has one",
    "dormant serve": "serves until stopped, with a Prefect server: tests/flows/test_serve.py",
    "dormant {}": "names a request file's kind (`dormant evaluate` for an evaluate request)",
}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, kinds) and n.body and isinstance(n.body[0], ast.Expr)
        if isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)
    }


def advice_in_source() -> dict[str, list[str]]:
    """Backticked `dormant ...` in the strings of the tool's code -> where (file:line)."""
    found: dict[str, list[str]] = {}
    for path in sorted([*(REPO / "dormant_tasks").rglob("*.py"), *(REPO / "flows").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstring_nodes(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.JoinedStr):
                skip |= {id(v) for v in n.values}
        for n in ast.walk(tree):
            if isinstance(n, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
                text = n.value
            else:
                continue
            for command in re.findall(r"`(dormant [^`]*)`", text):
                found.setdefault(command, []).append(f"{path.relative_to(REPO)}:{n.lineno}")
    return found


# ---- the docs' code blocks ----


@dataclass(frozen=True)
class Block:
    where: str  # file:line of the opening fence
    lang: str
    text: str


def code_blocks() -> list[Block]:
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", text, re.S | re.M):
            body = "\n".join(line.removeprefix(m[1]) for line in m[3].splitlines())
            out.append(Block(f"{path.relative_to(REPO)}:{text[: m.start()].count(chr(10)) + 1}", m[2], body))
    return out


def doc_commands() -> list[tuple[str, str]]:
    """(where, command line) of every `dormant` command in a shell block (a `$ ` line of a text block), its
    continuation lines joined."""
    out = []
    for b in code_blocks():
        if b.lang not in ("bash", "sh", "console", "text", ""):
            continue
        for line in re.sub(r"\\\n\s*", "", b.text).splitlines():
            if b.lang in ("console", "text"):
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            command = line.split("  #")[0].strip()
            if re.match(r"^(\w+=\S+ )*dormant ", command):
                out.append((b.where, command))
    return out


# README / docs command -> the line run instead (the demo store's names and sizes), or why it is not run
RUN_AS = {
    "HF_DATASETS_OFFLINE=1 dormant evaluate --model data/series/tiny-olmo2/stage1-step600-tokens307K "
    "--tasks winogrande,piqa --limit 200 --store /tmp/store": "HF_DATASETS_OFFLINE=1 dormant evaluate --model "
    "data/series/tiny-olmo2/{last} --tasks winogrande,piqa --limit 4 --store data/store --scores ahon_ln --log-samples",
    "dormant report --model allenai/OLMo-2-0425-1B": "dormant report --model tiny-olmo2",
    "dormant findings --model allenai/OLMo-2-0425-1B --reports-dir findings/": (
        "dormant findings --model tiny-olmo2 --reports-dir findings/"
    ),
    "dormant score --model PATH_OR_REPO --out scores.parquet": (
        "dormant score --model data/series/tiny-olmo2/{last} --out scores.parquet --limit 4"
    ),
    "dormant pretrain-tiny --model data/series/my-tiny --steps 2000": (
        "dormant pretrain-tiny --model data/series/my-tiny --steps 2"
    ),
    "dormant store upgrade --store DIR": "dormant store upgrade --store data/store",
    "dormant store repair --store DIR": "dormant store repair --store data/store",
    "dormant store repair --check --store DIR": "dormant store repair --check --store data/store",
    "dormant store gc --store DIR": "dormant store gc --store data/store",
    "dormant store upgrade --store PATH": "dormant store upgrade --store data/store",
    # docs/PUBLISHING.md's "Share your results" (also in the README): the folder the line before it writes
    "dormant findings --store published/tiny-olmo2": "dormant publish --model tiny-olmo2 --out published/tiny-olmo2 "
    "--license cc-by-4.0 && dormant findings --store published/tiny-olmo2",
}
FIXTURE_EVALUATE = next(k for k in RUN_AS if "dormant evaluate" in k)
MARKED = {
    "dormant checkpoints --model allenai/OLMo-2-0425-1B --max 20": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --max 20 --device cuda": GPU,
    "dormant track --model allenai/OLMo-2-0425-1B --max 20 --calibration winogrande --calibration code "
    "--calibration mmlu": HUB,
    "dormant compare --model allenai/OLMo-2-0425-1B --model allenai/OLMo-2-1124-7B": HUB + ": two tracked series",
    "dormant evaluate --model allenai/OLMo-2-1124-7B-Instruct --scores lthon_ln ahon_ln awft": HUB,
    "dormant evaluate --model allenai/OLMo-2-1124-7B --tasks winogrande mmlu piqa gsm8k --log-samples": HUB,
    "dormant track --model EleutherAI/pythia-160m --max 20": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --max 20": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --max 20 --calibration winogrande --calibration induction-probe "
    "--scores ahon_ln roles": HUB,
    "dormant reproduce xu-2026 --model allenai/OLMo-1B-0724-hf --dry-run": HUB
    + " (tests/integration/test_reproduce_hub.py runs it on a loopback Hub)",
    "dormant track --model allenai/OLMo-2-0425-1B --max 20 --dry-run --bandwidth 100MB/s": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --budget 40 --dry-run --bandwidth 1Gbit/s": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --budget 40 --device cuda": GPU,
    "dormant track --model allenai/OLMo-2-1124-7B --max 20": HUB,
    "dormant compare --model EleutherAI/pythia-70m,EleutherAI/pythia-160m,EleutherAI/pythia-410m --model "
    "EleutherAI/pythia-1b,EleutherAI/pythia-1.4b,EleutherAI/pythia-2.8b --format csv > pythia.csv": HUB
    + ": six tracked Pythia series",
    "dormant leaderboard --model allenai/OLMo-2-1124-7B allenai/OLMo-2-1124-7B-Instruct --tasks winogrande mmlu": HUB
    + ": sweeps of two Hub models",
    "dormant leaderboard --figure agreement.png": "needs sweeps of 2 models or more; the demo store has one",
    "dormant checkpoints --model allenai/OLMo-2-1124-7B --steps :50000 --every 5": HUB,
    "dormant checkpoints --model allenai/OLMo-2-0425-1B --max 20 --include-main": HUB,
    "dormant track --model allenai/OLMo-2-0425-1B --revisions 'stage2-*'": HUB,
    "dormant track --model EleutherAI/pythia-410m --steps :10000": HUB,
    "dormant track --model allenai/OLMo-2-1124-7B --every 10 --device cuda --runner dask --address "
    "tcp://flowhost:8786": GPU + ", and a Dask cluster (docs/CLUSTER.md)",
    "dormant track --model allenai/OLMo-2-1124-7B --every 10 --runner dask --address tcp://flowhost:8786": HUB
    + ", a Dask cluster and a Prefect server on another host (docs/CLUSTER.md)",
    "dormant findings --store hf://datasets/my-lab/tiny-olmo2-heads": HUB + ": a published dataset repo",
    "dormant report --store hf://datasets/my-lab/tiny-olmo2-heads@v1.0 --reports-dir reports/theirs": HUB
    + ": a published dataset repo",
    'dormant deploy --model allenai/OLMo-2-1124-7B --every 10 --device cuda --pool gpu --cron "0 3 * * *"': GPU
    + ", and a Prefect server and work pool (tests/flows/test_deploy.py deploys a local series)",
}
PYTHON_MARKED = {  # the first line of the block that the mark is for
    "from huggingface_hub import list_repo_refs": HUB,
    "from dask_kubernetes.operator import KubeCluster": "needs a Kubernetes cluster with GPUs",
    "import subprocess": "needs a SLURM cluster with GPUs",
    "# a series published on the Hub, read without scoring anything": HUB + ": a published dataset repo",
    "from datasets import load_dataset": HUB + ": a published dataset repo",
    "# an OLMo-2 series from the Hub, on a GPU": HUB + " and a GPU",
}


def _commands_to_run() -> list[tuple[str, str, str]]:
    """(id, written, line to run) of every doc command that is run, in file order, each distinct line once."""
    seen, out = set(), []
    for where, command in doc_commands():
        if command in MARKED or command == FIXTURE_EVALUATE or command in seen:
            continue
        seen.add(command)
        out.append((f"{where} {command}", command, RUN_AS.get(command, command)))
    return out


def _python_blocks() -> list[Block]:
    return [b for b in code_blocks() if b.lang == "python" and b.text.splitlines()[0] not in PYTHON_MARKED]


# ---- the demo store ----


@dataclass(frozen=True)
class Demo:
    folder: Path  # data/store, data/series/tiny-olmo2, runs/my-run
    env: dict[str, str | None]  # the changes to this process's environment that a command runs with
    last: str  # the series' last checkpoint

    def process_env(self) -> dict[str, str]:
        """The environment of a Python process (a docs' Python block): this checkout first on the path."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for key, value in self.env.items():
            env.pop(key, None) if value is None else env.__setitem__(key, value)
        return env


def _run(line: str, demo: Demo, cwd: Path) -> Result:
    """A shell line of `dormant` commands, in-process: `VAR=value` prefixes, `a && b`, `> file` read as the shell
    reads them (each command in order until one fails)."""
    r = Result(0, "", "")
    for part in line.format(last=demo.last).split(" && "):
        words = shlex.split(part)
        env = dict(demo.env)
        while re.match(r"^[A-Z_]+=", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        target = None
        if ">" in words:
            target, words = words[words.index(">") + 1], words[: words.index(">")]
        assert words[0] == "dormant", line
        r = invoke(words[1:], cwd=cwd, env=env)
        if target is not None:
            (cwd / target).write_text(r.stdout, encoding="utf-8")
        if r.code != 0:
            return r
    return r


def _ok(r: Result, line: str) -> None:
    assert r.code == 0 and "Traceback" not in r.stderr, f"{line}\nexit {r.code}\n{r.stderr[-3000:]}\n{r.stdout[-1000:]}"


@pytest.fixture(scope="module")
def demo(demo_run, prefect_api_url, tmp_path_factory):
    env = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "DORMANT_STORE": None, "DORMANT_REPORTS": None}
    env["PREFECT_API_URL"] = prefect_api_url  # the worker's test server: flows of every command run on it

    def build(folder: Path) -> str:
        # the run's demo (`make demo`, laid out in a working folder as make demo lays it out): its store copied (the
        # evaluate below writes to it), its series folder linked
        linked_copy(demo_run.store, folder / "data" / "store")
        (folder / "data" / "series").mkdir()
        (folder / "data" / "series" / "tiny-olmo2").symlink_to(demo_run.series)
        series = folder / "data" / "series" / "tiny-olmo2"
        names = sorted((p.name for p in series.iterdir() if p.is_dir()), key=lambda n: int(n.split("-")[1][4:]))
        runs = folder / "runs" / "my-run"  # four of its checkpoints as a run's step{N} folders (hard links): the
        for name in names[:3] + names[-1:]:  # first three and the last (a series to track, not a long one)
            shutil.copytree(series / name, runs / name.split("-")[1], copy_function=os.link)
        _ok(_run(RUN_AS[FIXTURE_EVALUATE], Demo(folder, env, names[-1]), folder), FIXTURE_EVALUATE)
        return names[-1]

    last = built_once(tmp_path_factory, "advice-demo", build)
    return Demo(shared_folder(tmp_path_factory) / "advice-demo", env, last)


@pytest.fixture
def work(demo, tmp_path) -> Path:
    """A copy of the demo's store (a command may change it: its files hard links, which a command replaces, never
    rewrites), its series folders linked: same resolved sources."""
    linked_copy(demo.folder / "data" / "store", tmp_path / "data" / "store")
    (tmp_path / "data" / "series").symlink_to(demo.folder / "data" / "series")
    (tmp_path / "runs").symlink_to(demo.folder / "runs")
    return tmp_path


# ---- what each prints ----


def _ordered(text: str, names: list[str]) -> bool:
    """Every name in `text` as a word of its own, in this order."""
    at = [m.start() if (m := re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)) else -1 for n in names]
    return -1 not in at and at == sorted(at)


def _in_order(folder: Path) -> list[str]:
    """A series folder's checkpoints in training order (by step)."""
    return sorted((p.name for p in folder.iterdir() if p.is_dir()), key=lambda n: int(re.findall(r"step(\d+)", n)[0]))


def _files(store: Path) -> dict[str, int]:
    """A store's files -> inode: a file written (replaced) or added shows."""
    return {str(p.relative_to(store)): p.stat().st_ino for p in store.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class Ran:
    """What a suggested line's check reads: its (last) command's result, its working folder, and the store's files
    before it ran."""

    r: Result
    work: Path
    before: dict[str, int] = field(repr=False)

    @property
    def out(self) -> str:
        return self.r.stdout

    @property
    def store(self) -> Path:
        return self.work / "data" / "store"

    def checkpoints(self, series: str = "tiny-olmo2") -> list[str]:
        return _in_order(self.work / ("runs/my-run" if series == "my-run" else f"data/series/{series}"))

    def stored(self, series: str) -> list[str]:
        from dormant_tasks.store.io import read_table

        rows = read_table(self.store, "checkpoints", filters={"model_id": series}).column("revision").to_pylist()
        return sorted(set(rows))

    def unchanged(self) -> bool:
        return _files(self.store) == self.before


def lists_checkpoints(run: Ran, m: re.Match) -> None:
    series = "my-run" if "runs/my-run" in m[0] else "tiny-olmo2"
    assert _ordered(run.out, run.checkpoints(series)), "not every checkpoint, in training order"


def audits(run: Ran, m: re.Match | None = None) -> None:
    names = run.checkpoints()
    assert _ordered(run.out, names), "not one line per checkpoint, in training order"
    assert re.search(rf"^{len(names)} branches of .* audited in .*: nothing flagged; 0 set aside", run.out, re.M)


def answers_from_the_store(run: Ran, m: re.Match | None = None) -> None:
    assert f"tiny-olmo2: 0 checkpoints analysed, {len(run.checkpoints())} already stored" in run.out
    assert not run.r.prefect_started, "nothing left to do, yet Prefect started"


def retaus(run: Ran, m: re.Match) -> None:
    n, sets = len(run.checkpoints()), m[0].count("--calibration ") or 3  # the sets named, else the series' own
    counts = re.search(r"^tiny-olmo2: (\d+) checkpoints analysed, (\d+) already stored", run.out, re.M)
    assert counts and int(counts[1]) >= 1 and int(counts[1]) + int(counts[2]) == n, run.out  # re-aggregated
    assert f"(primary, of {sets} sets)" in run.out, run.out


def tracks_my_run(run: Ran, m: re.Match) -> None:
    names, stored, budget = run.checkpoints("my-run"), run.stored("my-run"), m.groupdict().get("budget")
    if budget is None:
        assert stored == sorted(names), stored
    else:  # "at most N in all", the first and the last among them
        assert {names[0], names[-1]} <= set(stored) and len(stored) <= int(budget), stored
    assert f"my-run: {len(stored)} checkpoints analysed, 0 already stored" in run.out, run.out


def plans(run: Ran, m: re.Match) -> None:
    assert run.unchanged(), "a dry run wrote to the store"
    series = "my-run" if "runs/my-run" in m[0] else "tiny-olmo2"  # the demo's: all stored; my-run: none
    n, budget = len(run.checkpoints(series)), m.groupdict().get("budget")
    stored = n if series == "tiny-olmo2" else 0
    if "--format json" in m[0]:
        plan = json.loads(run.out)  # one JSON object
        assert (plan["selected"], plan["stored"], plan["writes"]) == (n, stored, "nothing"), plan
    else:
        assert f"{n} of {n} checkpoints selected, {stored} already stored" in run.out, run.out
        assert "nothing was downloaded or written (a dry run)" in run.out, run.out
        assert budget is None or f"at most (the whole budget): {budget} checkpoints" in run.out, run.out


def summarises(run: Ran, m: re.Match | None = None) -> None:
    assert re.search(rf"^tiny-olmo2: {len(run.checkpoints())} checkpoints, steps 0\.\.600, ", run.out, re.M), run.out


def verifies(run: Ran, m: re.Match | None = None) -> None:
    assert re.search(r"^verified: ", run.out, re.M) and run.unchanged(), run.out


def reports(run: Ran, m: re.Match | None = None) -> None:
    assert (run.work / "reports" / "tiny-olmo2" / "index.html").is_file()
    assert re.search(r"^report: (.*/)?reports/tiny-olmo2/index\.html \(\d+ figures", run.out, re.M), run.out


def states_findings(run: Ran, m: re.Match | None = None) -> None:
    assert re.search(
        rf"^Findings for tiny-olmo2 under ahon_ln .* {len(run.checkpoints())} checkpoints to ", run.out, re.M
    )
    paragraphs = [p for p in run.out.split("\n\n") if p.strip()]
    assert len(paragraphs) >= 4, run.out  # the header, then emergence, transitions, input dependence


def writes_findings(run: Ran, m: re.Match | None = None) -> None:
    states_findings(run)
    folder = run.work / "findings"
    said = re.search(r"^findings: (.*/)?findings/findings\.md \((\d+) figures\)", run.out, re.M)
    assert said and (folder / "findings.md").is_file(), run.out
    pngs, svgs = list(folder.glob("figures/*.png")), list(folder.glob("figures/*.svg"))
    assert len(pngs) == len(svgs) == int(said[2]) > 0, (pngs, svgs)


def publishes(run: Ran, m: re.Match) -> None:
    out = run.work / m["out"]
    assert (out / "README.md").is_file() and list(out.rglob("*.parquet"))  # the tables and the dataset card
    assert re.search(rf"^published: (.*/)?{m['out']} \(\d+ files\)", run.out, re.M), run.out


def publishes_then_reads(run: Ran, m: re.Match | None = None) -> None:
    assert (run.work / "published" / "tiny-olmo2" / "README.md").is_file()
    states_findings(run)


def scores(run: Ran, m: re.Match | None = None) -> None:
    import pyarrow.parquet as pq

    assert re.search(r"^scored 4 inputs .* -> scores\.parquet$", run.out, re.M), run.out
    assert pq.read_table(run.work / "scores.parquet").num_rows


def pretrains(run: Ran, m: re.Match) -> None:
    made = _in_order(run.work / m["series"])
    assert run.out.startswith(f"{m['series']}: {len(made)} checkpoints, last {made[-1]} "), run.out


def drops_input_scores(run: Ran, m: re.Match | None = None) -> None:
    files = _files(run.store)
    assert not [f for f in files if f.startswith("input_scores/") and f.endswith(".parquet")]  # dropped
    assert [f for f in files if f.startswith("head_scores/")]  # masks stay
    assert re.search(r"per-input scores dropped for \d+ checkpoints", run.out), run.out


def nothing_to_repair(run: Ran, m: re.Match | None = None) -> None:
    assert "manifests and files agree, nothing to repair" in run.out, run.out


def whole(run: Ran, m: re.Match | None = None) -> None:
    assert "every file is whole" in run.out and run.unchanged(), run.out  # writes nothing


def already_current(run: Ran, m: re.Match | None = None) -> None:
    assert "is already at schema version" in run.out and run.unchanged(), run.out


def usage(run: Ran, m: re.Match) -> None:
    assert run.out.startswith(f"usage: dormant {m['command']} "), run.out[:200]


def ranks(run: Ran, m: re.Match | None = None) -> None:
    header = "| score function | model | task | % zeroed within 1 point | 95% interval | items |"  # items stored
    assert header in run.out and "| ahon_ln | tiny-olmo2 | winogrande |" in run.out, run.out  # markdown on stdout


def ranks_as_csv(run: Ran, m: re.Match | None = None) -> None:
    import csv

    with open(run.work / "board.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    [row] = [r for r in rows if (r["score_fn"], r["model"], r["task"]) == ("ahon_ln", "tiny-olmo2", "winogrande")]
    assert {"within_1pt", "auc", "base_accuracy", "low", "high", "n_items"} <= set(row), row  # every column
    assert int(row["n_items"]) == 4, row  # the fixture's evaluate: --limit 4, its items stored


def ranks_on_the_other_half(run: Ran, m: re.Match | None = None) -> None:
    assert "tiny-olmo2" in run.out and "even" in run.out + run.r.stderr, run.out


# the line run (a regex, whole) -> what its doc says it prints or does, and the check; every line run has one
PRINTS: list[tuple[str, str, Callable[[Ran, re.Match], None]]] = [
    (
        r"dormant checkpoints --model (tiny-olmo2|data/series/tiny-olmo2)",
        "CHECKPOINTS.md: the list as the tracker sees it",
        lists_checkpoints,
    ),
    (
        r"dormant checkpoints --model data/series/tiny-olmo2 --audit",
        "CHECKPOINTS.md: a line per branch, then the count",
        audits,
    ),
    (r"dormant checkpoints --model runs/my-run .*", "README: runs/my-run/step0 ... step2000", lists_checkpoints),
    (r"dormant findings( --model tiny-olmo2)?", "README: the paper's three findings, measured", states_findings),
    (
        r"dormant findings --model tiny-olmo2 --reports-dir findings/",
        "USAGE.md: findings.md, PNG + SVG figures",
        writes_findings,
    ),
    (r"dormant leaderboard( --tasks winogrande)?", "LEADERBOARD.md: markdown on stdout", ranks),
    (r"dormant leaderboard --format csv > board.csv", "LEADERBOARD.md: every column", ranks_as_csv),
    (r"dormant leaderboard --select-on even", "LEADERBOARD.md: chosen on the even items", ranks_on_the_other_half),
    (r"dormant pretrain-tiny --model (?P<series>data/series/[\w-]+) .*", "USAGE.md: a local series", pretrains),
    (
        r"dormant publish --model tiny-olmo2 --out (?P<out>published(/tiny-olmo2)?) --license cc-by-4.0",
        "README: tables and a card",
        publishes,
    ),
    (
        r"dormant publish .* && dormant findings --store published/tiny-olmo2",
        "README: read back as a store",
        publishes_then_reads,
    ),
    (r"dormant report( --model tiny-olmo2)?", "README: re-render reports/tiny-olmo2/", reports),
    (r"dormant score .*", "USAGE.md: per-input scores only", scores),
    (r"dormant status( --store data/store)?", "README: the summary lines above, per stored series", summarises),
    (r"dormant status --verify", "USAGE.md: every byte checked against its checksums", verifies),
    (r"dormant store gc( --store data/store)?", "USAGE.md: drop kept per-input scores; masks stay", drops_input_scores),
    (
        r"dormant store repair( --store data/store)?",
        "USAGE.md: sets damaged files aside (none here)",
        nothing_to_repair,
    ),
    (r"dormant store repair --check --store data/store", "USAGE.md: only name the damaged files", whole),
    (r"dormant store upgrade( --store data/store)?", "USAGE.md: a store of schema version 1-3", already_current),
    (
        r"dormant track --model tiny-olmo2( --store data/store| --input-scores keep| --max 8)?",
        "USAGE.md: answered from the store",
        answers_from_the_store,
    ),
    (r"dormant track --model tiny-olmo2 .*--retau.*", "the advice: re-aggregated under the taus", retaus),
    (r"dormant (?P<command>track|report) --help", "the advice: the command's help", usage),
    (
        r"dormant track --model runs/my-run --tokens-per-step 1048576 --max (8|12)",
        "README: its step{N} folders",
        tracks_my_run,
    ),
    (
        r"dormant track --model runs/my-run --tokens-per-step 1048576 --budget (?P<budget>\d)( --resolution 0\.5)?",
        "USAGE.md: at most N",
        tracks_my_run,
    ),
    (
        r"dormant track --model (data/series/tiny-olmo2|runs/my-run --tokens-per-step 1048576 --budget (?P<budget>\d))"
        r" --dry-run( --format json)?",
        "USAGE.md: the plan, nothing written",
        plans,
    ),
]


# ---- the lists stay true ----


def test_the_advice_table_is_the_advice_the_source_gives():
    found = advice_in_source()
    assert sorted(found) == sorted(ADVICE), {
        "in the source, not in ADVICE": {k: v for k, v in found.items() if k not in ADVICE},
        "in ADVICE, not in the source": sorted(set(ADVICE) - set(found)),
    }
    assert {k for k, v in ADVICE.items() if v is None} == set(ADVICE_NOT_RUN)


def test_every_marked_or_rewritten_doc_command_is_in_the_docs():
    commands = {c for _, c in doc_commands()}
    assert sorted(set(MARKED) - commands) == [] and sorted(set(RUN_AS) - commands) == []
    firsts = {b.text.splitlines()[0] for b in code_blocks() if b.lang == "python"}
    assert sorted(set(PYTHON_MARKED) - firsts) == []


# ---- they run ----


def _lines_to_run() -> list[tuple[str, list[str]]]:
    """Each line to run once, with what suggests it (the tool's advice, a doc's file:line): several suggest the
    same line (`dormant status`, `dormant track --model tiny-olmo2`), and one line on a fresh copy of one store
    gives one exit whoever suggests it."""
    lines: dict[str, list[str]] = {}
    for advice in sorted(k for k, v in ADVICE.items() if v is not None):
        lines.setdefault(ADVICE[advice], []).append(f"the advice `{advice}`")  # type: ignore[index]
    for where, _, line in _commands_to_run():
        lines.setdefault(line, []).append(where)
    return list(lines.items())


def _check_of(line: str) -> list[tuple[str, Callable[[Ran, re.Match], None], re.Match]]:
    return [(what, check, m) for pattern, what, check in PRINTS if (m := re.fullmatch(pattern, line))]


def test_every_line_run_checks_what_it_prints():
    """Each suggested line run has one check of what its doc says it prints or does (`PRINTS`), beyond exit 0; and
    every check is some line's."""
    lines = [line for line, _ in _lines_to_run()]
    assert {line: len(_check_of(line)) for line in lines if len(_check_of(line)) != 1} == {}
    assert [p for p, _, _ in PRINTS if not any(re.fullmatch(p, line) for line in lines)] == []


@pytest.mark.slow
@pytest.mark.parametrize(("line", "suggested_by"), _lines_to_run(), ids=[line for line, _ in _lines_to_run()])
def test_the_suggested_command_runs(line, suggested_by, demo, work):
    """It exits 0 with no traceback, and prints (or does) what its doc says: `PRINTS`."""
    before = _files(work / "data" / "store")
    r = _run(line, demo, work)
    _ok(r, f"{line}\nsuggested by: {'; '.join(suggested_by)}")
    [(what, check, m)] = _check_of(line)
    try:
        check(Ran(r, work, before), m)
    except AssertionError as e:
        raise AssertionError(f"{line}: not what its doc says ({what}): {e}\nstderr: {r.stderr[-2000:]}") from None


@pytest.mark.slow
@pytest.mark.parametrize("block", _python_blocks(), ids=[b.where for b in _python_blocks()])
def test_the_docs_python_block_runs(block, demo, work):
    r = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=work,
        env=demo.process_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, f"{block.where}\n{block.text}\n{r.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in code_blocks() if b.lang == "sql"], ids=lambda b: b.where)
def test_the_docs_duckdb_block_runs(block, demo, work, monkeypatch):
    duckdb = pytest.importorskip("duckdb")
    monkeypatch.chdir(work)
    assert duckdb.sql(block.text).fetchall()  # rows: the demo store has what every recipe reads


# ---- the recipes give the tool's numbers ----


def _recipe(lang: str, first_line: str) -> str:
    [block] = [
        b
        for b in code_blocks()
        if b.where.startswith("docs/DATA_CONTRACT.md") and b.lang == lang
        if first_line in b.text
    ]
    return block.text


@pytest.mark.slow
def test_the_recipes_give_the_tools_dormant_fractions_on_the_primary_set(demo, monkeypatch):
    """DuckDB, pandas and polars, as written in docs/DATA_CONTRACT.md (the function swapped), against the API's masks
    of every tracked function at every checkpoint: the primary calibration set under its current taus, never a mean
    over the sets (the demo's three sets give other fractions)."""
    import duckdb
    import pandas as pd

    import dormant_tasks
    from dormant_tasks.engine import TRACKED_IDS

    monkeypatch.chdir(demo.folder)
    s = dormant_tasks.open_store("data/store")["tiny-olmo2"]
    steps = dict(zip(s.checkpoints().revision, s.checkpoints().step, strict=True))
    sql = _recipe("sql", "fraction of heads dormant under ahon_ln")
    pandas_recipe = _recipe("python", "import pandas as pd")
    polars_recipe = _recipe("python", "import polars as pl")
    assert set(s.score_fns) == set(TRACKED_IDS)  # the default set: every function whose default tau marks heads
    differ = 0
    for fn in s.score_fns:
        tool = {int(steps[r]): float(v) for r, v in s.masks(fn).mean(axis=1).items()}
        rows = duckdb.sql(sql.replace("'ahon_ln'", f"'{fn}'")).fetchall()  # model, step, tokens, fraction
        assert {step: pytest.approx(frac) for _, step, _, frac in rows} == tool, fn
        space: dict = {}
        exec(pandas_recipe.replace('"ahon_ln"', f'"{fn}"'), space)
        assert space["frac_dormant"].loc["tiny-olmo2"].to_dict() == pytest.approx(tool), fn
        space = {}
        exec(polars_recipe.replace('"ahon_ln"', f'"{fn}"'), space)
        frame = space["frac_dormant"]
        assert dict(zip(frame["step"].to_list(), frame["frac_dormant"].to_list(), strict=True)) == pytest.approx(tool)
        every_set = pd.read_parquet("data/store/head_scores", filters=[("score_fn", "==", fn)])
        differ += every_set.groupby("step").dormant.mean().to_dict() != pytest.approx(tool)
    assert differ, "no function whose fractions differ between the sets: the test would not see a mean over sets"


def test_a_silent_hub_names_its_own_reason_and_no_advice_that_track_refuses(tmp_path):
    """The Hub error said to set HF_HUB_OFFLINE=1, with which `track` then said to unset it (a Hub series needs its
    branch list, never cached); and it gave "offline mode is on" as the reason of a Hub that did not answer."""
    from tests.builders.prefect_server import free_port
    from tests.builders.processes import run_cli

    env = cli_env(HF_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    env.pop("HF_HUB_OFFLINE")
    r, _ = run_cli(["track", "--model", "org/name", "--store", tmp_path / "store"], env, tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "does not answer (" in r.stderr and "offline mode is on" not in r.stderr, r.stderr
    assert "HF_HUB_OFFLINE" not in r.stderr and "give a local checkpoint folder" in r.stderr, r.stderr
