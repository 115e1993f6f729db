"""Words for counts in the lines users read (stdlib only)."""

from __future__ import annotations


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 model", "2 models", "1,267 texts": the count (with thousands separators) and the noun in its number.
    `nouns`: an irregular plural ("1 calibration input" needs none; "1 child" would)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"
