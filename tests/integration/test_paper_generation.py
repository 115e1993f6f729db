"""Generation as the authors ran it: our greedy loop against lm-eval 0.4.5's HFLM (`model.generate`).

The tiny checkpoint is saved as a chat model whose generation_config has what Llama-3.1- and Qwen2.5-Instruct
have: a second end-of-sequence id (a token the model produces a few steps in, as <|eom_id|> would be) and a
repetition penalty, with sampling settings beside them that greedy generation ignores. lm-eval 0.4.5 runs in
its own venv (`make lmeval045`) as a subprocess (`lmeval045_generate.py`) on the same folder and the same
requests; with no zeroing both are the same plain model, so the generated texts must be equal. Each of the
two settings alone changes the texts here, so neither is left out unnoticed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.evaluation.model import DormantLM, render_chat
from dormant_tasks.tracking.calibration import DEMO_CORPUS

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
LMEVAL045_PYTHON = REPO_ROOT / ".venv-lmeval045" / "bin" / "python"
SCRIPT = Path(__file__).with_name("lmeval045_generate.py")
TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
PENALTY = 1.3
GSM8K_ARGS = {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0}
MAX_GEN = 24


def _second_eos(model, ids: list[int], eos: int) -> int:
    """A token that greedy generation under the penalty produces a few steps in, not before and not eos:
    stopping there cuts the text short."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=MAX_GEN, do_sample=False, repetition_penalty=PENALTY, eos_token_id=eos
        )[0, len(ids) :].tolist()
    for k in range(3, len(out)):
        if out[k] not in out[:k] and out[k] != eos:
            return out[k]
    raise AssertionError(f"no fresh token after step 3 in {out}")


@pytest.fixture(scope="module")
def chat_folder(tiny_model_dir, tmp_path_factory):
    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    tok.chat_template = TEMPLATE
    lines = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[400:405]
    contexts = [render_chat(tok, [{"role": "user", "content": line[:160]}]) for line in lines]
    eos = tok.eos_token_id
    second = _second_eos(model, tok.encode(contexts[0], add_special_tokens=False), eos)
    config = model.generation_config
    config.eos_token_id = [eos, second]
    config.repetition_penalty = PENALTY
    config.do_sample, config.temperature, config.top_p, config.top_k = True, 0.7, 0.8, 20  # ignored when greedy
    folder = tmp_path_factory.mktemp("models") / "tiny-olmo2-Instruct"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    for leftover in folder.glob("chat_template.jinja"):  # transformers 4.x reads the template from the config
        leftover.unlink()
    tok_config = folder / "tokenizer_config.json"
    data = json.loads(tok_config.read_text())
    data.update(tokenizer_class="PreTrainedTokenizerFast", chat_template=TEMPLATE)
    tok_config.write_text(json.dumps(data))
    return folder, contexts, [eos, second]


def _requests(contexts):
    return [[c, {**GSM8K_ARGS, "max_gen_toks": MAX_GEN}] for c in contexts]


def _ours(model, tok, contexts) -> list[str]:
    lm = DormantLM(model, tok, batch_size=3)  # batched: each row stops on its own
    instances = [Instance("generate_until", {}, (c, kw), i) for i, (c, kw) in enumerate(_requests(contexts))]
    return lm.generate_until(instances)


def _theirs(folder: Path, contexts) -> dict:
    if not LMEVAL045_PYTHON.exists():
        pytest.skip(f"no lm-eval 0.4.5 venv at {LMEVAL045_PYTHON.parent.parent} (`make lmeval045` builds it)")
    done = subprocess.run(
        [str(LMEVAL045_PYTHON), str(SCRIPT)],
        input=json.dumps({"model": str(folder), "requests": _requests(contexts)}),
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "0", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    assert theirs["version"] == "0.4.5"
    return theirs


def test_generation_equals_lm_eval_045s(chat_folder):
    folder, contexts, eos_ids = chat_folder
    model, tok = load_model_and_tokenizer(folder, device="cpu")
    theirs = _theirs(folder, contexts)
    assert theirs["eos_token_id"] == eos_ids and theirs["repetition_penalty"] == PENALTY  # what both loaded
    ours = _ours(model, tok, contexts)
    assert ours == theirs["texts"]

    # each setting matters on these requests: without it the texts are not 0.4.5's
    config = model.generation_config
    config.eos_token_id = eos_ids[0]
    assert _ours(model, tok, contexts) != ours  # the second eos id cut a text short
    config.eos_token_id, config.repetition_penalty = eos_ids, 1.0
    assert _ours(model, tok, contexts) != ours  # the penalty changed a greedy choice
