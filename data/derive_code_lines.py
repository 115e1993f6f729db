"""Regenerate `dormant_tasks/data/code_lines.txt` (the `code` calibration set) from a CPython standard library.

    .venv/bin/python data/derive_code_lines.py [STDLIB]   # default: this Python's (sysconfig's "stdlib")

The set is clustered by file (a file is the unit of dependence: its lines share names, style and topic), so it is
built from many files with a few lines each: one module of each top-level package of the standard library (a
top-level module is its own package), so that no two files share a package either (the modules of one package, the
`encodings` codecs or `asyncio`'s files, are alike too, and a cluster per file would miss that). The candidates are
the `.py` files under the stdlib folder, tests, IDLE, lib2to3, the turtle demos and installed packages left out;
of each package the module with the most code lines, if it has at least `PER_FILE`. A code line is not blank, not
a comment only, not inside a string literal that fills the whole line (docstrings), 20-200 characters once stripped
and with runs of whitespace collapsed to one space, and found in no other module (so no text is shared by two
clusters: `if __name__ == "__main__":`, `from __future__ import annotations`); a module's `PER_FILE` lines are taken
evenly spaced over its code lines (not its first lines: they are mostly imports). The modules are put in a seeded
random order (`SEED`; the sorted order would put related ones side by side) and interleaved line by line in it, so
any prefix of up to one text per module (the first 128, say) holds one line of each of as many unrelated files.
`code_lines_files.txt` says where each line comes from (`<module> <index among the module's code lines>`, line by
line): the set's clusters (the module) are read from it. The files are committed: the set does not change with the
Python version; this script prints the version it ran under. The source is under the PSF License Version 2.
"""

from __future__ import annotations

import io
import platform
import random
import re
import sys
import sysconfig
import tokenize
from collections import Counter
from itertools import zip_longest
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "dormant_tasks" / "data" / "code_lines.txt"
SOURCES = OUT.with_name("code_lines_files.txt")
PER_FILE = 4  # lines of each module: a drawn set of 128 texts holds 32 whole files
SEED = 0  # of the modules' order
MIN_CHARS, MAX_CHARS = 20, 200
SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}
LEFT_OUT = ("test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "dist-packages", "__pycache__")


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
    """The module's code lines (above), duplicates dropped; none when it does not tokenize."""
    try:
        source = path.read_text(encoding="utf-8")
        keep = code_line_numbers(source)
    except (UnicodeDecodeError, SyntaxError, tokenize.TokenError):
        return []
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        text = re.sub(r"\s+", " ", line).strip()
        if number in keep and not text.startswith("#") and MIN_CHARS <= len(text) <= MAX_CHARS:
            out.append(text)
    return list(dict.fromkeys(out))


def spread(items: list, k: int) -> list:
    """k items of `items` evenly spaced, at the middles of k equal parts (all of them when there are k or fewer)."""
    if len(items) <= k:
        return list(items)
    return [items[int((i + 0.5) * len(items) / k)] for i in range(k)]


def main() -> None:
    stdlib = Path(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()["stdlib"])
    print(f"reading the standard library at {stdlib} (this is Python {platform.python_version()})")
    candidates = sorted(
        p.relative_to(stdlib).as_posix()
        for p in stdlib.rglob("*.py")
        if not set(p.relative_to(stdlib).parts[:-1]) & set(LEFT_OUT) and not p.name.startswith("test_")
    )
    lines_of = {name: module_lines(stdlib / name) for name in candidates}
    seen = Counter(line for lines in lines_of.values() for line in lines)
    lines_of = {name: [line for line in lines if seen[line] == 1] for name, lines in lines_of.items()}
    best: dict[str, str] = {}  # top-level package -> its module with the most code lines
    for name in candidates:
        package = name.split("/")[0]
        if len(lines_of[name]) > len(lines_of.get(best.get(package, ""), [])):
            best[package] = name
    modules = sorted(name for name in best.values() if len(lines_of[name]) >= PER_FILE)
    random.Random(SEED).shuffle(modules)
    print(f"  {len(candidates)} modules in {len(best)} packages; {len(modules)} taken (one a package)")
    numbered = [
        [(line, f"{name} {lines_of[name].index(line)}") for line in spread(lines_of[name], PER_FILE)]
        for name in modules
    ]
    mixed = [one for group in zip_longest(*numbered) for one in group if one is not None]
    sources: dict[str, str] = {}
    for line, source in mixed:
        sources.setdefault(line, source)  # a line in two modules: the first occurrence kept, with its source
    texts = list(sources)
    OUT.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    SOURCES.write_text("".join(sources[t] + "\n" for t in texts), encoding="utf-8")
    n_modules = len({s.split()[0] for s in sources.values()})
    print(f"wrote {len(texts)} lines of {n_modules} modules ({OUT.stat().st_size:,} bytes) to {OUT}")


if __name__ == "__main__":
    main()
