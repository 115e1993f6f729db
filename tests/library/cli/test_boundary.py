"""The CLI's error boundary (`flows/cli/boundary.py`): an interrupt is exit 130 and one line, also when a library
turns the KeyboardInterrupt into another error while handling it (seen: Prefect's "Task run is not set" when
Ctrl-C lands while a task run is being created)."""

from __future__ import annotations

import argparse

import pytest

from flows.cli.boundary import run_command


def _interrupted_while_handling(args):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise ValueError("Task run is not set")  # noqa: B904 - as the library does: the interrupt is its context


def _plain_bug(args):
    raise ValueError("a bug, not an interrupt")


def _args(func) -> argparse.Namespace:
    return argparse.Namespace(command="status", func=func, debug=False)


def test_an_error_raised_while_handling_ctrl_c_is_the_interrupt(capsys):
    assert run_command(_args(_interrupted_while_handling)) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dormant status: interrupted"), err


def test_an_error_without_an_interrupt_behind_it_still_raises():
    with pytest.raises(ValueError, match="a bug"):
        run_command(_args(_plain_bug))


def test_the_console_drops_a_library_record_of_an_error_raised_while_handling_ctrl_c():
    """Prefect logs that error at ERROR with its traceback before the boundary sees it: the console drops it too."""
    import logging
    import sys

    from flows.session import _ExpectedFailureFilter

    def record_of(func) -> logging.LogRecord:
        try:
            func(None)
        except ValueError:
            exc_info = sys.exc_info()
        return logging.LogRecord(
            "prefect.flow_runs", logging.ERROR, __file__, 1, "Encountered exception", None, exc_info
        )

    keep = _ExpectedFailureFilter().filter
    assert not keep(record_of(_interrupted_while_handling))
    assert keep(record_of(_plain_bug))
