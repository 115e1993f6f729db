"""`--rendering paper` against lm-eval 0.4.5 itself (the authors' version), on a tiny chat-templated model.

lm-eval 0.4.5 pins transformers 4.x, which clashes with ours, so it runs in a venv of its own
(`make lmeval045`) as a subprocess (`lmeval045_render.py`) on the same saved checkpoint and the same bundled
items (the task configs' dataset locations are overridden as ours are). For every bundled task family
(winogrande, two mmlu subjects, piqa, hellaswag, gsm8k) the requests we build must be identical to 0.4.5's,
byte for byte, with the chat template (and with a system instruction) and without one; and the un-intervened
log-likelihood of every choice on winogrande and mmlu items must equal 0.4.5's stock HFLM's to 1e-4 (float32).
`--rendering lm-eval` (0.4.13's own) must differ from 0.4.5 under the chat template: that is why the option exists.
ARC's data is not bundled: a few items in its schema are written to Parquet for this test and served to both
versions as the bundled copies are (`arc_items`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.evaluation.sweep import prepare
from tests.builders.evaluation import eval_request

# one xdist worker runs the module (`--dist loadgroup`): its module fixtures (57 s) are built once, not per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("paper_rendering")]

REPO_ROOT = Path(__file__).resolve().parents[2]
LMEVAL045_PYTHON = REPO_ROOT / ".venv-lmeval045" / "bin" / "python"
SCRIPT = Path(__file__).with_name("lmeval045_render.py")

# OLMo-2-Instruct's template, in its shape: role headers, EOS after each assistant turn, the header as prompt.
OLMO2_STYLE_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{% if not loop.last %}"
    "{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}"
    "{% else %}{{ '<|assistant|>\n' + message['content'] + eos_token }}{% endif %}{% endif %}"
    "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}"
)
SYSTEM = "You are a careful assistant."
# (key, task, shots, limit, system instruction, compare log-likelihoods)
RUNS = [
    ("winogrande", "winogrande", 5, 8, None, True),
    ("mmlu_anatomy", "mmlu_anatomy", 5, 5, None, True),
    ("mmlu_astronomy", "mmlu_astronomy", 5, 5, None, True),
    ("mmlu_anatomy_system", "mmlu_anatomy", 5, 3, SYSTEM, False),
    ("winogrande_system", "winogrande", 2, 3, SYSTEM, False),
    ("piqa", "piqa", 0, 5, None, False),
    ("hellaswag", "hellaswag", 0, 4, None, False),
    ("gsm8k", "gsm8k", 5, 3, None, False),
    ("arc_challenge", "arc_challenge", 5, 4, None, False),
]
_CONFIG_KEYS = ("dataset_path", "dataset_name", "dataset_kwargs", "training_split", "validation_split", "test_split")


@pytest.fixture(scope="module", autouse=True)
def arc_items(tmp_path_factory):
    """ARC-Challenge train/validation/test splits of made-up items in its Hub schema, served as if bundled."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dormant_tasks.evaluation import bundled

    folder = tmp_path_factory.mktemp("arc")
    things = ["a rock", "a plant", "the Sun", "a magnet", "water", "a cloud", "an ice cube", "a seed", "a battery"]
    splits = {}
    for split, n in (("train", 9), ("validation", 4), ("test", 6)):
        rows = [
            {
                "id": f"{split}-{i}",
                "question": f"Which of these changes when {things[i % 9]} is heated ({split} {i})?",
                "choices": {"text": [things[(i + k) % 9] for k in range(4)], "label": ["A", "B", "C", "D"]},
                "answerKey": "ABCD"[i % 4],
            }
            for i in range(n)
        ]
        splits[split] = folder / f"{split}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), splits[split])
    arc = bundled.BundledDataset("allenai/ai2_arc", "ARC-Challenge", splits, True)
    real = bundled.bundled_dataset
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bundled, "bundled_dataset", lambda p, n: arc if (p, n) == (arc.path, arc.name) else real(p, n))
        yield arc


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory, tiny_model_dir):
    """The tiny checkpoint named like an Instruct model, with an OLMo-2-style chat template, readable by both."""
    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    tok.chat_template = OLMO2_STYLE_TEMPLATE
    folder = tmp_path_factory.mktemp("models") / "tiny-olmo2-Instruct"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    for leftover in folder.glob("chat_template.jinja"):  # transformers 4.x reads the template from the config
        leftover.unlink()
    config = folder / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.update(tokenizer_class="PreTrainedTokenizerFast", chat_template=OLMO2_STYLE_TEMPLATE)
    config.write_text(json.dumps(data))
    model, tok = load_model_and_tokenizer(folder, device="cpu")
    assert tok.chat_template == OLMO2_STYLE_TEMPLATE
    return folder, model, tok


def _overrides(task) -> dict:
    """The bundled data's location in the task's config (as our TaskManager set it), for 0.4.5 to read the same."""
    cfg = task.config
    out = {k: getattr(cfg, k) for k in _CONFIG_KEYS}
    fewshot = cfg.fewshot_split
    if fewshot is not None:
        out["fewshot_split"] = fewshot
    return out


def _ours(model, tok, chat: bool, rendering: str = "paper") -> dict:
    out = {}
    for key, task, shots, limit, system, want_lls in RUNS:
        prepared = prepare(
            model,
            tok,
            eval_request(
                task,
                model="tiny-olmo2-Instruct",
                shots=shots,
                limit=limit,
                chat_template="on" if chat else "off",
                datasets="bundled",
                rendering=rendering,
                system_instruction=system,
            ),
        )
        ((leaf, instances),) = prepared.instances.items()
        lls = [None] * len(instances)
        if want_lls:
            lls = [ll for ll, _ in prepared.lm.loglikelihood(instances, disable_tqdm=True)]
        out[key] = {
            "rows": [[inst.doc_id, inst.idx, list(inst.args), ll] for inst, ll in zip(instances, lls)],
            "overrides": _overrides(prepared.loaded.tasks[leaf]),
        }
    return out


def _theirs(folder: Path, ours: dict[bool, dict]) -> dict[bool, dict]:
    """lm-eval 0.4.5's requests (and log-likelihoods) for every run of RUNS, with the chat template and without
    (the keys of `ours`), from ONE subprocess: its start and task index are paid once."""
    runs = [
        {
            "key": f"{key}/{chat}",
            "task": task,
            "overrides": ours[chat][key]["overrides"],
            "shots": shots,
            "limit": limit,
            "chat": chat,
            "system_instruction": system,
            "loglikelihoods": want_lls and chat,
        }
        for chat in ours
        for key, task, shots, limit, system, want_lls in RUNS
    ]
    done = subprocess.run(
        [str(LMEVAL045_PYTHON), str(SCRIPT)],
        input=json.dumps({"model": str(folder), "runs": runs}),
        capture_output=True,
        text=True,
        timeout=900,
        env={
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "TOKENIZERS_PARALLELISM": "0",
            "OMP_NUM_THREADS": "1",
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    assert theirs["version"] == "0.4.5"
    return {chat: {key: theirs["runs"][f"{key}/{chat}"] for key, *_ in RUNS} for chat in ours}


@pytest.fixture(scope="module")
def both_runs(chat_model):
    """{chat: (ours, theirs)} for chat True and False."""
    if not LMEVAL045_PYTHON.exists():
        pytest.skip(f"no lm-eval 0.4.5 venv at {LMEVAL045_PYTHON.parent.parent} (`make lmeval045` builds it)")
    folder, model, tok = chat_model
    ours = {True: _ours(model, tok, chat=True), False: _ours(model, tok, chat=False)}
    theirs = _theirs(folder, ours)
    return {chat: (ours[chat], theirs[chat]) for chat in ours}


@pytest.fixture(scope="module")
def chat_runs(both_runs):
    return both_runs[True]


def test_chat_requests_are_lm_eval_045s_byte_for_byte(chat_runs):
    ours, theirs = chat_runs
    for key, *_ in RUNS:
        mine = [row[:3] for row in ours[key]["rows"]]
        expected = [[d, i, [a for a in args]] for d, i, args, _ in theirs[key]]
        assert len(mine) == len(expected) > 0, key
        for got, want in zip(mine, expected, strict=True):
            assert got == want, f"{key}: doc {want[0]} choice {want[1]} differs"
    # the renderings really are chat ones: WinoGrande's option-filled sentence after the assistant header,
    # the target delimiter kept; gsm8k's stop sequences carried over
    (context, continuation) = ours["winogrande"]["rows"][0][2]
    assert "<|assistant|>\n" in context and continuation.startswith(" ")
    assert ours["winogrande_system"]["rows"][0][2][0].count("<|system|>") == 1
    assert ours["gsm8k"]["rows"][0][2][1]["until"]
    assert ours["arc_challenge"]["rows"][0][2][1].startswith(" ")  # " " + the choice


def test_loglikelihoods_equal_lm_eval_045_hflm(chat_runs):
    ours, theirs = chat_runs
    n = 0
    for key, *_, want_lls in RUNS:
        if not want_lls:
            continue
        for (_, _, _, mine), (_, _, _, expected) in zip(ours[key]["rows"], theirs[key], strict=True):
            assert abs(mine - expected) < 1e-4, key
            n += 1
    assert n >= 40


def test_plain_requests_stay_identical(both_runs):
    ours, theirs = both_runs[False]
    for key, *_ in RUNS:
        assert [row[:3] for row in ours[key]["rows"]] == [row[:3] for row in theirs[key]], key


def test_lm_eval_rendering_is_not_the_papers(chat_model, chat_runs):
    """0.4.13's own chat rendering differs from 0.4.5's (the delimiter, WinoGrande's user turn)."""
    _, model, tok = chat_model
    ours_paper, _ = chat_runs
    prepared = prepare(
        model,
        tok,
        eval_request("winogrande", model="x-Instruct", shots=5, limit=3, datasets="bundled", rendering="lm-eval"),
    )
    theirs = [list(inst.args) for inst in prepared.instances["winogrande"]]
    paper = [row[2] for row in ours_paper["winogrande"]["rows"][: len(theirs)]]
    assert prepared.protocol.chat_template and prepared.protocol.rendering == "lm-eval"
    assert all(a != b for a, b in zip(theirs, paper))
    assert not theirs[0][1].startswith(" ")
