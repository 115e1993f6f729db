"""Shared fixtures. One Prefect test server per pytest run (shared by the xdist workers), started only when a test
asks for it; what is costly and read-only (the demo) is built once per run too (`tests/builders/shared.py`)."""

from __future__ import annotations

import os
import tempfile

# Before prefect is imported anywhere: a private PREFECT_HOME and no telemetry (there is no network here). One per
# process, not inherited: each pytest-xdist worker keeps its own files (the run's one test server has its own home).
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="dormant-prefect-home-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# A `dormant` subprocess prints "dormant CMD: starting ...: 1s elapsed" when it has printed nothing for a second
# (dormant_tasks/progress.py, FirstLine): on a loaded machine, before a one-line refusal too. The tests that compare
# a command's whole stderr would count it; the line's own tests (tests/flows/test_first_line.py) unset this.
os.environ["DORMANT_TEST_FIRST_LINE_S"] = "3600"
# Never the user's real ~/.cache/dormant-heads: a private file hash cache (dormant_tasks/checkpoints/hash_cache.py) per session.
os.environ["DORMANT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dormant-cache-")
# Before dask is imported: a Dask scratch folder per process (`cli_env` gives each `dormant` process one too), never
# the shared /tmp/dask-scratch-space, where one run's clean-up of another's files printed a second stderr line.
os.environ["DASK_TEMPORARY_DIRECTORY"] = tempfile.mkdtemp(prefix="dormant-dask-scratch-")
# No Hub here: lm-eval tasks read the bundled datasets (huggingface_hub itself stays online for the loopback tests).
os.environ["HF_DATASETS_OFFLINE"] = "1"
# Before triton is imported anywhere: the Triton score kernel runs on CPU tensors only in Triton's interpreter
# (tests/library/engine/test_triton_attention.py); on a CUDA test device it is compiled.
if not os.environ.get("DORMANT_TEST_DEVICE", "cpu").strip().startswith("cuda"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from dormant_tasks.tiny import tiny_config, train_tokenizer  # noqa: E402
from dormant_tasks.tracking.calibration import DEMO_CORPUS  # noqa: E402
from tests.builders.series import save_random_series  # noqa: E402


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A real byte-level BPE tokenizer trained on the first 400 lines of the bundled demo corpus."""
    texts = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400]
    return train_tokenizer(texts, vocab_size=512)


@pytest.fixture(scope="session")
def torch_device():
    """The torch device of the tests that take this fixture: $DORMANT_TEST_DEVICE (cpu, cuda or cuda:N; default
    cpu). A CUDA device asked for where torch sees none skips those tests with the reason; benchmarks/gpu_check.sh
    sets it to run the engine-vs-oracle tests on the GPU path."""
    import torch

    name = os.environ.get("DORMANT_TEST_DEVICE", "").strip() or "cpu"
    if name != "cpu" and not name.startswith("cuda"):
        raise pytest.UsageError(f"DORMANT_TEST_DEVICE={name!r} is not a device the tests know; use cpu, cuda or cuda:N")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            pytest.skip(
                f"DORMANT_TEST_DEVICE={name} asks for CUDA, but torch {torch.__version__} sees no CUDA GPU "
                f"(built for CUDA: {torch.version.cuda or 'no'}); unset DORMANT_TEST_DEVICE to run these tests on CPU"
            )
        index = torch.device(name).index or 0
        if index >= torch.cuda.device_count():
            pytest.skip(f"DORMANT_TEST_DEVICE={name}, but only {torch.cuda.device_count()} CUDA device(s) are visible")
    return torch.device(name)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    """A randomly initialised tiny OLMo-2 (2 layers x 4 heads, width 64) saved with its tokenizer."""
    import torch
    from transformers import Olmo2ForCausalLM

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-olmo2-random")
    model = Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=2, n_heads=4, hidden_size=64))
    model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def _prefect_server(tmp_path_factory) -> str:
    """The PREFECT_API_URL of the one Prefect test server of this pytest run: started by the first test process that
    asks (`built_once`; under `make test` the xdist workers share it; its first start can take a minute), stopped
    when the run ends (`pytest_unconfigure`)."""
    from tests.builders.prefect_server import session_server

    return session_server(tmp_path_factory)


@pytest.fixture(scope="session")
def prefect_harness(_prefect_server):
    """This process's Prefect client on the run's test server, for the whole session (what `prefect_test_harness`
    does, with one server for every worker instead of one each)."""
    import prefect.context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.prefect_adapter import drain_workers

    with temporary_settings({PREFECT_API_URL: _prefect_server}):
        # also for code whose context was copied before this one started (as the harness does)
        with prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
            yield
            drain_workers(timeout_s=10)  # this process's queued logs and events, while the server still answers


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness, _prefect_server) -> str:
    """The run's Prefect test server as a PREFECT_API_URL (this process's client on it too), for `dormant` runs
    in-process (tests/builders/cli.py) and for subprocesses that should run their flows on it instead of starting
    a temporary server of their own."""
    return _prefect_server


def pytest_unconfigure(config):
    """The run's Prefect test server stops with the run (in the process that ran the session: the controller
    under xdist, whose workers have all finished)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    factory = getattr(config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)
    if base is not None:
        from tests.builders.prefect_server import stop_test_server

        stop_test_server(base / "prefect-server")


DEMO_TIMEOUT_S = 2400  # a test that reads the demo (pytest-timeout's limit, pyproject.toml: 900 s for the others)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, request):
    """`make demo` (`dormant demo` with its defaults, one thread: 600 steps, 8 checkpoints, the three calibration
    sets of 128 texts) run once per pytest run, in a `dormant` process whose flows run on the run's Prefect test
    server, by the first test process that asks; the other xdist workers wait for it and read it (`built_once`).
    A `demo_numbers.DemoRun` (benchmarks/demo_numbers.py): its folder laid out as make demo's (data/series,
    data/store, reports), its stdout and stderr. Its users (tests/flows/test_demo_flow.py, the docs' numbers among
    them; tests/flows/test_first_line.py; tests/library/test_suggested_commands.py) read it, or run their commands
    on a copy of its store (`tests.builders.shared.linked_copy`). `DORMANT_TEST_DEMO=DIR` keeps it in DIR across
    pytest runs (run there when DIR is empty), while working on those tests."""
    from tests.builders.demo import built_demo, wait_for_background

    wait_for_background()  # the build that collection started (`pytest_collection_modifyitems`)
    return built_demo(tmp_path_factory, request.getfixturevalue("prefect_api_url"))


@pytest.fixture(scope="session")
def random_series(tmp_path_factory, tiny_tokenizer):
    """A local series of three random tiny OLMo-2 checkpoints (not trained: real files, arbitrary weights)."""
    folder = tmp_path_factory.mktemp("series") / "random-olmo2"
    return save_random_series(
        folder, tiny_tokenizer, ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K"]
    )


@pytest.fixture(autouse=True)
def _hub_offline_switch_undone(monkeypatch):
    """A CLI run in-process whose Hub probe finds no Hub switches the process offline (`checkpoints.go_offline`:
    the environment and, once imported, huggingface_hub's constant): undone after each test."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # recorded, so restored (or removed) afterwards
        if not os.environ[name]:
            monkeypatch.delenv(name)
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)


@pytest.hookimpl(trylast=True)  # after `-m` deselected: `make test-fast` (no slow test left) keeps the files' order
def pytest_collection_modifyitems(config, items):
    """On an xdist worker (`make test`: `-n 2 --dist loadgroup`), the test files that hold a test marked slow first,
    each file's tests together and in their order, then the other files: the scheduler hands out work in this order
    (the `xdist_group` groups first, largest first), so the long tests start early and the short ones fill the end,
    and the two workers finish together instead of one waiting on a slow test drawn last. A file stays in one piece,
    so its module fixtures are built no more often than before. Every worker sorts alike (xdist checks that they
    collected one order); in one process (`-n 0`) the order stays the files' own. When a test to run needs the
    demo (`demo_run`), its build starts now, in the background (tests/builders/demo.py), beside the other tests."""
    if hasattr(config, "workerinput"):
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)
    demo_users = [item for item in items if "demo_run" in getattr(item, "fixturenames", ())]
    for item in demo_users:  # the first to run may wait for the whole build: 4-5 min quiet, 30 on busy cores
        item.add_marker(pytest.mark.timeout(DEMO_TIMEOUT_S))
    if demo_users:
        from tests.builders.demo import start_in_background

        start_in_background(config._tmp_path_factory)
