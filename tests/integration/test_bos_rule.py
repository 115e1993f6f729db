"""`--bos paper` vs `--bos tokenizer` on a tokenizer that adds a BOS token (docs/SCORES.md §6).

- the two rules give token ids that differ by exactly that leading BOS (contexts; continuations are equal);
- the `tokenizer` rule is what lm-eval 0.4.13's stock HFLM encodes (in this process);
- the `paper` rule is what lm-eval 0.4.5's stock HFLM encodes, the version the paper's authors ran. 0.4.5 pins
  transformers 4.x, which clashes with ours, so it runs in a venv of its own (`make lmeval045`, built by
  `make test`) on the same saved checkpoint; the test skips, saying so, where that venv is absent.

The requests are real: lm-eval's own winogrande (5-shot) and gsm8k prompts on the bundled data.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.evaluation.model import encode_context, encode_pair
from dormant_tasks.evaluation.sweep import prepare
from tests.builders.evaluation import eval_request

pytestmark = pytest.mark.slow  # the two BOS rules' model and requests take ~30 s to build

REPO_ROOT = Path(__file__).resolve().parents[2]
LMEVAL045_PYTHON = REPO_ROOT / ".venv-lmeval045" / "bin" / "python"
SCRIPT = Path(__file__).with_name("lmeval045_encode.py")


@pytest.fixture(scope="module")
def bos_model(tmp_path_factory, tiny_model_dir):
    """The tiny checkpoint with a tokenizer whose post-processor puts its BOS token first, as Llama-3's does."""
    from tokenizers.processors import TemplateProcessing

    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    bos = tok.bos_token
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.bos_token_id)]
    )
    folder = tmp_path_factory.mktemp("models") / "tiny-olmo2-bos"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    # transformers 5 names its tokenizer class TokenizersBackend, which 4.x (lm-eval 0.4.5's) does not know;
    # PreTrainedTokenizerFast is the same tokenizer.json under a name both read.
    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tokenizer_class": "PreTrainedTokenizerFast"}))
    model, tok = load_model_and_tokenizer(folder, device="cpu")
    assert tok("a b").input_ids[0] == tok.bos_token_id, "the fixture's tokenizer must add a BOS"
    return folder, model, tok


@pytest.fixture(scope="module")
def requests_(bos_model):
    """(loglikelihood pairs, generation contexts) that lm-eval builds for winogrande 5-shot and gsm8k 2-shot."""
    _, model, tok = bos_model
    pairs = []
    for task, shots in (("winogrande", 5), ("piqa", 0)):
        prepared = prepare(model, tok, eval_request(task, model="tiny", shots=shots, limit=6, datasets="bundled"))
        pairs += [tuple(inst.args) for leaf in prepared.instances for inst in prepared.instances[leaf]]
    gen = prepare(model, tok, eval_request("gsm8k", model="tiny", shots=2, limit=3, datasets="bundled"))
    texts = [inst.args[0] for inst in gen.instances["gsm8k"]]
    texts.append(tok.bos_token + texts[0])  # a text that brings its own BOS
    return pairs, texts


def test_the_rules_differ_by_exactly_the_bos(bos_model, requests_):
    _, _, tok = bos_model
    pairs, texts = requests_
    for context, continuation in pairs:
        paper_ctx, paper_cont = encode_pair(tok, context, continuation, "paper")
        tok_ctx, tok_cont = encode_pair(tok, context, continuation, "tokenizer")
        assert tok_ctx == [tok.bos_token_id] + paper_ctx
        assert tok_cont == paper_cont
        assert paper_ctx[0] != tok.bos_token_id
    for text in texts[:-1]:
        assert encode_context(tok, text, "tokenizer") == [tok.bos_token_id] + encode_context(tok, text, "paper")
    # a text that starts with the BOS string gets no second one under either rule
    own = texts[-1]
    assert encode_context(tok, own, "tokenizer") == encode_context(tok, own, "paper")
    assert encode_context(tok, own, "paper")[:2] != [tok.bos_token_id] * 2
    # the paper's rule lets a Gemma tokenizer add its BOS (0.4.5 sets add_bos_token for gemma model types)
    assert encode_context(tok, texts[0], "paper", model_type="gemma2") == encode_context(tok, texts[0], "tokenizer")


def test_tokenizer_rule_is_lm_eval_0413_hflm(bos_model, requests_):
    from lm_eval.models.huggingface import HFLM

    _, model, tok = bos_model
    pairs, texts = requests_
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=1)
    for context, continuation in pairs:
        assert encode_pair(tok, context, continuation, "tokenizer") == tuple(
            list(x) for x in lm._encode_pair(context, continuation)
        )
    for text in texts:
        assert encode_context(tok, text, "tokenizer") == lm.tok_batch_encode([text])[0][0].tolist()


def test_paper_rule_is_lm_eval_045_hflm(bos_model, requests_):
    if not LMEVAL045_PYTHON.exists():
        pytest.skip(f"no lm-eval 0.4.5 venv at {LMEVAL045_PYTHON.parent.parent} (`make lmeval045` builds it)")
    folder, _, tok = bos_model
    pairs, texts = requests_
    job = {"model": str(folder), "pairs": [list(p) for p in pairs], "texts": texts}
    done = subprocess.run(
        [str(LMEVAL045_PYTHON), str(SCRIPT)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    assert theirs["version"] == "0.4.5"
    assert len(theirs["pairs"]) == len(pairs) > 10
    for (context, continuation), expected in zip(pairs, theirs["pairs"], strict=True):
        assert list(encode_pair(tok, context, continuation, "paper")) == expected
    for text, expected in zip(texts, theirs["texts"], strict=True):
        assert encode_context(tok, text, "paper") == expected
