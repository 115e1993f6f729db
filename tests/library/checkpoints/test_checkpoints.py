"""Revision names, the series order, selection, and local series folders (the Hub side: test_hub.py)."""

from __future__ import annotations

import math
import shutil

import pytest

from dormant_tasks.checkpoints.loading import load_checkpoint, local_content_hash
from dormant_tasks.checkpoints.naming import (
    UNKNOWN,
    Revision,
    Selection,
    format_tokens,
    known_tokens_per_step,
    parse_revision_name,
    select_revisions,
    series_sort_key,
    training_positions,
)
from dormant_tasks.checkpoints.sources import list_revisions
from dormant_tasks.errors import CheckpointError, ConfigError
from dormant_tasks.tiny import branch_name
from flows.cli import main


@pytest.mark.parametrize(
    "name, stage, ingredient, step, tokens",
    [
        ("stage1-step140000-tokens294B", 1, None, 140000, 294 * 10**9),
        ("stage1-step1907359-tokens4001B", 1, None, 1907359, 4001 * 10**9),
        ("step150-tokens1B", 1, None, 150, 10**9),  # early 7B branches: no stage prefix
        ("stage2-ingredient3-step11931-tokens50B", 2, 3, 11931, 50 * 10**9),
        ("stage1-step250-tokens256K", 1, None, 250, 256_000),  # the local tiny series
        ("stage1-step3-tokens1536", 1, None, 3, 1536),  # no unit: an exact count
        ("stage1-step10-tokens2.5M", 1, None, 10, 2_500_000),
        ("stage1-step10-tokens1T", 1, None, 10, 10**12),
    ],
)
def test_parse_every_name_form(name, stage, ingredient, step, tokens):
    rev = parse_revision_name(name)
    assert (rev.name, rev.stage, rev.ingredient, rev.step, rev.tokens) == (name, stage, ingredient, step, tokens)


PYTHIA_TOKENS_PER_STEP = 2_097_152  # 1,024 sequences x 2,048 tokens
# Pythia's 154 branches: step0, then powers of two to step512, then every 1,000 steps to step143000.
PYTHIA_STEPS = [0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000))


@pytest.mark.parametrize(
    "name, tokens_per_step, step, tokens",
    [
        ("step0", None, 0, UNKNOWN),
        ("step143000", None, 143000, UNKNOWN),
        ("step143000", PYTHIA_TOKENS_PER_STEP, 143000, 143000 * PYTHIA_TOKENS_PER_STEP),
        ("ckpt_000", 4_000_000, 0, 0),  # LLM360: the checkpoint number is the step
        ("ckpt_359", 4_000_000, 359, 359 * 4_000_000),
        ("step20000-tokens84B", PYTHIA_TOKENS_PER_STEP, 20000, 84 * 10**9),  # OLMo-1: the name's count wins
    ],
)
def test_names_without_a_token_count(name, tokens_per_step, step, tokens):
    rev = parse_revision_name(name, tokens_per_step)
    assert (rev.name, rev.stage, rev.ingredient, rev.step, rev.tokens) == (name, 1, None, step, tokens)


def test_pythia_tokens_per_step_is_known_by_repo():
    assert len(PYTHIA_STEPS) == 154 and PYTHIA_STEPS[:4] == [0, 1, 2, 4] and PYTHIA_STEPS[-1] == 143000
    for repo in ("EleutherAI/pythia-14m", "EleutherAI/pythia-12b-deduped", "eleutherai/Pythia-160m"):
        assert known_tokens_per_step(repo) == PYTHIA_TOKENS_PER_STEP
    for repo in ("allenai/OLMo-1B-hf", "LLM360/Amber", "EleutherAI/gpt-neox-20b", "./pythia-160m"):
        assert known_tokens_per_step(repo) is None
    revs = [parse_revision_name(f"step{s}", PYTHIA_TOKENS_PER_STEP) for s in reversed(PYTHIA_STEPS)]
    ordered = sorted(revs, key=lambda r: r.sort_key)
    assert [r.step for r in ordered] == PYTHIA_STEPS
    assert ordered[-1].tokens == 299_892_736_000  # Pythia's ~300B tokens
    # --max and --steps on the Pythia axis work as on OLMo-2's: first and last kept, log-spread between
    got = [r.step for r in select_revisions(revs, max_n=5)]
    assert got[0] == 0 and got[-1] == 143000 and len(got) == 5 and got == sorted(got)
    assert [r.step for r in select_revisions(revs, steps="100:3000")] == [128, 256, 512, 1000, 2000, 3000]


def test_olmo1_branches_order_by_step():
    names = ["step20000-tokens84B", "step1000-tokens4B", "step330000-tokens1384B", "main"]
    ordered = sorted((parse_revision_name(n) for n in names), key=lambda r: r.sort_key)
    assert [r.name for r in ordered] == ["step1000-tokens4B", "step20000-tokens84B", "step330000-tokens1384B", "main"]


def test_token_suffix_is_parsed_not_derived_from_the_step():
    """The Hub rounds the token suffix inconsistently: two neighbouring 7B steps can carry the same count,
    and tokens per step vary; the name's own number is what counts."""
    a, b = parse_revision_name("stage1-step1000-tokens5B"), parse_revision_name("stage1-step2000-tokens9B")
    c = parse_revision_name("stage1-step2000-tokens8B")
    assert (a.tokens, b.tokens, c.tokens) == (5 * 10**9, 9 * 10**9, 8 * 10**9)
    assert b.tokens / b.step != a.tokens / a.step


@pytest.mark.parametrize(
    "name",
    [
        "",
        "v1.0",
        "experiment-notes",
        "stage1-step",
        "stage1-tokens4B",
        "step",
        "step-100",
        "ckpt_",
        "ckpt100",
        "checkpoint-100",
        "stage1-step100-tokens4X",
        "ingredient1-step100-tokens4B",
        "stage1-step100-tokens4B-old",
        "pr/1",
        "stage-1-step100-tokens4B",
    ],
)
def test_junk_names_do_not_parse(name):
    assert parse_revision_name(name) is None


def test_main_is_unknown_and_sorts_last():
    main_rev = parse_revision_name("main")
    assert (main_rev.stage, main_rev.step, main_rev.tokens) == (UNKNOWN, UNKNOWN, UNKNOWN)
    later = parse_revision_name("stage2-ingredient9-step99999-tokens999T")
    assert sorted([main_rev, later], key=lambda r: r.sort_key)[-1] is main_rev


def test_series_sort_key_puts_main_after_stage2_ingredients():
    """Stored rows carry main's stage as UNKNOWN (-1): the key must rank it last by its name, not first."""
    stage1 = series_sort_key("stage1-step1907359-tokens4001B", 1, None, 1907359, 4001 * 10**9)
    stage2 = series_sort_key("stage2-ingredient3-step11931-tokens50B", 2, 3, 11931, 50 * 10**9)
    main_key = series_sort_key("main", UNKNOWN, None, UNKNOWN, UNKNOWN)
    assert sorted([main_key, stage2, stage1]) == [stage1, stage2, main_key]
    rev = parse_revision_name("stage2-ingredient3-step11931-tokens50B")
    assert rev.sort_key == stage2


def test_training_order_stage1_by_step_then_ingredients():
    names = [
        "stage2-ingredient2-step10-tokens1B",
        "stage1-step2000-tokens9B",
        "stage2-ingredient1-step20-tokens2B",
        "step150-tokens1B",
        "main",
        "stage2-ingredient1-step10-tokens1B",
        "stage1-step1000-tokens5B",
    ]
    ordered = sorted((parse_revision_name(n) for n in names), key=lambda r: r.sort_key)
    assert [r.name for r in ordered] == [
        "step150-tokens1B",
        "stage1-step1000-tokens5B",
        "stage1-step2000-tokens9B",
        "stage2-ingredient1-step10-tokens1B",
        "stage2-ingredient1-step20-tokens2B",
        "stage2-ingredient2-step10-tokens1B",
        "main",
    ]


def test_training_positions_continue_after_a_restarting_group():
    revs = [
        parse_revision_name(n)
        for n in (
            "stage1-step0-tokens0",
            "stage1-step10-tokens100",
            "stage2-ingredient1-step1-tokens5",
            "stage2-ingredient1-step2-tokens9",
            "stage2-ingredient2-step1-tokens4",
        )
    ]
    assert training_positions(revs) == [0, 100, 105, 109, 113]


# OLMo-3's branch names carry no token count (docs/CHECKPOINTS.md gives where each form comes from): 7B
# `stage1-step0` .. `stage1-step1413814`, `stage2-step…` to `stage2-step47684`, `stage3-step…` to
# `stage3-step11921`; 32B two midtraining ingredients, `stage2-ingredient{1,2}-step…`.
OLMO3_7B = "allenai/Olmo-3-1025-7B"
OLMO3_32B = "allenai/Olmo-3-1125-32B"


@pytest.mark.parametrize(
    "name, stage, ingredient, step, tokens",
    [
        ("stage1-step0", 1, None, 0, 0),
        ("stage1-step1413814", 1, None, 1413814, 1413814 * 4_194_304),  # the 7B card's 5.93T
        ("stage2-step47684", 2, None, 47684, 47684 * 2_097_152),  # midtraining's 100B, counted from its start
        ("stage3-step11921", 3, None, 11921, 11921 * 4_194_304),  # long context's 50B
    ],
)
def test_olmo3_7b_names_take_their_stage_s_tokens_per_step(name, stage, ingredient, step, tokens):
    rev = parse_revision_name(name, known_tokens_per_step(OLMO3_7B))
    assert (rev.name, rev.stage, rev.ingredient, rev.step, rev.tokens) == (name, stage, ingredient, step, tokens)
    assert format_tokens(parse_revision_name("stage1-step1413814", known_tokens_per_step(OLMO3_7B)).tokens) == "5.93T"
    assert round(parse_revision_name("stage2-step47684", known_tokens_per_step(OLMO3_7B)).tokens / 1e9) == 100
    assert round(parse_revision_name("stage3-step11921", known_tokens_per_step(OLMO3_7B)).tokens / 1e9) == 50


def test_olmo3_32b_ingredients_and_stages_order_and_count():
    per_step = known_tokens_per_step(OLMO3_32B)
    assert per_step == {1: 8_388_608, 2: 4_194_304, 3: 8_388_608}
    assert known_tokens_per_step("ALLENAI/OLMO-3-1025-7B") == {1: 4_194_304, 2: 2_097_152, 3: 4_194_304}
    names = [
        "stage3-step1000",
        "stage2-ingredient2-step1000",
        "main",
        "stage1-step656000",
        "stage2-ingredient1-step23842",
        "stage1-step1000",
        "stage2-ingredient1-step1000",
    ]
    ordered = sorted((parse_revision_name(n, per_step) for n in names), key=lambda r: r.sort_key)
    assert [r.name for r in ordered] == [
        "stage1-step1000",
        "stage1-step656000",
        "stage2-ingredient1-step1000",
        "stage2-ingredient1-step23842",
        "stage2-ingredient2-step1000",
        "stage3-step1000",
        "main",
    ]
    ingredient = parse_revision_name("stage2-ingredient2-step1000", per_step)
    assert (ingredient.stage, ingredient.ingredient, ingredient.tokens) == (2, 2, 1000 * 4_194_304)
    assert format_tokens(parse_revision_name("stage1-step656000", per_step).tokens) == "5.503T"  # the card's 5.50T
    # without a known value the stage names have no tokens (listing asks for --tokens-per-step), a given one serves all
    assert parse_revision_name("stage2-step10").tokens == UNKNOWN
    assert parse_revision_name("stage2-step10", 100).tokens == 1000
    assert parse_revision_name("stage4-step10", per_step).tokens == UNKNOWN  # a stage the table does not know


@pytest.mark.parametrize(
    "name",
    [
        "stage2-step47684-mix-a-from-2T-ckpt",
        "stage-step10",
        "stage1-step10-",
        "stage1-ingredient-step10",
        "stage1step10",
    ],
)
def test_olmo3_like_names_that_are_not_checkpoints(name):
    """OLMo-3 7B also has mix-ablation branches `stage2-step47684-mix-*-from-2T-ckpt` (the `*` stands in for a part
    not confirmed here): they are not the main run, and are skipped like any other non-checkpoint name."""
    assert parse_revision_name(name, 100) is None


def test_olmoe_names_are_olmo2_forms():
    """OLMoE-1B-7B-0924 keeps `step{S}-tokens{T}B` branches (step5000-tokens20B .. step1220000-tokens5117B; main is
    annealed from step1200000-tokens5033B); -0125 keeps `stage2-ingredient{N}-step{S}-tokens{T}B`."""
    rev = parse_revision_name("step1200000-tokens5033B")
    assert (rev.stage, rev.step, rev.tokens) == (1, 1200000, 5033 * 10**9)
    names = ["main", "fp32", "step1220000-tokens5117B", "step5000-tokens20B", "step1200000-tokens5033B"]
    parsed = [r for n in names if (r := parse_revision_name(n)) is not None]
    assert [r.name for r in sorted(parsed, key=lambda r: r.sort_key)] == [
        "step5000-tokens20B",
        "step1200000-tokens5033B",
        "step1220000-tokens5117B",
        "main",
    ]  # `fp32` (main in float32) is not a checkpoint of the series
    ing = parse_revision_name("stage2-ingredient3-step5000-tokens21B")
    assert (ing.stage, ing.ingredient, ing.step, ing.tokens) == (2, 3, 5000, 21 * 10**9)


def test_training_positions_put_a_later_stage_after_a_partly_selected_one():
    """Stage 3's count restarts too: it follows stage 2's reached position even when stage 2 was selected only
    up to a count below stage 3's (the last count compared alone left stage 3 on top of stage 1's end)."""
    per_step = known_tokens_per_step(OLMO3_7B)
    revs = [parse_revision_name(n, per_step) for n in ("stage1-step1413814", "stage2-step1000", "stage3-step11921")]
    end1 = 1413814 * 4_194_304
    assert training_positions(revs) == [end1, end1 + 1000 * 2_097_152, end1 + 1000 * 2_097_152 + 11921 * 4_194_304]


def test_format_tokens():
    assert [format_tokens(t) for t in (256_000, 4001 * 10**9, 294 * 10**9, 1536, 0, UNKNOWN)] == [
        "256K",
        "4.001T",
        "294B",
        "1.536K",
        "0",
        "?",
    ]


def series(steps, tokens_per_step=1000):
    return [Revision(f"stage1-step{s}-tokens{s * tokens_per_step}", 1, s, s * tokens_per_step) for s in steps]


def test_select_steps_inclusive_and_open_ended():
    revs = series([0, 100, 200, 300, 400])
    assert [r.step for r in select_revisions(revs, steps="100:300")] == [100, 200, 300]
    assert [r.step for r in select_revisions(revs, steps=":100")] == [0, 100]
    assert [r.step for r in select_revisions(revs, steps="300:")] == [300, 400]
    assert [r.step for r in select_revisions(revs, steps="200")] == [200]
    assert [r.step for r in select_revisions(revs, steps=(None, 0))] == [0]


def test_select_every_kth_in_training_order():
    revs = series([0, 7, 100, 150, 900, 1000, 5000])[::-1]  # irregular spacing, given in reverse
    assert [r.step for r in select_revisions(revs, every=3)] == [0, 150, 5000]
    assert [r.step for r in select_revisions(revs, every=1)] == sorted(r.step for r in revs)


def test_select_globs_any_of_several():
    revs = series([100, 200]) + [
        parse_revision_name("stage2-ingredient1-step5-tokens1B"),
        parse_revision_name("stage2-ingredient2-step5-tokens1B"),
    ]
    assert [r.name for r in select_revisions(revs, revisions_glob="stage2-*")] == [
        "stage2-ingredient1-step5-tokens1B",
        "stage2-ingredient2-step5-tokens1B",
    ]
    got = select_revisions(revs, revisions_glob=["*ingredient2*", "stage1-step100-*"])
    assert [r.name for r in got] == ["stage1-step100-tokens100000", "stage2-ingredient2-step5-tokens1B"]


def test_max_spreads_evenly_in_log_tokens_with_first_and_last():
    """Against a brute-force oracle: of all subsets of size n holding first and last, the chosen one has
    the smallest total distance of its sorted log(tokens + one step's tokens) to the evenly spaced targets."""
    import itertools

    steps = [0, 1, 2, 3, 5, 8, 10, 20, 40, 80, 100, 200, 400, 800, 1000, 2000, 5000, 10000]
    revs = series(steps)  # 1000 tokens per step
    for n in (2, 3, 4, 5):
        got = select_revisions(revs, max_n=n)
        assert got[0] is revs[0] and got[-1] is revs[-1] and len(got) == n
        x = [math.log(r.tokens + 1000) for r in revs]
        targets = [x[0] + (x[-1] - x[0]) * i / (n - 1) for i in range(n)]

        def cost(idx, x=x, targets=targets):
            return sum(abs(x[i] - t) for i, t in zip(idx, targets))

        best = min(cost((0, *mid, len(revs) - 1)) for mid in itertools.combinations(range(1, len(revs) - 1), n - 2))
        assert cost([revs.index(r) for r in got]) == pytest.approx(best)
    assert [r.step for r in select_revisions(revs, max_n=1)] == [10000]
    assert len(select_revisions(revs, max_n=100)) == len(revs)


DEMO_STEPS = [0, 10, 25, 50, 100, 250, 500, 750, 1000, 1250, 1500, 2000]  # `make demo`'s checkpoints
DEMO_TOKENS_PER_STEP = 8 * 64  # TinyRunConfig: batch_size x seq_len


def test_max_on_the_demo_series_covers_early_middle_and_late():
    """With step 0 at one step's tokens on the log axis, --max 6 no longer spends every pick on the first
    100 steps (log1p gave 0, 10, 25, 50, 100, 2000)."""
    revs = [parse_revision_name(branch_name(s, s * DEMO_TOKENS_PER_STEP)) for s in DEMO_STEPS]
    assert revs[5].name == "stage1-step250-tokens128K"  # the demo's own names, token counts rounded in them
    got = [r.step for r in select_revisions(revs, max_n=6)]
    assert got == [0, 10, 25, 100, 500, 2000]
    early, middle, late = DEMO_STEPS[:4], DEMO_STEPS[4:8], DEMO_STEPS[8:]
    assert got[0] == 0 and got[-1] == 2000
    assert any(s in middle and 250 <= s <= 1500 for s in got)
    assert all(any(s in third for s in got) for third in (early, middle, late))


def test_filters_compose_in_order_and_main_stays_last():
    revs = series([0, 100, 200, 300, 400, 500, 600]) + [parse_revision_name("main")]
    got = select_revisions(revs, steps="100:", every=2, max_n=2)
    assert [r.name for r in got] == ["stage1-step100-tokens100000", "stage1-step500-tokens500000", "main"]
    assert [r.name for r in select_revisions(revs, revisions_glob="stage1-*")][-1] == "stage1-step600-tokens600000"


def test_empty_selection_names_itself_and_the_count():
    revs = series([100, 200, 300])
    with pytest.raises(ConfigError, match=r"--steps 5000:6000 matches none of the 3 revisions"):
        select_revisions(revs, steps="5000:6000")
    with pytest.raises(
        ConfigError,
        match=r"--revisions stage1-step100-tokens100001.*did you mean "
        r"\"stage1-step100-tokens100000\"",
    ):
        select_revisions(revs, revisions_glob="stage1-step100-tokens100001")


@pytest.mark.parametrize(
    "kwargs, match",
    [({"steps": "a:b"}, "--steps"), ({"steps": "300:100"}, "swap"), ({"every": 0}, "--every"), ({"max_n": 0}, "--max")],
)
def test_bad_selection_options(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Selection(**kwargs)


@pytest.fixture
def local_series(tmp_path, tiny_model_dir):
    """A folder of checkpoint folders (copies of the tiny random model) plus things that are not checkpoints."""
    for name in (
        "stage1-step250-tokens256K",
        "stage1-step1000-tokens1024K",
        "stage2-ingredient1-step10-tokens10K",
        "main",
        "scratch-run",
    ):
        shutil.copytree(tiny_model_dir, tmp_path / name)
    (tmp_path / "notes").mkdir()  # no config.json: not a checkpoint
    (tmp_path / "README.txt").write_text("not a folder")
    return tmp_path


def test_local_folder_listing(local_series):
    listing = list_revisions(local_series)
    assert listing.is_local
    assert [r.name for r in listing.revisions] == [
        "stage1-step250-tokens256K",
        "stage1-step1000-tokens1024K",
        "stage2-ingredient1-step10-tokens10K",
    ]
    assert all(r.path == local_series / r.name and r.commit is None for r in listing.revisions)
    assert listing.skipped == ["notes/ (no config.json)", "scratch-run"]
    assert list_revisions(local_series, include_main=True).revisions[-1].name == "main"


def test_empty_folder_and_bad_sources_are_clear_errors(tmp_path, tiny_model_dir):
    with pytest.raises(CheckpointError, match="no checkpoints found"):
        list_revisions(tmp_path)
    (tmp_path / "junk").mkdir()
    shutil.copytree(tiny_model_dir, tmp_path / "main")
    with pytest.raises(CheckpointError, match="--include-main"):
        list_revisions(tmp_path)
    with pytest.raises(CheckpointError, match="no such folder"):
        list_revisions(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="itself a checkpoint"):
        list_revisions(tiny_model_dir)
    with pytest.raises(CheckpointError, match="neither an existing folder nor a Hub repo id"):
        list_revisions("not a valid/repo id")
    # two slashes: a path, never a Hub id (sources.is_local_source: the CLI and the library read it alike)
    with pytest.raises(CheckpointError, match="no such folder; point --model at a folder .* or at a Hub repo id"):
        list_revisions("not a/valid/repo id")


def test_cli_table_and_errors(local_series, capsys):
    assert main(["checkpoints", "--model", str(local_series), "--include-main", "--max", "2"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0].split() == ["name", "stage", "ingredient", "step", "tokens", "commit"]
    assert out[1].split() == ["stage1-step250-tokens256K", "1", "250", "256K", "local"]
    assert out[2].split() == ["stage2-ingredient1-step10-tokens10K", "2", "1", "10", "10K", "local"]
    assert out[3].split() == ["main", "?", "?", "?", "local"]
    assert "checkpoints of" in out[-1] and "skipped 2 names" in captured.err  # the note is a diagnostic
    assert main(["checkpoints", "--model", str(local_series), "--steps", "9:8"]) == 2
    assert "swap" in capsys.readouterr().err


LOCAL_PYTHIA_STEPS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000]  # 13 folders, named like Pythia's


@pytest.fixture
def step_series(tmp_path):
    """A local series named like Pythia's branches; listing reads only names and config.json."""
    for step in reversed(LOCAL_PYTHIA_STEPS):
        (tmp_path / f"step{step}").mkdir()
        (tmp_path / f"step{step}" / "config.json").write_text("{}")
    return tmp_path


def test_local_step_series_lists_in_step_order_with_tokens_per_step(step_series):
    listing = list_revisions(step_series, tokens_per_step=1024)
    assert [r.name for r in listing.revisions] == [f"step{s}" for s in LOCAL_PYTHIA_STEPS]  # not step1000 < step128
    assert [r.tokens for r in listing.revisions] == [s * 1024 for s in LOCAL_PYTHIA_STEPS]
    assert [r.step for r in select_revisions(listing.revisions, steps="64:1000")] == [64, 128, 256, 512, 1000]
    assert [r.step for r in select_revisions(listing.revisions, max_n=4)] == [0, 16, 128, 2000]


def test_local_step_series_without_tokens_per_step_is_one_line(step_series, capsys):
    with pytest.raises(CheckpointError, match=r"13 checkpoint names \(step0 ... step2000\).*--tokens-per-step N"):
        list_revisions(step_series)
    assert main(["checkpoints", "--model", str(step_series)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tokens-per-step" in err
    assert main(["checkpoints", "--model", str(step_series), "--tokens-per-step", "0"]) == 2
    assert "positive integer" in capsys.readouterr().err
    assert main(["checkpoints", "--model", str(step_series), "--tokens-per-step", "2048", "--max", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:4]] == ["step0", "step32", "step2000"]
    assert out[3].split()[3] == format_tokens(2000 * 2048) == "4.096M"


def test_llm360_checkpoint_indices_ask_for_tokens_per_checkpoint(tmp_path):
    """LLM360's ckpt_{N} numbers checkpoints (about 3.5B tokens each for Amber), not optimizer steps."""
    for n in (0, 1, 10):
        (tmp_path / f"ckpt_{n:03d}").mkdir()
        (tmp_path / f"ckpt_{n:03d}" / "config.json").write_text("{}")
    with pytest.raises(
        CheckpointError, match=r"tokens per checkpoint: the number in ckpt_\{N\} is a checkpoint index"
    ) as e:
        list_revisions(tmp_path)
    assert "sequences per batch" not in str(e.value)
    assert [r.tokens for r in list_revisions(tmp_path, tokens_per_step=3_500_000_000).revisions][-1] == 35_000_000_000


def test_local_checkpoint_loads_in_place_with_a_content_hash(local_series, tiny_model_dir):
    rev = list_revisions(local_series).revisions[0]
    loaded = load_checkpoint(local_series, rev, device="cpu", keep=False)
    assert loaded.local_path == rev.path and rev.path.exists()  # never evicted
    assert loaded.commit == local_content_hash(tiny_model_dir)  # same bytes, same hash
    (rev.path / "config.json").write_text((rev.path / "config.json").read_text() + " ")
    assert local_content_hash(rev.path) != loaded.commit


def test_track_request_carries_tokens_per_step(step_series, tmp_path, capsys):
    from dormant_tasks.tracking.request import TrackRequest

    request = TrackRequest(source=str(step_series), store=str(tmp_path / "store"), tokens_per_step=1024)
    again = TrackRequest.from_json(request.to_json())
    assert again == request and again.tokens_per_step == 1024
    assert again.request_id != TrackRequest(source=str(step_series), store=str(tmp_path / "store")).request_id
    # refused before Prefect starts, in one line
    assert main(["track", "--model", str(step_series), "--store", str(tmp_path / "s"), "--tokens-per-step", "-5"]) == 2
    assert "--tokens-per-step" in capsys.readouterr().err
    saved = tmp_path / "request.json"
    saved.write_text(request.to_json())
    assert main(["track", "--request", str(saved), "--tokens-per-step", "5"]) == 2
    assert "drop --tokens-per-step" in capsys.readouterr().err
