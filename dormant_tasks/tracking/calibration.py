"""Calibration sets: the bundled sets (WinoGrande, Wikipedia, MMLU, ...) and user text files, with a content hash.

The default calibration set is the first N WinoGrande dev sentences with the blank filled by the
correct option (docs/SCORES.md §3). `calibration_id` = name + short sha256 of the exact texts, stored with
every result so that results from different calibration sets are never compared.

Dormant heads depend on the input text, so a run may score several sets: `load_calibration_set(name_or_path)`
gives a bundled set by name (`BUNDLED_SETS`; data/README.md says where each comes from) or a UTF-8 file with one
text per line, and `load_calibration_sets(names)` several at once, refusing two with the same texts. Each bundled
text is one line (runs of whitespace collapsed to a space), non-empty, and unique (the first occurrence kept).
Stdlib only at import: pyarrow is imported by the loaders that read the bundled Parquet files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from dormant_tasks.errors import ConfigError, ScoringError, did_you_mean
from dormant_tasks.paths import bundled_file

WINOGRANDE_DEV = bundled_file("winogrande_dev.jsonl")
DEMO_CORPUS = bundled_file("demo_corpus.txt")
CODE_LINES = bundled_file("code_lines.txt")
TASKS = bundled_file("tasks")
MMLU_DIR = TASKS / "cais--mmlu"
HELLASWAG_VALIDATION = TASKS / "Rowan--hellaswag" / "validation.parquet"
GSM8K_TEST = TASKS / "openai--gsm8k" / "main" / "test.parquet"
DEFAULT_CALIBRATION_SIZE = 128


MAX_TEXT_CHARS = 1_000_000  # a longer line is cut to this (a model reads at most its context: ~30 chars a token)


@dataclass(frozen=True)
class CalibrationSet:
    name: str  # "winogrande-dev", another bundled set's name ("mmlu", ...) or the texts file's stem
    texts: tuple[str, ...]
    more: bool = field(default=False, compare=False)  # a file that holds texts past the limit (not read)
    n_cut: int = field(default=0, compare=False)  # texts of a file cut to MAX_TEXT_CHARS

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
        return f"{self.name}-{len(self.texts)}-{digest}"


def load_winogrande_items(path: Path = WINOGRANDE_DEV) -> list[dict]:
    """The bundled WinoGrande dev items: dicts with sentence, option1, option2, answer ('1'/'2')."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def winogrande_filled(item: dict) -> str:
    """The sentence with the blank "_" replaced by the correct option."""
    option = item["option1"] if item["answer"] == "1" else item["option2"]
    return item["sentence"].replace("_", option, 1)


def winogrande_calibration(limit: int | None = DEFAULT_CALIBRATION_SIZE) -> CalibrationSet:
    _check_limit(limit)
    items = load_winogrande_items()
    if limit is not None:
        items = items[:limit]
    return CalibrationSet("winogrande-dev", tuple(winogrande_filled(i) for i in items))


def texts_calibration(path: str | Path, limit: int | None = DEFAULT_CALIBRATION_SIZE) -> CalibrationSet:
    """The first `limit` texts (default 128; all when None) of a UTF-8 file with one text per line (blank lines
    are ignored). Read lazily: the file is read up to the text after the limit (which sets `more`), and a line
    longer than MAX_TEXT_CHARS is cut to it without being held whole, so neither a file of a million lines nor
    a line of 100 MB costs memory; on a pipe a slow read prints a progress line every 20 s."""
    from dormant_tasks.progress import waiting

    path = Path(path)
    if path.is_dir():
        raise ScoringError(f"texts file {str(path)!r} is a folder; pass a UTF-8 file with one text per line")
    if not path.exists():  # a device or a pipe (`--texts <(cmd)`) is read as a file
        raise ScoringError(f"texts file {str(path)!r} does not exist; pass a UTF-8 file with one text per line")
    _check_limit(limit)
    texts: list[str] = []
    more, n_cut = False, 0
    try:
        with waiting(f"reading {path.name}"), open(path, encoding="utf-8") as f:
            for text, cut in _lines(f):
                if limit is not None and len(texts) == limit:
                    more = True
                    break
                texts.append(text)
                n_cut += cut
    except UnicodeDecodeError as e:
        raise ScoringError(f"texts file {str(path)!r} is not UTF-8 ({e.reason}); re-encode it as UTF-8") from None
    except OSError as e:
        raise ScoringError(
            f"texts file {str(path)!r} cannot be read ({e.strerror or e}); fix it or pass another"
        ) from None
    if not texts:
        raise ScoringError(f"texts file {str(path)!r} holds no text; put one text per line")
    return CalibrationSet(path.stem, tuple(texts), more, n_cut)


def _lines(f) -> Iterator[tuple[str, bool]]:
    """(text, cut) for each non-blank line of a text file, as `str.splitlines` splits the whole text (its
    other line breaks too), each read at most MAX_TEXT_CHARS characters at a time."""
    while True:
        line = f.readline(MAX_TEXT_CHARS + 1)
        if not line:
            return
        cut = False
        if len(line) > MAX_TEXT_CHARS and not line.endswith("\n"):  # a longer line: its rest is skipped
            line, cut = line[:MAX_TEXT_CHARS], True
            while (rest := f.readline(MAX_TEXT_CHARS)) and not rest.endswith("\n"):
                pass
        for text in line.splitlines():
            if text.strip():
                yield text, cut


def load_calibration(texts_file: str | Path | None = None, limit: int | None = None) -> CalibrationSet:
    """The first `limit` (default 128) texts of `--texts FILE` when given, else of the WinoGrande dev sentences."""
    limit = DEFAULT_CALIBRATION_SIZE if limit is None else limit
    if texts_file is not None:
        return texts_calibration(texts_file, limit)
    return winogrande_calibration(limit)


# ---- the bundled sets ---------------------------------------------------------------------------------------


def one_line(text: str) -> str:
    """The text on one line: each run of whitespace (newlines included) written as one space, ends stripped."""
    return re.sub(r"\s+", " ", text).strip()


def _unique_lines(texts: Iterable[str]) -> list[str]:
    """Each text on one line; empty ones dropped, exact duplicates dropped (the first occurrence kept)."""
    return list(dict.fromkeys(t for t in map(one_line, texts) if t))


def _parquet_column(path: Path, column: str) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[column]).column(column).to_pylist()


def _winogrande_texts() -> list[str]:
    # exactly the historical default (no whitespace rewriting), so the stored calibration_id does not move
    return list(winogrande_calibration(None).texts)


def _wikipedia_texts() -> list[str]:
    return _unique_lines(DEMO_CORPUS.read_text(encoding="utf-8").splitlines())


def _mmlu_texts() -> list[str]:
    """The test questions of the 57 subjects, round-robin over the sorted subjects (each in file order)."""
    subjects = sorted(p for p in MMLU_DIR.iterdir() if (p / "test.parquet").is_file())
    columns = [_parquet_column(p / "test.parquet", "question") for p in subjects]
    return _unique_lines(q for row in zip_longest(*columns) for q in row if q is not None)


def _hellaswag_texts() -> list[str]:
    return _unique_lines(_parquet_column(HELLASWAG_VALIDATION, "ctx"))


def _gsm8k_texts() -> list[str]:
    return _unique_lines(_parquet_column(GSM8K_TEST, "question"))


def _code_texts() -> list[str]:
    return _unique_lines(CODE_LINES.read_text(encoding="utf-8").splitlines())


# name -> (description, loader of every text of the set, in order); the CalibrationSet name is the key, except
# "winogrande", whose results have always been stored as "winogrande-dev"
BUNDLED_SETS: dict[str, tuple[str, Callable[[], list[str]]]] = {
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
    "code": 1022,
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


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"--limit must be at least 1, got {limit!r}")


def bundled_calibration(name: str, limit: int | None = DEFAULT_CALIBRATION_SIZE) -> CalibrationSet:
    """The first `limit` texts (all when None) of the bundled set `name` (a key of BUNDLED_SETS)."""
    _check_limit(limit)
    if name not in BUNDLED_SETS:
        raise ConfigError(
            f"unknown bundled calibration set {name!r}{did_you_mean(name, BUNDLED_SETS)}; "
            f"choose one of {', '.join(BUNDLED_SETS)}"
        )
    texts = BUNDLED_SETS[name][1]()
    if limit is not None:
        texts = texts[:limit]
    return CalibrationSet(SET_NAMES.get(name, name), tuple(texts))


def load_calibration_set(name_or_path: str | Path, limit: int | None = DEFAULT_CALIBRATION_SIZE) -> CalibrationSet:
    """A bundled set by name (see `bundled_set_names()`), else a UTF-8 file with one text per line.

    A bundled name wins over a file of that name in the working directory (write `./mmlu` for the file). The first
    `limit` texts are kept (all when None); a file's set is named after its stem.
    """
    _check_limit(limit)
    key = str(name_or_path)
    if isinstance(name_or_path, str) and key in BUNDLED_SETS:
        return bundled_calibration(key, limit)
    path = Path(name_or_path)
    if not path.exists():
        hint = did_you_mean(key, BUNDLED_SETS) if isinstance(name_or_path, str) else ""
        raise ConfigError(
            f"calibration set {key!r} is neither a bundled set{hint} nor an existing file; "
            f"choose one of {', '.join(BUNDLED_SETS)}, or pass a UTF-8 file with one text per line"
        )
    return texts_calibration(path, limit)  # refuses a folder, an empty file and one that is not UTF-8


def _sha(calibration: CalibrationSet) -> str:
    return calibration.calibration_id.rsplit("-", 1)[1]


def load_calibration_sets(names: Sequence[str | Path], limit: int | None = None) -> tuple[CalibrationSet, ...]:
    """Several calibration sets, in the order given; refuses none, and two that hold the same texts. The first
    `limit` texts of each (None: 128, as `load_calibration` reads it)."""
    if isinstance(names, str | Path):
        names = [names]
    if not names:
        raise ConfigError(
            f"no calibration set given; name at least one of {', '.join(BUNDLED_SETS)} or a UTF-8 texts file"
        )
    limit = DEFAULT_CALIBRATION_SIZE if limit is None else limit
    sets = tuple(load_calibration_set(name, limit) for name in names)
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
