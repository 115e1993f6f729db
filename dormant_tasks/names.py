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

from dormant_tasks.errors import ConfigError, StoreError


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
# A slug's longest file name is `series=<slug>.json` (`_sums`, `sources`): 12 bytes more, within the 255 of a name
MAX_SLUG_BYTES = 243
_RESERVED = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(\..*)?", re.IGNORECASE)


def series_slug(model_id: str) -> str:
    """model_id as a folder name: "allenai/OLMo-2-1124-7B" -> "allenai--OLMo-2-1124-7B".

    Allowed: letters, digits, ".", "_", "-" and "/" (which becomes "--"); a part starts with a letter, digit or
    "_" and is no device name Windows reserves (CON, NUL, COM1, ...). "--" and ".." are refused (as on the
    Hugging Face Hub), so the slug maps back to exactly one model_id (`model_id_of_slug`).
    """
    parts = model_id.split("/") if isinstance(model_id, str) else [""]
    slug = "--".join(parts)
    if len(slug.encode()) > MAX_SLUG_BYTES:
        raise StoreError(
            f"model id {model_id[:40]!r}... is {len(slug.encode())} bytes long as a folder name; a series' name is at "
            f"most {MAX_SLUG_BYTES} (the store names folders and files after it, and a file name holds 255): "
            "name the series shorter with --series-name"
        )
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
    return slug


def check_series_name(name) -> None:
    """A `--series-name` the store can name folders after (`series_slug`), else the ConfigError naming the option,
    at parse time as in the request: before anything is created."""
    try:
        series_slug(name if isinstance(name, str) else "")
    except StoreError as e:  # said as the option's
        too_long = "bytes long" in str(e)
        raise ConfigError(
            f"--series-name {name[:40]!r}...: {len(name.encode())} bytes, at most {MAX_SLUG_BYTES} (the store names "
            "folders and files after it, and a file name holds 255); choose a shorter name"
            if too_long
            else f"--series-name {name!r}: use letters, digits, '.', '_', '-', starting with a letter, digit or '_', "
            "no device name (CON, NUL, ...), no '--' or '..', e.g. tiny-olmo2-rerun"
        ) from None


def model_id_of_slug(slug: str) -> str:
    return slug.replace("--", "/")
