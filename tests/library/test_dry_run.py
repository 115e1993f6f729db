"""`dormant track --dry-run` (`tracking.dry_run`): what a run would score and download, the disk it needs at once
and the time at a bandwidth, before anything is downloaded, and nothing written.

A local series is real (random tiny checkpoints, a store filled by the library's own track steps); a Hub series'
plan is made by hand from `Revision`s and sizes (the listing itself, through the real client and a real Hub
server, is tests/integration/test_dry_run_hub.py). The disk a run needs at once is checked against a step-by-step
replay of what a run's local executor does (`dormant_tasks/run.py`: `_prefetch_past_reference`, `_computed`).
"""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dormant_tasks.checkpoints import Revision, Selection
from dormant_tasks.checkpoints.hub import is_loading_file
from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking import DryRun, TrackRequest, format_dry_run, parse_bandwidth, plan_dry_run, series_state
from dormant_tasks.tracking.plan import SeriesPlan, SeriesState
from dormant_tasks.tracking.request import Runner
from tests.builders.processes import cli_env
from tests.builders.track import track_steps

REPO = Path(__file__).resolve().parents[2]
GBIT = parse_bandwidth("1Gbit/s")


# ---- the bandwidth and the words ----


@pytest.mark.parametrize(
    "text, per_s",
    [
        ("1Gbit/s", 125e6),
        ("1 Gbit/s", 125e6),
        ("1Gbps", 125e6),
        ("500Mbit/s", 62.5e6),
        ("100MB/s", 100e6),
        ("100 MB/s", 100e6),
        ("2.5GB/s", 2.5e9),
        ("50MiB/s", 50 * 2**20),
        ("8kb/s", 1e3),  # a lowercase b is a bit
        ("10 bytes/s", 10),
    ],
)
def test_bandwidth_units(text, per_s):
    assert parse_bandwidth(text).bytes_per_s == pytest.approx(per_s)


@pytest.mark.parametrize("text", ["fast", "", "100", "1G", "0MB/s", "-5MB/s", "1Gbps/s", "MB/s", "1 GB/h"])
def test_bandwidth_refused_in_one_line(text):
    with pytest.raises(ConfigError) as e:
        parse_bandwidth(text)
    assert str(e.value).startswith("--bandwidth") and "1Gbit/s" in str(e.value) and "\n" not in str(e.value)


# ---- a Hub series' plan, by hand ----


def hub_revisions(n: int) -> list[Revision]:
    return [Revision(f"step{s}", 1, s, s * 1000, commit=f"{s:040x}") for s in range(0, 10 * n, 10)]


def hub_state(tmp_path, sizes: list[int | None], *, selected=None, pending=None, **request) -> SeriesState:
    """A Hub series of len(sizes) branches (the last one the reference of its quantile taus), nothing downloaded."""
    listed = hub_revisions(len(sizes))
    chosen = listed if selected is None else [listed[i] for i in selected]
    plan = SeriesPlan(
        tuple(listed), tuple(chosen), listed_all=tuple(listed), loading_bytes={r.name: s for r, s in zip(listed, sizes)}
    )
    req = TrackRequest(source="test-org/hub-series", store=str(tmp_path / "store"), **request)
    todo = None if pending is None else tuple(listed[i] for i in pending)
    return SeriesState(req, plan, () if todo is None else ("cal",), None, todo)


def replay_local_runner(order: list[int]) -> int:
    """The most bytes on disk at once while the local runner downloads `order` (sizes, in the run's order),
    replayed step by step as dormant_tasks/run.py runs: the first downloaded alone; then for each checkpoint, the next
    one's download starts, this one loads (both on disk), this one is evicted, then scored."""
    on_disk: dict[int, int] = {}
    peak = 0
    if order:
        on_disk[0] = order[0]
    for i in range(len(order)):
        if i + 1 < len(order):
            on_disk[i + 1] = order[i + 1]  # prefetched while this one loads
        peak = max(peak, sum(on_disk.values()))
        del on_disk[i]  # `load_checkpoint(keep=False)`: evicted once loaded, before scoring
        peak = max(peak, sum(on_disk.values()))
    return peak


def test_new_hub_series_scores_its_taus_checkpoint_first_and_sums_the_listing(tmp_path):
    sizes = [100, 300, 200, 50, 400]
    dry = plan_dry_run(hub_state(tmp_path, sizes), GBIT)
    assert [c.revision.name for c in dry.scored] == ["step40", "step0", "step10", "step20", "step30"]
    assert dry.scored[0].why.startswith("the taus' checkpoint")
    assert dry.download_bytes == sum(sizes) and dry.n_stored == 0
    order = [c.download for c in dry.scored]
    assert dry.disk_at_once == replay_local_runner(order) == 400 + 100
    assert dry.as_json()["download_seconds"] == round(sum(sizes) / 125e6, 1)


def test_reference_outside_the_selection_is_downloaded_but_not_stored(tmp_path):
    dry = plan_dry_run(hub_state(tmp_path, [10, 20, 30, 40], selected=[0, 1]), GBIT)
    assert [c.revision.name for c in dry.scored] == ["step30", "step0", "step10"]
    assert "not stored" in dry.scored[0].why
    assert dry.download_bytes == 40 + 10 + 20


def test_stored_checkpoints_cost_nothing(tmp_path):
    dry = plan_dry_run(hub_state(tmp_path, [10, 20, 30, 40], pending=[1, 3]), GBIT)
    assert [c.revision.name for c in dry.scored] == ["step10", "step30"]
    assert dry.n_stored == 2 and dry.download_bytes == 60 and dry.disk_at_once == 60


@pytest.mark.parametrize("seed", range(20))
def test_disk_at_once_matches_the_replay_of_the_flow(tmp_path, seed):
    rng = random.Random(seed)
    sizes = [rng.randrange(1, 10**9) for _ in range(rng.randrange(1, 9))]
    pending = sorted(rng.sample(range(len(sizes)), rng.randrange(1, len(sizes) + 1)))
    state = hub_state(tmp_path, sizes, pending=pending)
    dry = plan_dry_run(state, GBIT)
    assert dry.disk_at_once == replay_local_runner([c.download for c in dry.scored])
    kept = plan_dry_run(replace(state, request=replace(state.request, keep_checkpoints=True)), GBIT)
    assert kept.disk_at_once == sum(sizes[i] for i in pending) and "--keep-checkpoints" in kept.disk_rule
    dask = replace(state.request, runner=Runner.DASK, workers=3)
    on_dask = plan_dry_run(replace(state, request=dask), GBIT, workers=3)
    assert on_dask.disk_at_once == sum(sorted((sizes[i] for i in pending), reverse=True)[:3])


def test_dask_cluster_elsewhere_says_per_worker(tmp_path):
    state = hub_state(tmp_path, [10, 20], runner="dask", address="tcp://127.0.0.1:8786")
    dry = plan_dry_run(state, GBIT, workers=None)
    assert dry.disk_at_once is None and "per worker" in dry.disk_rule and "20 B" in dry.disk_rule


def test_unknown_sizes_are_said_not_guessed(tmp_path):
    dry = plan_dry_run(hub_state(tmp_path, [10, None, 30]), GBIT)
    assert dry.download_bytes is None and dry.n_unknown == 1 and dry.disk_at_once is None
    text = "\n".join(format_dry_run(dry))
    assert "to download: 40 B + 1 checkpoint of unknown size" in text
    assert "no size for 1 checkpoint" in text and "disk at once: unknown" in text
    assert dry.as_json()["download_bytes"] is None and dry.as_json()["unknown_sizes"] == 1


def test_time_at_the_stated_bandwidth(tmp_path):
    sizes = [3_000_000_000] * 4  # 12 GB
    text = "\n".join(format_dry_run(plan_dry_run(hub_state(tmp_path, sizes), parse_bandwidth("100MB/s"))))
    assert "to download: 12.0 GB" in text and "download time at 100MB/s: 2 min" in text
    slow = "\n".join(format_dry_run(plan_dry_run(hub_state(tmp_path, sizes), parse_bandwidth("10Mbit/s"))))
    assert "download time at 10Mbit/s: 2 h 40 min" in slow  # 12e9 B / 1.25e6 B/s = 9,600 s


def test_a_long_plan_shows_its_ends_and_a_count(tmp_path):
    dry = plan_dry_run(hub_state(tmp_path, [1_000] * 40), GBIT)
    lines = format_dry_run(dry, shown=6)
    rows = [line for line in lines if line.startswith("  step")]
    assert len(rows) == 6 and any("... 34 more ..." in line for line in lines)
    assert "to score: 40 checkpoints; to download: 40.0 kB" in lines
    assert len(format_dry_run(plan_dry_run(hub_state(tmp_path, [1_000] * 5), GBIT), shown=6)) < len(lines)


# ---- a real local series: sizes on disk, a real store, nothing written ----


def tree(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `folder`: (size, mtime_ns, sha256)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def loading_bytes_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and is_loading_file(p.name))


def test_local_series_downloads_nothing_and_counts_its_files_on_disk(random_series, tmp_path):
    request = TrackRequest(source=str(random_series), store=str(tmp_path / "store"), limit=4)
    dry = plan_dry_run(series_state(request, cache=False), GBIT)
    assert dry.is_local and dry.download_bytes == 0 and dry.disk_at_once == 0
    names = sorted(p.name for p in random_series.iterdir())
    assert sorted(c.revision.name for c in dry.scored) == names
    assert {c.revision.name: c.size for c in dry.scored} == {n: loading_bytes_on_disk(random_series / n) for n in names}
    text = "\n".join(format_dry_run(dry))
    assert "nothing to download (local folders, read in place" in text and "(on disk)" in text
    assert not (tmp_path / "store").exists()


def test_a_stored_series_plans_only_what_is_missing_and_writes_nothing(random_series, tmp_path):
    store = tmp_path / "store"
    first = TrackRequest(
        source=str(random_series), store=str(store), limit=4, selection=Selection(steps=(0, 10)), report=False
    )
    track_steps(first)
    whole = replace(first, selection=Selection())
    before = tree(store)
    state = series_state(whole, cache=False)
    dry = plan_dry_run(state, GBIT)
    assert tree(store) == before  # nothing written, not even a lock
    assert dry.n_stored == 2 and [c.revision.name for c in dry.scored] == ["stage1-step25-tokens51K"]
    per_checkpoint = sum(
        p.stat().st_size for t in ("checkpoints", "head_scores", "input_scores") for p in (store / t).rglob("*.parquet")
    )
    assert dry.store_growth == round(per_checkpoint / 2)
    assert isinstance(dry, DryRun) and dry.as_json()["writes"] == "nothing"
    work = tmp_path / "work"
    work.mkdir()
    r = dormant(["track", "--model", random_series, "--store", store, "--limit", "4", "--dry-run"], work)
    assert r.returncode == 0, r.stderr
    assert "3 of 3 checkpoints selected, 2 already stored" in r.stdout and "the store grows by about" in r.stdout
    assert tree(store) == before and list(work.iterdir()) == []  # the command takes no lock, writes nothing


# ---- the command ----

# The CLI in a fresh interpreter, which then says whether Prefect was ever imported (no server without it).
RUN = "import sys; from flows.cli import main; code = main(sys.argv[1:]); print('prefect imported:', 'prefect' in sys.modules); sys.exit(code)"


def dormant(args, cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN, *map(str, args)],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_dry_run_prints_the_plan_and_writes_nothing(random_series, tmp_path):
    work, hf = tmp_path / "work", tmp_path / "hf"
    work.mkdir()
    hf.mkdir()
    home = {"HF_HOME": str(hf), "HF_HUB_CACHE": str(hf / "hub")}
    r = dormant(
        ["track", "--model", random_series, "--limit", "4", "--dry-run", "--bandwidth", "100MB/s"], work, **home
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"dry run: random-olmo2 (local folder {random_series}): 3 of 3 checkpoints selected")
    assert "stage1-step25-tokens51K" in out and "the taus' checkpoint" in out
    assert "nothing was downloaded or written" in out and "prefect imported: False" in out
    assert list(work.iterdir()) == [] and tree(hf) == {}  # no store (./data/store), no report, no Hub cache
    r = dormant(["track", "--model", random_series, "--dry-run", "--format", "json", "--max", "2"], work, **home)
    assert r.returncode == 0, r.stderr
    import json

    data = json.loads(r.stdout.rsplit("prefect imported", 1)[0])
    assert data["selected"] == 2 and data["download_bytes"] == 0 and data["writes"] == "nothing"
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    "args, said",
    [
        (["--bandwidth", "1Gbit/s"], "--bandwidth is an option of --dry-run: add --dry-run, or drop --bandwidth"),
        (["--format", "json"], "--format is an option of --dry-run"),
        (["--dry-run", "--bandwidth", "fast"], "--bandwidth 'fast': give a positive rate"),
    ],
)
def test_cli_errors_are_one_line_exit_2(random_series, tmp_path, args, said):
    r = dormant(["track", "--model", random_series, *args], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().startswith(f"dormant track: error: {said}") and len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


# ---- --budget: the coarse pass for certain, the rest at most ----


def brute_most_bytes(planned: list[int], rest: list[int], extra: int) -> int:
    """The most bytes a refinement of `extra` picks among `rest` adds to `planned`: every choice tried."""
    from itertools import combinations

    return sum(planned) + max((sum(c) for c in combinations(rest, min(extra, len(rest)))), default=0)


@pytest.mark.parametrize("seed", range(12))
def test_budget_lists_the_coarse_pass_and_the_most_it_may_download(tmp_path, seed):
    from dormant_tasks.tracking.budget import available_positions, coarse_pass, coarse_size

    rng = random.Random(seed)
    n = rng.randrange(6, 11)
    sizes = [rng.randrange(1, 1000) for _ in range(n)]
    budget = rng.randrange(2, n + 2)
    stored = sorted(rng.sample(range(n), rng.randrange(0, 3))) if seed % 2 else []
    pending = [i for i in range(n) if i not in stored] if stored else None
    state = hub_state(tmp_path, sizes, pending=pending, budget=budget)
    dry = plan_dry_run(state, GBIT, budget=budget)
    positions, one_step = available_positions(list(state.plan.selected))
    coarse = coarse_pass(positions, coarse_size(budget, n), one_step)
    before = stored or [n - 1]  # a new series stores its taus' checkpoint (the last) before the search
    room = budget - len(before)
    expected = ([] if stored else [n - 1]) + [i for i in coarse if i not in before][: max(0, room)]
    assert [c.revision.name for c in dry.scored] == [f"step{10 * i}" for i in expected]
    assert dry.most == min(n - len(stored), max(0, budget - len(stored)))
    rest = [sizes[i] for i in range(n) if i not in stored and i not in expected]
    assert dry.most_bytes == brute_most_bytes([sizes[i] for i in expected], rest, dry.most - len(expected))
    extra = dry.most - len(expected)
    order = [sizes[i] for i in expected]
    assert dry.disk_at_once == max(replay_local_runner(order), max(rest) if extra and rest else 0)
    text = "\n".join(format_dry_run(dry))
    assert f"--budget {budget}: certain, the coarse pass below" in text and "to score for certain:" in text


def test_a_spent_budget_has_nothing_to_score(tmp_path):
    dry = plan_dry_run(hub_state(tmp_path, [10, 20, 30], pending=[], budget=2), GBIT, budget=2)
    assert dry.scored == () and dry.most == 0 and dry.most_bytes == 0
    assert "nothing to score: the store holds what this run would score" in "\n".join(format_dry_run(dry))


def test_free_space_where_the_downloads_go_and_a_disk_too_small(tmp_path):
    import shutil

    cache = tmp_path / "cache"
    dry = plan_dry_run(hub_state(tmp_path, [10, 20], cache_dir=str(cache)), GBIT)
    assert dry.cache == str(cache / "models--test-org--hub-series") and not cache.exists()
    assert abs(dry.cache_free - shutil.disk_usage(tmp_path).free) < 2**30 and not dry.notes
    huge = plan_dry_run(hub_state(tmp_path, [10**18, 10**18], cache_dir=str(cache)), GBIT)
    assert any("pass --cache-dir on a larger disk" in n for n in huge.notes)
    assert "free now where the downloads go" in "\n".join(format_dry_run(huge)) and not cache.exists()
