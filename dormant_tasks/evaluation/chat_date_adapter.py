"""The day a chat template sees (`--chat-date`; docs/DEVELOPING.md, the adapters' table).

A template that reads `date_string` (Llama-3.x) gets it as a variable, formatted as its own line would: no
internal touched. A template that calls `strftime_now` any other way reads transformers' clock,
`chat_template_utils.datetime.now()` (its sandbox turns a passed callable into a placeholder); for those alone
`chat_day` swaps that clock for one that answers the current context's day (a `ContextVar`), so a thread rendering
at the same time sees its own. `tests/library/test_adapters.py` checks both against the installed transformers.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import date, datetime

from dormant_tasks.errors import EvaluationError

_ADAPTER = "dormant_tasks/evaluation/chat_date_adapter.py"

# `{%- if not date_string is defined %} ... {%- set date_string = strftime_now("%d %b %Y") %}` (Llama-3.2 and on)
_DATE_STRING = re.compile(
    r"if\s+not\s+date_string\s+is\s+defined\s*-?%\}(?:(?!endif).)*?"
    r"(set\s+date_string\s*=\s*strftime_now\(\s*(['\"])(?P<fmt>[^'\"]*)\2\s*\))",
    re.DOTALL,
)

_DAY: ContextVar[date | None] = ContextVar("chat_day", default=None)
_LOCK = threading.Lock()
_users = 0  # renders that need the clock now; it is transformers' own while none does


class _ContextClock(datetime):
    """datetime whose now() is the current context's chat day at 00:00, the real time where none is set."""

    @classmethod
    def now(cls, tz=None):
        day = _DAY.get()
        if day is None:
            return datetime.now(tz)
        return cls(day.year, day.month, day.day, tzinfo=tz)


def template_text(template) -> str:
    """A tokenizer's `chat_template`: one string, or a dict of named ones (all of them read)."""
    if isinstance(template, dict):
        return "\n".join(str(t) for t in template.values())
    return str(template or "")


def date_variables(template: str, day: date) -> dict[str, str]:
    """The template variables that give `template` the day `day`: `date_string` in the template's own format
    where it defines it from `strftime_now` unless given one (the Llama-3.x pattern); else none."""
    match = _DATE_STRING.search(template)
    return {"date_string": day.strftime(match.group("fmt"))} if match else {}


def needs_clock(template: str) -> bool:
    """Whether `template` calls `strftime_now` other than to define `date_string` (`date_variables` covers that)."""
    return "strftime_now(" in _DATE_STRING.sub("", template)


@contextlib.contextmanager
def chat_day(template, day: date) -> Iterator[dict[str, str]]:
    """While inside, `template` (a tokenizer's `chat_template`) sees `day` as today when rendered with the
    variables yielded: `tokenizer.apply_chat_template(..., **variables)`."""
    text = template_text(template)
    variables = date_variables(text, day)
    if not needs_clock(text):
        yield variables
        return
    token = _DAY.set(day)
    _take_clock()
    try:
        yield variables
    finally:
        _give_clock()
        _DAY.reset(token)


def _chat_template_module():
    import transformers
    from transformers.utils import chat_template_utils

    if getattr(chat_template_utils, "datetime", None) not in (datetime, _ContextClock):
        raise EvaluationError(
            f"transformers {transformers.__version__} gives chat templates the date another way, so the chat date "
            f"cannot be fixed for a template that calls strftime_now; fix {_ADAPTER} for this version, or install a "
            "transformers version that pyproject.toml allows"
        )
    return chat_template_utils


def _take_clock() -> None:
    global _users
    module = _chat_template_module()
    with _LOCK:
        if _users == 0:
            module.datetime = _ContextClock  # type: ignore[misc]
        _users += 1


def _give_clock() -> None:
    global _users
    from transformers.utils import chat_template_utils

    with _LOCK:
        _users -= 1
        if _users == 0:
            chat_template_utils.datetime = datetime  # type: ignore[misc]
