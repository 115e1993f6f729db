"""Regenerate `dormant_tasks/data/code_lines.txt` (the `code` calibration set) from this Python's standard library.

    .venv/bin/python data/derive_code_lines.py

Takes the source lines of a few pure-Python stdlib modules that are code: not blank, not a comment only, not
inside a string literal that fills the whole line (docstrings), 20-200 characters once stripped and with runs of
whitespace collapsed to one space. Each module contributes its first `PER_MODULE` such lines (exact duplicates
dropped, first occurrence kept), and the modules are interleaved line by line in the order of `MODULES`, so any
prefix of the file (the first 128 lines, say) mixes all of them. `code_lines_files.txt` says where each line comes
from (`<module> <index among the module's lines>`, line by line): the `code` set's clusters are read from it. The file is committed: the set does not change
with the Python version; this script prints the version it read. The source is the PSF License Version 2.
"""

from __future__ import annotations

import io
import platform
import re
import sysconfig
import tokenize
from itertools import zip_longest
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "dormant_tasks" / "data" / "code_lines.txt"
SOURCES = OUT.with_name("code_lines_files.txt")
MODULES = ("json/decoder.py", "textwrap.py", "argparse.py", "heapq.py", "fractions.py", "json/encoder.py", "shlex.py")
PER_MODULE = 250  # at most; json/decoder.py and heapq.py have fewer: about 1,000 in all
MIN_CHARS, MAX_CHARS = 20, 200
SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}


def code_line_numbers(source: str) -> set[int]:
    """The (1-based) lines on which a token other than a comment or a string literal starts or ends."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in SKIP or tok.type == tokenize.STRING:
            continue
        lines.update((tok.start[0], tok.end[0]))
    # a line holding a string token next to code (x = "..."): the code token above already counts it
    return lines


def module_lines(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    keep = code_line_numbers(source)
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        text = re.sub(r"\s+", " ", line).strip()
        if number in keep and not text.startswith("#") and MIN_CHARS <= len(text) <= MAX_CHARS:
            out.append(text)
    return out


def main() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    print(f"reading the standard library of Python {platform.python_version()} at {stdlib}")
    per_module = []
    for name in MODULES:
        lines = list(dict.fromkeys(module_lines(stdlib / name)))[:PER_MODULE]
        print(f"  {name}: {len(lines)} lines")
        per_module.append(lines)
    numbered = [[(line, f"{name} {i}") for i, line in enumerate(lines)] for name, lines in zip(MODULES, per_module)]
    mixed = [one for group in zip_longest(*numbered) for one in group if one is not None]
    sources: dict[str, str] = {}
    for line, source in mixed:
        sources.setdefault(line, source)  # a line in two modules: the first occurrence kept, with its source
    texts = list(sources)
    OUT.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    SOURCES.write_text("".join(sources[t] + "\n" for t in texts), encoding="utf-8")
    print(f"wrote {len(texts)} lines ({OUT.stat().st_size:,} bytes) to {OUT}")


if __name__ == "__main__":
    main()
