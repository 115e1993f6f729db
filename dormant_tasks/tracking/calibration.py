"""Calibration sets: the bundled sets (WinoGrande, Wikipedia, MMLU, ...), user text files and the induction probe.

The default is the first N WinoGrande dev sentences with the blank filled by the correct option (docs/SCORES.md §3).
`calibration_id` = name + short sha256 of the exact texts (of the recipe, for the induction probe's token ids:
tracking/probe.py), stored with every result so that results from different calibration sets are never compared.
Dormant heads depend on the input text, so a run may score several sets: `load_calibration_set(name_or_path)`
gives a bundled set by name (`BUNDLED_SETS`; data/README.md says where each comes from) or a UTF-8 file with one
text per line, and `load_calibration_sets(names)` several at once, refusing two with the same texts. Each bundled
text is one line (runs of whitespace collapsed to a space), non-empty, and unique (the first occurrence kept).

A plain name is the set's first N texts (the authors' protocol for `winogrande`, and what stores tracked before
draws existed hold); `NAME:K` is the K-th of disjoint sets drawn at random (seed `DRAW_SEED`) from the whole of
NAME, cluster-whole: the texts of one cluster (WinoGrande twins, a HellaSwag source video, the lines of one Python
file) always go to the same set, so two draws are the independent samples that the input-dependence test
compares (findings/dependence.py). A file is cut (`FILE:K`: its K-th block of N lines) or, with `sample`, drawn
the same way; each text's cluster is kept in `CalibrationSet.clusters` and stored with every result.
Stdlib only at import: pyarrow and numpy are imported by the loaders that need them.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
from collections import deque
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from dormant_tasks.errors import ConfigError, ScoringError, did_you_mean
from dormant_tasks.paths import bundled_file
from dormant_tasks.tracking.probe import PROBE_SET, PROBE_SIZE, ProbeSpec

WINOGRANDE_DEV = bundled_file("winogrande_dev.jsonl")
DEMO_CORPUS = bundled_file("demo_corpus.txt")
CODE_LINES = bundled_file("code_lines.txt")
CODE_SOURCES = bundled_file(
    "code_lines_files.txt"
)  # per line of CODE_LINES: "<module> <index>"; the module its cluster
TASKS = bundled_file("tasks")
MMLU_DIR = TASKS / "cais--mmlu"
HELLASWAG_VALIDATION = TASKS / "Rowan--hellaswag" / "validation.parquet"
GSM8K_TEST = TASKS / "openai--gsm8k" / "main" / "test.parquet"
DEFAULT_CALIBRATION_SIZE = 128
DRAW_SEED = 0  # of every drawn set (`NAME:K`, `--sample`); written in the set's name, so in its calibration_id
WINOGRANDE_TWIN_OVERLAP = 0.5  # word overlap (multiset Jaccard) above which consecutive items are twins


MAX_TEXT_CHARS = 1_000_000  # a longer line is cut to this (a model reads at most its context: ~30 chars a token)
# a line longer than this is not one text of a "one text per line" file (a binary file?): the read stops
MAX_LINE_CHARS = 256 * MAX_TEXT_CHARS


@dataclass(frozen=True)
class CalibrationSet:
    name: str  # "winogrande-dev", another bundled set's name ("mmlu", ...) or the texts file's stem
    texts: tuple[str, ...]
    more: bool = field(default=False, compare=False)  # a file that holds texts past the limit (not read)
    n_cut: int = field(default=0, compare=False)  # texts of a file cut to MAX_TEXT_CHARS
    # per text, its cluster (0, 1, ... in order of first appearance); None: every text its own cluster
    clusters: tuple[int, ...] | None = field(default=None, compare=False)
    probe: ProbeSpec | None = None  # token ids drawn when scored (tracking/probe.py), no texts; None: texts

    @property
    def n_inputs(self) -> int:
        return len(self.texts) if self.probe is None else self.probe.n

    def notes(self, command: str) -> list[str]:
        """What a user should know about how the set was read: texts left past the limit, texts cut."""
        out = []
        if self.more:
            out.append(
                f"dormant {command}: note: {self.name} holds more than {len(self.texts)} texts; the first "
                f"{len(self.texts)} are used (--limit N uses N)"
            )
        if self.n_cut:
            out.append(
                f"dormant {command}: note: {self.n_cut} texts of {self.name} are longer than {MAX_TEXT_CHARS:,} "
                "characters and were cut to that (the model reads at most its context)"
            )
        return out

    @property
    def calibration_id(self) -> str:
        digest = hashlib.sha256("\n".join(self.texts).encode("utf-8")).hexdigest()[:12]
        return f"{self.name}-{self.n_inputs}-{self.probe.digest if self.probe else digest}"


def load_winogrande_items(path: Path = WINOGRANDE_DEV) -> list[dict]:
    """The bundled WinoGrande dev items: dicts with sentence, option1, option2, answer ('1'/'2')."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def winogrande_filled(item: dict) -> str:
    """The sentence with the blank "_" replaced by the correct option."""
    option = item["option1"] if item["answer"] == "1" else item["option2"]
    return item["sentence"].replace("_", option, 1)


def winogrande_twins(items: Sequence[dict]) -> list[int]:
    """Per item, its cluster: consecutive dev items that are twins share one. WinoGrande was written in pairs
    that differ in a word or two (the "trigger" word flips the answer), and the dev split keeps a pair next to
    each other; two consecutive items are twins when they have the same two options (in either order) and their
    words overlap by more than WINOGRANDE_TWIN_OVERLAP (multiset Jaccard, lower-cased words). On the bundled
    file the overlaps split cleanly: 284 pairs with the same options overlap by 0.6-1.0, every other adjacent
    pair by under 0.3 (tests/library/tracking/test_calibration_sets.py). Pairs do not chain: an item is in at
    most one pair."""
    from collections import Counter

    def words(item: dict) -> Counter:
        return Counter(re.findall(r"\w+", item["sentence"].lower()))

    def twins(a: dict, b: dict) -> bool:
        if {a["option1"], a["option2"]} != {b["option1"], b["option2"]}:
            return False
        wa, wb = words(a), words(b)
        return sum((wa & wb).values()) > WINOGRANDE_TWIN_OVERLAP * sum((wa | wb).values())

    out: list[int] = []
    i = 0
    while i < len(items):
        out.append(out[-1] + 1 if out else 0)
        if i + 1 < len(items) and twins(items[i], items[i + 1]):
            out.append(out[-1])
            i += 1
        i += 1
    return out


def winogrande_calibration(limit: int | None = DEFAULT_CALIBRATION_SIZE) -> CalibrationSet:
    _check_limit(limit)
    items = load_winogrande_items()
    items, clusters = items[:limit], winogrande_twins(items)[:limit]  # [:None]: all
    return CalibrationSet("winogrande-dev", tuple(map(winogrande_filled, items)), clusters=cluster_labels(clusters))


def texts_calibration(
    path: str | Path, limit: int | None = DEFAULT_CALIBRATION_SIZE, cluster_field: str | None = None
) -> CalibrationSet:
    """The first `limit` texts (default 128; all when None) of a UTF-8 file with one text per line (blank lines
    are ignored), or of a JSON Lines file whose objects hold `text` and, named by `cluster_field`, each text's
    cluster. Read lazily: the file is read up to the text after the limit (which sets `more`), and a line
    longer than MAX_TEXT_CHARS is cut to it without being held whole, so neither a file of a million lines nor
    a line of 100 MB costs memory (past MAX_LINE_CHARS, or holding NUL, it is refused); only a regular file."""
    _check_limit(limit)
    path = _texts_path(path)
    texts, keys, more, n_cut = _read_file(path, limit, cluster_field)
    return CalibrationSet(path.stem, tuple(texts), more, n_cut, _file_clusters(keys, cluster_field))


def file_calibration(
    path: str | Path,
    limit: int | None = DEFAULT_CALIBRATION_SIZE,
    part: int | None = None,
    sample: int | None = None,
    cluster_field: str | None = None,
) -> CalibrationSet:
    """A set of a user file: its first `limit` texts (`texts_calibration`); with `part` K and no `sample`, its
    K-th contiguous block of `limit` texts (a cut: named `<stem>-cutK`); with `sample` N, the K-th (default
    first) of disjoint sets of N texts drawn at random, cluster-whole (`<stem>-drawK-seed0`, `draw_indices`)."""
    _check_limit(limit)
    _check_limit(sample, "--sample")
    if part is None and sample is None:
        return texts_calibration(path, limit, cluster_field)
    path = _texts_path(path)
    k = part or 1
    if sample is None:
        n = limit if limit is not None else DEFAULT_CALIBRATION_SIZE
        texts, keys, more, n_cut = _read_file(path, k * n, cluster_field)
        if len(texts) < k * n:
            raise ConfigError(
                f"calibration set {path.name}:{k} asks for texts {(k - 1) * n + 1:,}-{k * n:,} (block {k} of "
                f"{n:,}); {path.name} holds {len(texts):,}: ask for a smaller K or fewer texts (--limit)"
            )
        block = slice((k - 1) * n, k * n)
        return CalibrationSet(
            f"{path.stem}-cut{k}", tuple(texts[block]), more, n_cut, _file_clusters(keys[block], cluster_field)
        )
    _, keys, _, _ = _read_file(path, None, cluster_field, keep=())  # the clusters first, then the drawn texts
    pick = draw_indices(keys, sample, k, f"{path.name}:{k}", path.name)
    chosen, _, _, n_cut = _read_file(path, None, cluster_field, keep=set(pick))
    text_at = dict(zip(sorted(pick), chosen))
    return CalibrationSet(
        f"{path.stem}-draw{k}-seed{DRAW_SEED}",
        tuple(text_at[i] for i in pick),
        n_cut=n_cut,
        clusters=cluster_labels([keys[i] for i in pick]),
    )


def _texts_path(path: str | Path) -> Path:
    """`path` when it is a regular file (through symlinks); ScoringError naming what it is otherwise: a folder, a
    missing file, a device (`/dev/zero` reads forever), a FIFO or `<(cmd)` (waits on its writer), a socket."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as e:  # missing, a symlink loop, a folder that cannot be searched
        why = "does not exist" if isinstance(e, FileNotFoundError) else f"cannot be read ({e.strerror or e})"
        raise ScoringError(f"texts file {str(path)!r} {why}; pass a UTF-8 file with one text per line") from None
    if stat.S_ISDIR(mode):
        raise ScoringError(f"texts file {str(path)!r} is a folder; pass a UTF-8 file with one text per line")
    if not stat.S_ISREG(mode):
        kinds = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a pipe (FIFO)"}
        what = kinds.get(stat.S_IFMT(mode), "a socket")
        raise ScoringError(
            f"texts file {str(path)!r} is {what}, not a regular file (its reads may never end); save the texts to a "
            "file, one per line, and pass that"
        )
    return path


def _file_clusters(keys: list, cluster_field: str | None) -> tuple[int, ...] | None:
    return cluster_labels(keys) if cluster_field is not None else None  # one line = one cluster


def _read_file(
    path: Path, limit: int | None, cluster_field: str | None, keep: Container[int] | None = None
) -> tuple[list[str], list[Hashable], bool, int]:
    """(texts, cluster keys, more, texts cut) of the first `limit` texts (all when None) of a texts file; with
    `keep`, only the texts at those positions are kept (and counted as cut), every key is: a draw from a file of
    millions of lines holds their keys, not their texts."""
    from dormant_tasks.progress import waiting

    texts: list[str] = []
    keys: list[Hashable] = []
    more, n_cut = False, 0
    try:
        with waiting(f"reading {path.name}"), open(path, encoding="utf-8") as f:
            items: Iterator[tuple[str, Hashable, bool]] = (
                _json_items(f, path, cluster_field)
                if cluster_field is not None
                else ((text, i, cut) for i, (text, cut) in enumerate(_lines(f, path)))  # one line, one cluster
            )
            for text, key, cut in items:
                if limit is not None and len(keys) == limit:
                    more = True
                    break
                if keep is None or len(keys) in keep:
                    texts.append(text)
                    n_cut += cut
                keys.append(key)
    except UnicodeDecodeError as e:
        raise ScoringError(f"texts file {str(path)!r} is not UTF-8 ({e.reason}); re-encode it as UTF-8") from None
    except OSError as e:
        raise ScoringError(
            f"texts file {str(path)!r} cannot be read ({e.strerror or e}); fix it or pass another"
        ) from None
    if not keys:
        raise ScoringError(f"texts file {str(path)!r} holds no text; put one text per line")
    return texts, keys, more, n_cut


def _json_items(f, path: Path, cluster_field: str) -> Iterator[tuple[str, Hashable, bool]]:
    """(text, cluster, cut) for each non-blank line of a JSON Lines file: an object with a string `text` (its
    whitespace collapsed; an empty one skipped) and a string or integer `cluster_field`."""
    for number, line in enumerate(f, start=1):
        _check_nul(line, path, number)
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"{path.name} line {number}: not JSON ({e.msg}); --cluster-field reads JSON Lines"
            ) from None
        text = obj.get("text") if isinstance(obj, dict) else None
        cluster = obj.get(cluster_field) if isinstance(obj, dict) else None
        if not isinstance(text, str) or isinstance(cluster, bool) or not isinstance(cluster, str | int):
            raise ConfigError(
                f'{path.name} line {number}: --cluster-field {cluster_field} reads objects with a string "text" '
                f"and a string or integer {cluster_field!r}"
            )
        text = one_line(text)
        if text:
            yield text[:MAX_TEXT_CHARS], cluster, len(text) > MAX_TEXT_CHARS


def _lines(f, path: Path) -> Iterator[tuple[str, bool]]:
    """(text, cut) for each non-blank line of a text file, as `str.splitlines` splits the whole text (its
    other line breaks too), each read at most MAX_TEXT_CHARS characters at a time; ScoringError for a line
    that holds NUL (a binary file) or runs past MAX_LINE_CHARS without a line break (not one text per line)."""
    number = 0
    while True:
        line = f.readline(MAX_TEXT_CHARS + 1)
        if not line:
            return
        number += 1
        _check_nul(line, path, number)
        cut = False
        if len(line) > MAX_TEXT_CHARS and not line.endswith("\n"):  # a longer line: its rest is skipped
            line, cut, read = line[:MAX_TEXT_CHARS], True, MAX_TEXT_CHARS
            while (rest := f.readline(MAX_TEXT_CHARS)) and not rest.endswith("\n"):
                read += len(rest)
                if read > MAX_LINE_CHARS:
                    raise ScoringError(
                        f"texts file {str(path)!r}: line {number:,} runs past {MAX_LINE_CHARS:,} characters without "
                        "a line break; pass a text file with one text per line"
                    )
        for text in line.splitlines():
            if text.strip():
                yield text, cut


def _check_nul(line: str, path: Path, number: int) -> None:
    if "\0" in line:
        raise ScoringError(
            f"texts file {str(path)!r}: line {number:,} holds NUL bytes (a binary file, not text); pass a UTF-8 "
            "text file with one text per line (tr -d '\\000' removes them)"
        )


def load_calibration(
    texts_file: str | Path | None = None,
    limit: int | None = None,
    sample: int | None = None,
    cluster_field: str | None = None,
) -> CalibrationSet:
    """The first `limit` (default 128) texts of `--texts FILE` when given (drawn with `sample`), else of the
    WinoGrande dev sentences."""
    limit = DEFAULT_CALIBRATION_SIZE if limit is None else limit
    if texts_file is not None:
        return file_calibration(texts_file, limit, None, sample, cluster_field)
    return winogrande_calibration(limit)


def cluster_labels(keys: Sequence[Hashable]) -> tuple[int, ...] | None:
    """Per text, its cluster numbered 0, 1, ... in order of first appearance; None when every text is its own."""
    number: dict[Hashable, int] = {}
    labels = tuple(number.setdefault(k, len(number)) for k in keys)
    return None if len(number) == len(labels) else labels


def draw_indices(keys: Sequence[Hashable], n: int, k: int, what: str, source: str, seed: int = DRAW_SEED) -> list[int]:
    """The indices (sorted) of the k-th (from 1) of disjoint sets of about n texts drawn cluster-whole at random.

    keys: per text, its cluster. The clusters are put in a random order (numpy PCG64, `seed`) and the sets are
    filled one after the other in that order: a cluster that would take a set past n waits for the next set, and
    the next one that fits goes in, until the set holds n texts or no waiting cluster fits. With clusters of a
    few texts only the last places of a set are so filled, so the draw stays close to a simple random sample of
    clusters; a set holds n texts, or fewer by less than the largest cluster when the clusters do not add up to
    n. Set k is the same whatever later sets are asked for. ConfigError in one line when the clusters run out
    before set k is full.
    """
    import numpy as np

    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    members = list(groups.values())
    largest = max(map(len, members))
    queue = deque(members[i] for i in np.random.default_rng(seed).permutation(len(members)))
    taken: list[list[int]] = []
    for j in range(1, k + 1):
        taken, size, waiting = [], 0, []
        while size < n and queue:
            group = queue.popleft()
            if size + len(group) <= n:
                taken.append(group)
                size += len(group)
            else:
                waiting.append(group)
        queue.extendleft(reversed(waiting))
        if size <= n - largest:  # short by a whole cluster or more: the clusters ran out
            enough = f"enough for {j - 1} such sets (K <= {j - 1})" if j > 1 else "not enough for one such set"
            raise ConfigError(
                f"calibration set {what} asks for the {_nth(k)} of disjoint sets of {n:,} texts drawn "
                f"cluster-whole; {source} holds {len(keys):,} texts in {len(groups):,} clusters, {enough}: ask "
                "for a smaller K or fewer texts (--limit, --sample)"
            )
    return sorted(i for group in taken for i in group)


def _nth(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


_DRAWN = re.compile(r"-(draw\d+-seed\d+|cut\d+)$")


def calibration_kind(calibration_id: str) -> str:
    """The text a set was taken from: its calibration_id without the texts' count and hash and without a draw's
    or cut's suffix (`winogrande-dev-draw2-seed0-128-<sha>` and `winogrande-dev-128-<sha>`: "winogrande-dev")."""
    name = re.sub(r"-\d+-[0-9a-f]{12}$", "", calibration_id)
    return _DRAWN.sub("", name)


def split_part(name: str) -> tuple[str, int | None]:
    """`NAME:K` as (NAME, K); a name without `:K`, or one that is an existing file, as (name, None)."""
    m = re.fullmatch(r"(.+):([0-9]+)", name)
    if m is None or name in BUNDLED_SETS or Path(name).exists():
        return name, None
    k = int(m.group(2))
    if k < 1:
        raise ConfigError(f"calibration set {name!r}: K counts the disjoint sets from 1 ({m.group(1)}:1, :2, ...)")
    return m.group(1), k


# (texts, per text its cluster (stored, the decision's unit), per text its draw unit (what `NAME:K` keeps whole:
# the cluster, or a question / a video where the cluster is too large to draw sets from; data/README.md))
Items = tuple[list[str], list[Hashable], list[Hashable]]


def one_line(text: str) -> str:
    """The text on one line: each run of whitespace (newlines included) written as one space, ends stripped."""
    return re.sub(r"\s+", " ", text).strip()


def _unique_lines(texts: Iterable[str], keys: Iterable[Hashable] = (), units: Iterable[Hashable] = ()) -> Items:
    """Each text on one line; empty and repeated ones dropped (the first kept, with its cluster key and draw unit;
    without keys every text its own cluster, without units its cluster its draw unit)."""
    first: dict[str, tuple[Hashable, Hashable]] = {}
    for i, (text, key, unit) in enumerate(zip_longest(texts, keys, units)):
        line = one_line(text)
        if line and line not in first:
            first[line] = (i if key is None else key, (i if key is None else key) if unit is None else unit)
    return list(first), [k for k, _ in first.values()], [u for _, u in first.values()]


def _parquet_column(path: Path, column: str) -> list:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[column]).column(column).to_pylist()


def _winogrande_texts() -> Items:
    # exactly the historical default (no whitespace rewriting), so the stored calibration_id does not move
    items = load_winogrande_items()
    twins: list[Hashable] = list(winogrande_twins(items))
    return [winogrande_filled(i) for i in items], twins, twins


def _wikipedia_texts() -> Items:
    # BoolQ keeps no article title, and neighbours are not of one article: one passage, one cluster
    return _unique_lines(DEMO_CORPUS.read_text(encoding="utf-8").splitlines())


def _mmlu_texts() -> Items:
    """The test questions, round-robin over the 57 sorted subjects (each in file order); a cluster is a subject,
    a draw keeps a question whole."""
    subjects = sorted(p for p in MMLU_DIR.iterdir() if (p / "test.parquet").is_file())
    columns = [_parquet_column(p / "test.parquet", "question") for p in subjects]
    rows = [(q, p.name) for row in zip_longest(*columns) for q, p in zip(row, subjects) if q is not None]
    return _unique_lines((q for q, _ in rows), [s for _, s in rows], range(len(rows)))


def _hellaswag_texts() -> Items:
    """The validation contexts in file order; a cluster is an activity (`activity_label`), a draw keeps the
    contexts of one video or article (`source_id`) whole."""
    return _unique_lines(*(_parquet_column(HELLASWAG_VALIDATION, c) for c in ("ctx", "activity_label", "source_id")))


def _gsm8k_texts() -> Items:
    return _unique_lines(_parquet_column(GSM8K_TEST, "question"))


def _code_texts() -> Items:  # 4 lines of each of 189 stdlib modules, one a package (data/derive_code_lines.py)
    modules = [line.split()[0] for line in CODE_SOURCES.read_text(encoding="utf-8").splitlines()]
    return _unique_lines(CODE_LINES.read_text(encoding="utf-8").splitlines(), modules)


# name -> (description, loader of every text of the set with its cluster key, in order); the CalibrationSet name
# is the key, except "winogrande", whose results have always been stored as "winogrande-dev"
BUNDLED_SETS: dict[str, tuple[str, Callable[[], Items]]] = {
    "winogrande": ("WinoGrande dev sentences, blank filled with the correct option (the default)", _winogrande_texts),
    "wikipedia": ("Wikipedia passages (BoolQ validation)", _wikipedia_texts),
    "mmlu": ("MMLU test questions, round-robin over the 57 subjects", _mmlu_texts),
    "hellaswag": ("HellaSwag validation contexts", _hellaswag_texts),
    "gsm8k": ("GSM8K test math word problems", _gsm8k_texts),
    "code": ("Python source lines from the CPython standard library", _code_texts),
}
DEFAULT_SET = "winogrande"
SET_NAMES = {"winogrande": "winogrande-dev"}  # CalibrationSet.name where it is not the bundled name
# texts each bundled set holds in all (tests/library/tracking/test_calibration_sets.py checks them against the loaders),
# so that the CLI's help can list them without reading the Parquet files
AVAILABLE_TEXTS = {
    "winogrande": 1267,
    "wikipedia": 2938,
    "mmlu": 13868,
    "hellaswag": 10018,
    "gsm8k": 1319,
    "code": 756,
}


def bundled_set_names() -> list[str]:
    """The bundled calibration sets' names, the default ("winogrande") first."""
    return list(BUNDLED_SETS)


def describe_bundled_sets() -> str:
    """One line per bundled set: name, description, texts available (for the CLI's help; reads no data)."""
    width = max(map(len, BUNDLED_SETS))
    return "\n".join(
        f"{name:<{width}}  {description} ({AVAILABLE_TEXTS[name]:,} texts)"
        for name, (description, _) in BUNDLED_SETS.items()
    )


def _check_limit(limit: int | None, option: str = "--limit") -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"{option} must be at least 1, got {limit!r}")


def bundled_calibration(
    name: str, limit: int | None = DEFAULT_CALIBRATION_SIZE, part: int | None = None
) -> CalibrationSet:
    """The first `limit` texts (all when None) of the bundled set `name` (a key of BUNDLED_SETS), or with `part`
    K the K-th of its disjoint sets of `limit` texts drawn cluster-whole (`draw_indices`), named
    `<name>-drawK-seed0`."""
    _check_limit(limit)
    if name not in BUNDLED_SETS:
        raise ConfigError(
            f"unknown bundled calibration set {name!r}{did_you_mean(name, BUNDLED_SETS)}; "
            f"choose one of {', '.join(BUNDLED_SETS)}"
        )
    texts, keys, units = BUNDLED_SETS[name][1]()
    base = SET_NAMES.get(name, name)
    if part is None:
        n = len(texts) if limit is None else limit
        return CalibrationSet(base, tuple(texts[:n]), clusters=cluster_labels(keys[:n]))
    pick = draw_indices(units, len(texts) if limit is None else limit, part, f"{name}:{part}", name)
    return CalibrationSet(
        f"{base}-draw{part}-seed{DRAW_SEED}",
        tuple(texts[i] for i in pick),
        clusters=cluster_labels([keys[i] for i in pick]),
    )


def load_calibration_set(
    name_or_path: str | Path,
    limit: int | None = DEFAULT_CALIBRATION_SIZE,
    sample: int | None = None,
    cluster_field: str | None = None,
) -> CalibrationSet:
    """A bundled set by name (see `bundled_set_names()`), else a UTF-8 file with one text per line; `NAME:K` or
    `FILE:K` for the K-th disjoint draw (a file's K-th cut without `sample`; `file_calibration`).

    A bundled name wins over a file of that name in the working directory (write `./mmlu` for the file). The first
    `limit` texts are kept (all when None); a file's set is named after its stem.
    """
    _check_limit(limit)
    key, part = split_part(name_or_path) if isinstance(name_or_path, str) else (str(name_or_path), None)
    if name_or_path == PROBE_SET:  # the induction probe's `limit or 2000` sequences (tracking/probe.py)
        return CalibrationSet(PROBE_SET, (), probe=ProbeSpec(PROBE_SIZE if limit is None else limit))
    if isinstance(name_or_path, str) and key in BUNDLED_SETS:
        return bundled_calibration(key, limit, part)
    path = Path(key)
    if not path.exists() and not path.is_symlink():  # a symlink loop: named by `_texts_path`
        hint = did_you_mean(key, BUNDLED_SETS) if isinstance(name_or_path, str) else ""
        raise ConfigError(
            f"calibration set {str(name_or_path)!r} is neither a bundled set{hint} nor an existing file; "
            f"choose one of {', '.join(BUNDLED_SETS)} (NAME:K for the K-th drawn set), or pass a UTF-8 file with "
            "one text per line"
        )
    return file_calibration(path, limit, part, sample, cluster_field)  # refuses a folder, an empty or non-UTF-8 file


def _sha(calibration: CalibrationSet) -> str:
    return calibration.calibration_id.rsplit("-", 1)[1]


def load_calibration_sets(
    names: Sequence[str | Path],
    limit: int | None = None,
    sample: int | None = None,
    cluster_field: str | None = None,
) -> tuple[CalibrationSet, ...]:
    """Several calibration sets, in the order given; refuses none, and two that hold the same texts. The first
    `limit` texts of each (None: 128, as `load_calibration` reads it); files drawn with `sample`."""
    if isinstance(names, str | Path):
        names = [names]
    if not names:
        raise ConfigError(
            f"no calibration set given; name at least one of {', '.join(BUNDLED_SETS)} or a UTF-8 texts file"
        )
    bundled = [isinstance(n, str) and split_part(n)[0] in BUNDLED_SETS for n in names]
    if sample is not None and all(bundled):
        raise ConfigError(
            f"--sample {sample} draws texts from a file, and every set here is bundled: draw a bundled set with "
            "NAME:K (K-th disjoint draw of --limit texts), or pass a file"
        )
    own = limit if limit is not None else DEFAULT_CALIBRATION_SIZE  # the probe keeps None: its own 2,000
    sets = tuple(load_calibration_set(n, limit if n == PROBE_SET else own, sample, cluster_field) for n in names)
    seen: dict[str, tuple[str | Path, CalibrationSet]] = {}
    for name, calibration in zip(names, sets):
        sha = _sha(calibration)
        if sha in seen:
            first_name, first = seen[sha]
            same = "is given twice" if first_name == name else f"holds the same texts as {str(first_name)!r}"
            raise ConfigError(
                f"calibration set {str(name)!r} {same} ({calibration.calibration_id}); "
                "drop one of them, or give sets with different texts"
            )
        seen[sha] = (name, calibration)
    return sets
