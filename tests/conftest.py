"""Shared fixtures. Prefect's temporary server is started once per session, and only by tests that ask."""

from __future__ import annotations

import os
import tempfile

# Before prefect is imported anywhere: a private PREFECT_HOME and no telemetry (there is no network here).
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="dormant-prefect-home-"))
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

from dormant_tasks.calibration import DEMO_CORPUS  # noqa: E402
from dormant_tasks.tiny import tiny_config, train_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A real byte-level BPE tokenizer trained on the first 400 lines of the bundled demo corpus."""
    texts = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400]
    return train_tokenizer(texts, vocab_size=512)


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
def prefect_harness():
    """One Prefect test server for the whole session (its first start can take over a minute)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
