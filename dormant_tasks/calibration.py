"""Calibration sets: the bundled WinoGrande dev set and user text files, with a content hash.

The default calibration set is the first N WinoGrande dev sentences with the blank filled by the
correct option (docs/SCORES.md §3). `calibration_id` = name + short sha256 of the exact texts, stored with
every result so that results from different calibration sets are never compared.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, ScoringError
from .paths import bundled_file

WINOGRANDE_DEV = bundled_file("winogrande_dev.jsonl")
DEMO_CORPUS = bundled_file("demo_corpus.txt")
DEFAULT_CALIBRATION_SIZE = 128


@dataclass(frozen=True)
class CalibrationSet:
    name: str  # "winogrande-dev" or the texts file's name
    texts: tuple[str, ...]

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
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    items = load_winogrande_items()
    if limit is not None:
        items = items[:limit]
    return CalibrationSet("winogrande-dev", tuple(winogrande_filled(i) for i in items))


def texts_calibration(path: str | Path, limit: int | None = None) -> CalibrationSet:
    """A UTF-8 file with one text per line (blank lines are ignored)."""
    path = Path(path)
    if not path.is_file():
        raise ScoringError(f"texts file {str(path)!r} does not exist; pass a UTF-8 file with one text per line")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ScoringError(f"texts file {str(path)!r} is not UTF-8 ({e.reason}); re-encode it as UTF-8") from None
    texts = [line for line in lines if line.strip()]
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {limit}")
        texts = texts[:limit]
    if not texts:
        raise ScoringError(f"texts file {str(path)!r} holds no text; put one text per line")
    return CalibrationSet(path.stem, tuple(texts))


def load_calibration(texts_file: str | Path | None = None, limit: int | None = None) -> CalibrationSet:
    """`--texts FILE` when given, else the first `limit` (default 128) WinoGrande dev sentences."""
    if texts_file is not None:
        return texts_calibration(texts_file, limit)
    return winogrande_calibration(DEFAULT_CALIBRATION_SIZE if limit is None else limit)
