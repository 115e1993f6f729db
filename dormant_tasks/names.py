"""What the user's names name, resolved in one place (stdlib only, so the command line's cheap checks and the
library give the same answer before and after the heavy imports).

The vocabulary, through every layer:
- a **source** is what `--model` names: a Hub repo id (`org/name`), a local folder (one checkpoint, or a
  series' folder of checkpoint folders), or `scheme://...` of a registered source (`checkpoints.source_for`
  resolves it: a `CheckpointSource`);
- a **model_id** is a series' name in the store: its source's `name` (the Hub id, the folder's name;
  `--series-name` overrides it);
- a series' **slug** is its model_id as a folder name (`series_slug`: the store's partitions and the reports' folders);
- a series' **identity** is its source's `identity` (`hub:ORG/NAME`, or `local:` and the folder's resolved path),
  recorded in the store at its first write, so one name never stands for two series.

Which one `--model NAME` means, when a folder in the working directory and a stored series share the name:
- a command that reads the store (report, findings, compare, status) reads the stored series of that name
  (`names_stored_series`): a folder that happens to be in the working directory does not shadow it;
- `track` (and `score`, `evaluate`) reads the folder (`checkpoints.source_for`): it tracks what is on disk;
- `./NAME`, `../NAME`, `/abs/NAME`, `~/NAME` or `NAME/` is always the folder, for every command
  (`spelled_as_path`): the way to name a folder whose name is a stored series'.
A store path's checks are the store's to know (`store.check_store_path`, stdlib only as well): its marker and folders
are named in `store/` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from dormant_tasks.errors import StoreError


def spelled_as_path(source: str | Path) -> bool:
    """`./x`, `../x`, `/x`, `~/x` or `x/`: spelled as a path, so a folder whatever the store keeps."""
    s = str(source)
    return s in (".", "..") or s.startswith(("./", "../", "/", "~")) or s.endswith("/")


def names_stored_series(value: str, stored: Iterable[str]) -> bool:
    """For a command that reads the store: `value` is the stored series of that name, not a folder of that name
    in the working directory (see the module docstring), unless it is spelled as a path."""
    return not spelled_as_path(value) and value in set(stored)


def split_names(values: str | Iterable) -> tuple[str, ...]:
    """A list option's names: "a,b", ["a", "b"] and ["a,b", "a"] all give ("a", "b") (order kept, duplicates and
    blanks dropped; `()` when none: the caller says what was expected)."""
    items = [values] if isinstance(values, str) else list(values)
    return tuple(dict.fromkeys(p.strip() for item in items for p in str(item).split(",") if p.strip()))


_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # no leading "." or "-": hidden files, options
# names Windows reserves for devices, with or without an extension: a lock or folder named so cannot be created there
_RESERVED = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(\..*)?", re.IGNORECASE)


def series_slug(model_id: str) -> str:
    """model_id as a folder name: "allenai/OLMo-2-1124-7B" -> "allenai--OLMo-2-1124-7B".

    Allowed: letters, digits, ".", "_", "-" and "/" (which becomes "--"); a part starts with a letter, digit or
    "_" and is no device name Windows reserves (CON, NUL, COM1, ...). "--" and ".." are refused (as on the
    Hugging Face Hub), so the slug maps back to exactly one model_id (`model_id_of_slug`).
    """
    parts = model_id.split("/") if isinstance(model_id, str) else [""]
    if (
        not all(_SAFE.fullmatch(p) and not _RESERVED.fullmatch(p) for p in parts)
        or "--" in model_id
        or ".." in model_id
    ):
        raise StoreError(
            f"model id {model_id!r} cannot name a store series: use letters, digits, '.', '_', '-' and '/', each "
            "part starting with a letter, digit or '_' and no device name (CON, NUL, COM1, ...); no '--' or '..', "
            "e.g. 'allenai/OLMo-2-1124-7B' or 'tiny-olmo2'"
        )
    return "--".join(parts)


def model_id_of_slug(slug: str) -> str:
    return slug.replace("--", "/")
