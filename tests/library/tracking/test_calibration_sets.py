"""The bundled calibration sets by name, user text files, several sets at once, and their one-line errors."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from dormant_tasks.errors import ConfigError, DormantError, ScoringError
from dormant_tasks.tracking import calibration as cal
from dormant_tasks.tracking.calibration import (
    AVAILABLE_TEXTS,
    BUNDLED_SETS,
    CODE_LINES,
    DEFAULT_CALIBRATION_SIZE,
    MMLU_DIR,
    WINOGRANDE_DEV,
    bundled_set_names,
    describe_bundled_sets,
    load_calibration,
    load_calibration_set,
    load_calibration_sets,
    winogrande_calibration,
)

NAMES = ["winogrande", "wikipedia", "mmlu", "hellaswag", "gsm8k", "code"]


@pytest.fixture(scope="module")
def full_sets() -> dict[str, cal.CalibrationSet]:
    """Every bundled set with all its texts (read once: MMLU is 57 Parquet files)."""
    return {name: load_calibration_set(name, None) for name in NAMES}


def _one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message.strip() == message
    return message


def test_the_bundled_set_names_and_their_descriptions():
    assert bundled_set_names() == NAMES == list(BUNDLED_SETS)
    lines = describe_bundled_sets().splitlines()
    assert len(lines) == len(NAMES)
    for name, line in zip(NAMES, lines):
        assert line.split()[0] == name
        assert f"({AVAILABLE_TEXTS[name]:,} texts)" in line and BUNDLED_SETS[name][0] in line


def test_every_bundled_set_gives_128_unique_non_empty_single_line_texts():
    ids = set()
    for name in NAMES:
        calibration = load_calibration_set(name)
        texts = calibration.texts
        assert len(texts) == DEFAULT_CALIBRATION_SIZE == 128, name
        assert len(set(texts)) == len(texts), name
        assert all(isinstance(t, str) and t.strip() == t and t for t in texts), name
        assert not any("\n" in t or "\r" in t for t in texts), name
        assert calibration.name == ("winogrande-dev" if name == "winogrande" else name)
        assert calibration.calibration_id.startswith(f"{calibration.name}-128-")
        ids.add(calibration.calibration_id)
    assert len(ids) == len(NAMES)


def test_the_full_sets_hold_the_advertised_counts_and_limit_keeps_a_prefix(full_sets):
    for name, calibration in full_sets.items():
        texts = calibration.texts
        assert len(texts) == AVAILABLE_TEXTS[name], name
        assert len(set(texts)) == len(texts) and all(texts), name
        if name != "winogrande":  # the historical set is kept byte for byte; the others are normalised
            assert all(" ".join(t.split()) == t for t in texts), name
        assert load_calibration_set(name, 7).texts == texts[:7], name


def test_the_winogrande_set_keeps_the_calibration_id_of_existing_stores():
    # the oracle: the historical default recomputed from the jsonl, independently of the module
    with open(WINOGRANDE_DEV, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()][:128]
    texts = [i["sentence"].replace("_", i["option1"] if i["answer"] == "1" else i["option2"], 1) for i in items]
    oracle = f"winogrande-dev-128-{hashlib.sha256(chr(10).join(texts).encode('utf-8')).hexdigest()[:12]}"
    assert winogrande_calibration(128).calibration_id == oracle
    assert load_calibration(None, 128).calibration_id == oracle
    assert load_calibration().calibration_id == oracle  # the default size is 128
    assert load_calibration_set("winogrande").calibration_id == oracle
    assert load_calibration_set("winogrande", 128).texts == tuple(texts)
    assert load_calibration_set("winogrande", None).texts == winogrande_calibration(None).texts


def test_mmlu_mixes_the_subjects_from_the_first_question():
    import pyarrow.parquet as pq

    subject_of = {}
    for folder in sorted(MMLU_DIR.iterdir()):
        for q in pq.read_table(folder / "test.parquet", columns=["question"]).column("question").to_pylist():
            subject_of.setdefault(" ".join(q.split()), folder.name)
    texts = load_calibration_set("mmlu").texts
    subjects = Counter(subject_of[t] for t in texts)
    assert len(subjects) == 57  # round-robin: the first 57 are one question of each subject
    assert max(subjects.values()) <= 3
    assert [subject_of[t] for t in texts[:3]] == ["abstract_algebra", "anatomy", "astronomy"]


def test_a_user_file_is_a_set_named_after_its_stem(tmp_path):
    path = tmp_path / "my-texts.txt"
    path.write_text("first text\n\n  \nsecond text\nthird text\n", encoding="utf-8")
    calibration = load_calibration_set(str(path))
    assert calibration.name == "my-texts" and calibration.texts == ("first text", "second text", "third text")
    assert calibration == load_calibration(path)  # the same as --texts FILE today
    assert load_calibration_set(path, 2).texts == ("first text", "second text")


def test_an_unknown_name_lists_the_bundled_sets():
    with pytest.raises(ConfigError) as excinfo:
        load_calibration_set("no-such-set")
    message = _one_line_error(excinfo)
    assert "'no-such-set'" in message and "did you mean" not in message
    assert all(name in message for name in NAMES)
    assert "file" in message  # the other way out


def test_a_close_typo_suggests_the_bundled_name():
    for typo, meant in (
        ("wikipeda", "wikipedia"),
        ("hellaswg", "hellaswag"),
        ("gsm8", "gsm8k"),
        ("winograd", "winogrande"),
    ):
        with pytest.raises(ConfigError) as excinfo:
            load_calibration_set(typo)
        assert f'did you mean "{meant}"?' in _one_line_error(excinfo), typo


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "holds no text"),
        (b"\n  \n\t\n", "holds no text"),
        (b"caf\xe9 au lait\n", "not UTF-8"),
        (b"one text\ntwo\x00texts\n", "line 2 holds NUL bytes"),  # before: scored silently
        (b'{"text": "a\x00b", "id": 1}\n', "line 1 holds NUL bytes"),
    ],
    ids=["empty", "blank-lines", "latin-1", "nul", "nul-json"],
)
def test_a_bad_texts_file_is_refused_in_one_line(tmp_path, content, needle):
    path = tmp_path / "texts.txt"
    path.write_bytes(content)
    with pytest.raises(ScoringError) as excinfo:
        load_calibration_set(str(path), cluster_field="id" if content.startswith(b"{") else None)
    message = _one_line_error(excinfo)
    assert needle in message and str(path) in message


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(DormantError) as excinfo:
        load_calibration_set(str(tmp_path))
    assert "is a folder" in _one_line_error(excinfo)


def test_a_device_a_fifo_and_a_socket_are_refused_before_any_read(tmp_path):
    """Only a regular file is read: `/dev/zero` read forever (a progress line every 20 s), a FIFO without a writer
    waited forever, before. Each is refused in one line naming what it is; none is opened."""
    import os
    import socket

    fifo, sock = tmp_path / "texts.fifo", tmp_path / "texts.sock"
    os.mkfifo(fifo)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    try:
        for path, what in [("/dev/zero", "a character device"), (fifo, "a pipe (FIFO)"), (sock, "a socket")]:
            with pytest.raises(ScoringError) as excinfo:
                load_calibration_set(str(path))
            message = _one_line_error(excinfo)
            assert f"is {what}, not a regular file" in message and "save the texts to a file" in message, message
    finally:
        server.close()


def test_a_symlink_loop_is_refused_in_one_line(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ScoringError) as excinfo:
        load_calibration_set(str(tmp_path / "loop"))
    assert "cannot be read (Too many levels of symbolic links)" in _one_line_error(excinfo)


def test_bytes_read_without_a_line_break_are_bounded(tmp_path, monkeypatch):
    """A line past MAX_LINE_CHARS is no text of a one-text-per-line file: refused, not read to its end (lowered
    here so the test writes 100 KB, not 256 MB)."""
    monkeypatch.setattr(cal, "MAX_TEXT_CHARS", 1000)
    monkeypatch.setattr(cal, "MAX_LINE_CHARS", 20_000)
    path = tmp_path / "one-line.txt"
    path.write_text("first\n" + "x" * 100_000, encoding="utf-8")
    with pytest.raises(ScoringError) as excinfo:
        load_calibration_set(str(path))
    assert "line 2 runs past 20,000 characters without a line break" in _one_line_error(excinfo)


def test_a_bad_limit_is_refused():
    for limit in (0, -3):
        with pytest.raises(ConfigError, match="--limit must be at least 1"):
            load_calibration_set("code", limit)


def test_several_sets_keep_their_order(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("a text of mine\nanother\n", encoding="utf-8")
    sets = load_calibration_sets(["code", "winogrande", str(path)], 16)
    assert [s.name for s in sets] == ["code", "winogrande-dev", "mine"]
    assert [len(s.texts) for s in sets] == [16, 16, 2]
    assert load_calibration_sets(["gsm8k"])[0] == load_calibration_set("gsm8k")


def test_several_sets_refuse_none_and_the_same_texts_twice(tmp_path):
    with pytest.raises(ConfigError) as excinfo:
        load_calibration_sets([])
    assert "no calibration set" in _one_line_error(excinfo)
    with pytest.raises(ConfigError) as excinfo:
        load_calibration_sets(["mmlu", "code", "mmlu"], 8)
    message = _one_line_error(excinfo)
    assert "'mmlu'" in message and "twice" in message
    copy = tmp_path / "copy-of-wikipedia.txt"
    copy.write_text("\n".join(load_calibration_set("wikipedia", 20).texts) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        load_calibration_sets(["wikipedia", str(copy)], 20)
    message = _one_line_error(excinfo)
    assert "'wikipedia'" in message and str(copy) in message and "same texts" in message
    # the same file under more lines than the limit differs from the set only past the limit: still the same
    with pytest.raises(ConfigError, match="same texts"):
        load_calibration_sets([str(copy), "wikipedia"], 10)
    assert len(load_calibration_sets(["wikipedia", str(copy)], 30)) == 2  # 30 wikipedia texts, 20 of the file


def test_the_code_lines_file_is_committed_small_and_one_line_per_text():
    assert CODE_LINES.is_file()
    assert 0 < CODE_LINES.stat().st_size < 200_000
    lines = CODE_LINES.read_text(encoding="utf-8").splitlines()
    assert len(lines) == AVAILABLE_TEXTS["code"] and len(set(lines)) == len(lines)
    assert all(20 <= len(line) <= 200 and not line.startswith("#") for line in lines)
    if shutil.which("git") is None:
        pytest.skip("no git to ask whether the file is committed")
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", str(CODE_LINES)], cwd=CODE_LINES.parent, capture_output=True
    )
    if tracked.returncode == 128 and b"not a git repository" in tracked.stderr:
        pytest.skip("not a git checkout (an installed package)")
    assert tracked.returncode == 0, tracked.stderr.decode()


def test_the_module_and_the_help_text_read_no_parquet():
    code = (
        "import sys, dormant_tasks.tracking.calibration as c; c.describe_bundled_sets(); c.bundled_set_names(); "
        "c.load_calibration_set('code'); print(sorted({'pyarrow', 'pandas', 'datasets', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_limit_a_bundled_set_and_a_file_are_128_texts(tmp_path):
    """`--calibration winogrande` without --limit is the default calibration set (same calibration_id), as
    --limit's help says: 128 texts of a bundled set and of a file (a longer file gives a note naming --limit)."""
    from dormant_tasks.tracking.request import TrackRequest

    path = tmp_path / "mine.txt"
    path.write_text("\n".join(f"text number {i}" for i in range(300)) + "\n", encoding="utf-8")
    gsm8k, mine = load_calibration_sets(["gsm8k", str(path)])
    assert len(gsm8k.texts) == 128 and len(mine.texts) == 128
    assert mine.more and "--limit" in mine.notes("track")[0] and len(mine.notes("track")) == 1
    assert len(load_calibration(path).texts) == 128 and len(load_calibration(path, 300).texts) == 300
    assert not load_calibration(path, 300).more and not load_calibration(path, 300).notes("track")
    default = TrackRequest(source="x", store="s").calibration
    named = TrackRequest(source="x", store="s", calibrations=("winogrande", "code")).calibration_sets
    assert named[0].calibration_id == default.calibration_id and len(named[1].texts) == 128


def test_a_texts_file_is_read_only_as_far_as_the_limit(tmp_path):
    """A file of a million lines with --limit 8: the read stops after the ninth text (which says there are
    more), so the memory it takes does not grow with the file (before: the whole file, then every line)."""
    import tracemalloc

    path = tmp_path / "million.txt"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"calibration text number {i}\n" for i in range(1_000_000))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        calibration = load_calibration(path, 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert calibration.texts == tuple(f"calibration text number {i}" for i in range(8)) and calibration.more
    assert peak < size / 50, (peak, size)  # 33 MB of file: well under 1 MB read


def test_a_huge_line_is_cut_without_being_held_whole(tmp_path, monkeypatch):
    """A line longer than MAX_TEXT_CHARS is cut to it while reading (the model reads at most its context);
    the next line is still the next text. MAX_TEXT_CHARS is lowered so the test writes 8 MB, not 100 MB."""
    import tracemalloc

    from dormant_tasks.tracking import calibration as module

    monkeypatch.setattr(module, "MAX_TEXT_CHARS", 1000)
    path = tmp_path / "long.txt"
    path.write_text("short one\n" + "x" * 8_000_000 + "\nlast one\n", encoding="utf-8")
    tracemalloc.start()
    try:
        calibration = load_calibration(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert calibration.texts == ("short one", "x" * 1000, "last one") and calibration.n_cut == 1
    assert "1 texts of long are longer than 1,000" in calibration.notes("score")[0]
    assert peak < 1_000_000, peak


def test_texts_split_as_the_whole_text_splits(tmp_path):
    """Lines read one at a time are the texts `str.splitlines` gave on the whole file (its calibration_id
    is unchanged): CRLF, a lone CR, and the other line breaks splitlines knows."""
    content = "one\r\ntwo\rthree\x0bfour\u2028five\n\n six \n"
    path = tmp_path / "breaks.txt"
    path.write_bytes(content.encode("utf-8"))
    expected = tuple(t for t in content.splitlines() if t.strip())
    assert load_calibration(path).texts == expected


# ---- drawn sets and clusters


def test_winogrande_twins_pair_consecutive_items_that_differ_in_a_word_or_two():
    items = cal.load_winogrande_items()
    twins = cal.winogrande_twins(items)
    sizes = Counter(Counter(twins).values())
    assert sizes == {1: 699, 2: 284}  # every adjacent pair with the same options overlaps by > 0.5, no other
    first = twins.index(next(c for c, n in Counter(twins).items() if n == 2))
    a, b = items[first], items[first + 1]
    assert {a["option1"], a["option2"]} == {b["option1"], b["option2"]} and a["answer"] != b["answer"]
    assert load_calibration_set("winogrande").clusters[:8] == (0, 0, 1, 2, 3, 4, 5, 5)


def test_drawn_sets_are_disjoint_cluster_whole_seeded_and_named():
    one, two = load_calibration_set("winogrande:1"), load_calibration_set("winogrande:2")
    assert one.calibration_id.startswith("winogrande-dev-draw1-seed0-128-") and len(one.texts) == len(two.texts) == 128
    assert not set(one.texts) & set(two.texts)
    assert load_calibration_set("winogrande:2") == two  # seeded
    assert set(one.texts) != set(load_calibration_set("winogrande").texts[:128])  # drawn, not the first 128
    assert cal.calibration_kind(one.calibration_id) == cal.calibration_kind(two.calibration_id) == "winogrande-dev"
    assert cal.calibration_kind(load_calibration_set("winogrande").calibration_id) == "winogrande-dev"
    # a twin pair is never split: each cluster of the full set lies in one draw with all its texts
    texts, keys, units = BUNDLED_SETS["winogrande"][1]()
    assert units == keys  # a twin pair is both the cluster and what a draw keeps whole
    where = {t: k for t, k in zip(texts, keys)}
    for drawn in (one, two):
        for key in {where[t] for t in drawn.texts}:
            assert all(t in drawn.texts for t, k in zip(texts, keys) if k == key)
    assert len(load_calibration_set("code:3").texts) == 128 and load_calibration_set("code:3").clusters is not None


def test_the_bundled_sets_are_clustered_by_their_real_units():
    """code: a file of the standard library (>= 64 of them, 4 lines each, no two of one package); MMLU: a subject; HellaSwag: an activity;
    WinoGrande: a twin pair; a draw keeps a file or a twin pair whole, and MMLU/HellaSwag draws keep a question or a
    source video whole (a subject or an activity is larger than a set)."""
    sources = [line.split() for line in cal.CODE_SOURCES.read_text(encoding="utf-8").splitlines()]
    modules = Counter(module for module, _ in sources)
    assert len(modules) >= 64 and set(modules.values()) == {4} and all(m.endswith(".py") for m in modules)
    assert len({m.split("/")[0] for m in modules}) == len(modules)  # one module of a package
    first = load_calibration_set("code")  # the first 128 lines: one line of each of 128 files
    assert first.clusters is None and len({m for m, _ in sources[:128]}) == 128
    for k in (1, 2):
        drawn = load_calibration_set(f"code:{k}")
        assert sorted(Counter(drawn.clusters).values()) == [4] * 32  # 32 whole files
    texts, keys, units = BUNDLED_SETS["mmlu"][1]()
    assert len(set(keys)) == 57 and len(set(units)) == len(texts)
    assert len(set(load_calibration_set("mmlu").clusters)) == 57  # round-robin: every subject among the first 128
    texts, keys, units = BUNDLED_SETS["hellaswag"][1]()
    assert len(set(keys)) == 192 and len(set(keys)) < len(set(units)) < len(texts)
    by_unit = {}
    for key, unit in zip(keys, units):
        by_unit.setdefault(unit, set()).add(key)
    assert all(len(activities) == 1 for activities in by_unit.values())  # a source video is of one activity
    assert len(set(load_calibration_set("hellaswag").clusters)) == 48  # the first 128 contexts: 48 activities


def test_a_draw_beyond_the_clusters_is_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        load_calibration_set("winogrande:10")
    assert "enough for 9 such sets (K <= 9)" in _one_line_error(e)
    with pytest.raises(ConfigError, match="counts the disjoint sets from 1"):
        load_calibration_set("wikipedia:0")


def test_a_file_is_cut_in_blocks_or_drawn_and_its_clusters_read_from_json_lines(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("".join(f"line {i}\n" for i in range(30)), encoding="utf-8")
    cut = load_calibration_set(f"{path}:2", 10)
    assert cut.name == "mine-cut2" and cut.texts == tuple(f"line {i}" for i in range(10, 20)) and cut.clusters is None
    with pytest.raises(ConfigError, match="holds 30"):
        load_calibration_set(f"{path}:4", 10)
    a, b = (load_calibration_set(f"{path}:{k}", 10, sample=12) for k in (1, 2))
    assert a.name == "mine-draw1-seed0" and len(a.texts) == 12 and not set(a.texts) & set(b.texts)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": f"t{i}", "doc": i // 3}) + "\n" for i in range(12)), "utf-8")
    first = load_calibration_set(str(jsonl), 6, cluster_field="doc")
    assert first.texts == ("t0", "t1", "t2", "t3", "t4", "t5") and first.clusters == (0, 0, 0, 1, 1, 1)
    drawn = load_calibration_set(str(jsonl), sample=6, cluster_field="doc")
    assert sorted(Counter(drawn.clusters).values()) == [3, 3]  # two whole documents
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_calibration_set(str(bad), cluster_field="doc")
    assert "line 1" in _one_line_error(e)


def test_a_request_stores_a_file_part_absolute_and_keeps_bundled_parts(tmp_path, monkeypatch):
    from dormant_tasks.tracking.request import _calibration_name

    (tmp_path / "mine.txt").write_text("a\nb\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert _calibration_name("mine.txt:2") == f"{tmp_path / 'mine.txt'}:2"
    assert _calibration_name("winogrande:2") == "winogrande:2"


def test_sample_draws_from_files_only_and_reads_the_drawn_texts_alone(tmp_path):
    from dormant_tasks.tracking.calibration import file_calibration

    with pytest.raises(ConfigError, match="--sample 10 draws texts from a file, and every set here is bundled"):
        load_calibration_sets(["winogrande", "code:2"], 16, sample=10)
    lines = [f"text number {i}" for i in range(500)]
    path = tmp_path / "many.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    a, b = file_calibration(path, 16, 1, 40), file_calibration(path, 16, 2, 40)
    assert len(a.texts) == len(b.texts) == 40 and not set(a.texts) & set(b.texts)  # disjoint draws
    assert set(a.texts) <= set(lines) and a.texts != tuple(lines[:40])  # drawn, not cut
    assert file_calibration(path, 16, 1, 40) == a  # seeded
