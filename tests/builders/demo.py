"""The demo that `make demo` runs (`dormant demo` with its defaults), run once per pytest run: the docs quote its
numbers (benchmarks/demo_numbers.py writes them), and the demo's, the first line's and the suggested commands'
tests read it. It is the run's longest build (about 5 minutes on 2 lightly loaded cores, 23 on busy ones), so a
run whose tests need it starts it as soon as they are collected (`start_in_background`), beside the tests that do
not."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from tests.builders.shared import built_once, shared_folder

REPO = Path(__file__).resolve().parents[2]
# A folder to keep the demo in across pytest runs (made there when empty, read when it holds a finished run), as
# `benchmarks/demo_numbers.py --demo DIR` does: while working on the tests that read it. Unset: one per run.
SAVED = "DORMANT_TEST_DEMO"


def demo_numbers() -> ModuleType:
    """benchmarks/demo_numbers.py (a script, not a package module), imported from its file once per process."""
    if "demo_numbers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("demo_numbers", REPO / "benchmarks" / "demo_numbers.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclass looks its module up there
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["demo_numbers"]


def built_demo(tmp_path_factory, prefect_api_url: str, environ: dict[str, str] | None = None):
    """`demo_numbers.run_demo`'s run (a `dormant demo` process with make demo's defaults, its flows on the run's
    Prefect test server), made by the first process of the pytest run that asks and read by the others: a
    `demo_numbers.DemoRun`. `environ`: the environment its process starts from (default this process's)."""
    numbers = demo_numbers()
    environ = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in environ.items() if k not in ("DORMANT_STORE", "DORMANT_REPORTS", SAVED)}
    env |= {"PREFECT_API_URL": prefect_api_url, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    folder = Path(environ[SAVED]) if environ.get(SAVED) else shared_folder(tmp_path_factory) / "demo"
    built_once(tmp_path_factory, "demo", lambda built: numbers.run_demo(folder, env).folder)
    return numbers.run_demo(folder)


_started: list[threading.Thread] = []


def start_in_background(tmp_path_factory) -> None:
    """Start `built_demo` in a thread of this process (it waits on its `dormant demo` process, holding the build's
    lock, while this process runs other tests); `wait_for_background` joins it. A build that fails here is left
    to the test that needs the demo: it builds again, and fails there with the reason."""
    from tests.builders.prefect_server import session_server

    environ = dict(os.environ)  # now: the tests' in-process runs change os.environ while the thread runs
    tmp_path_factory.getbasetemp()
    demo_numbers()

    def build() -> None:
        try:
            built_demo(tmp_path_factory, session_server(tmp_path_factory, environ), environ)
        except BaseException:  # noqa: BLE001 - reported by the test that needs the demo (module docstring)
            pass

    if not _started:
        _started.append(threading.Thread(target=build, name="demo-build", daemon=True))
        _started[0].start()


def wait_for_background() -> None:
    for thread in _started:
        thread.join()
