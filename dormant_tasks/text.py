"""Words for counts in the lines users read, and a user's string as Markdown shows it literally (stdlib only)."""

from __future__ import annotations


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 model", "2 models", "1,267 texts": the count (with thousands separators) and the noun in its number.
    `nouns`: an irregular plural ("1 calibration input" needs none; "1 child" would)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|"} | {"\n": " ", "\r": " "})


def md(text) -> str:
    """A user's string (a file, series, revision, calibration set or task name, a note) as Markdown shows it
    literally, in running text or a table cell: `<`, `>` and `&` as HTML entities (a Markdown viewer renders raw
    HTML), Markdown's specials (backslash, backtick, `*`, `_`, `[`, `]`, `|`) escaped with a backslash, a line
    break as a space. The one escape of every Markdown file the tool writes."""
    import html

    return html.escape(str(text), quote=False).translate(_MD_SPECIAL)
