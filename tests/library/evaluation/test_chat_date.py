"""`--chat-date`: the day a chat template sees, fixed for a run and recorded per `evaluations` row.

Llama-3.x chat templates write the day of the run into the system header through `strftime_now`, so without
a fixed date the same command renders other prompts tomorrow. The template below does what Llama-3.1's does
(`date_string` from `strftime_now("%d %b %Y")` unless the caller defines it) on the tiny checkpoint's tokenizer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.model import DormantLM, render_chat
from dormant_tasks.evaluation.request import EvalRequest
from dormant_tasks.evaluation.sweep import prepare, protocol_line, run_sweep
from dormant_tasks.store.io import SCHEMAS, read_table, write_table
from tests.builders.evaluation import eval_request

REPO = Path(__file__).resolve().parents[3]
LLAMA_STYLE_TEMPLATE = (
    "{%- if not date_string is defined %}{%- if strftime_now is defined %}"
    "{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = '26 Jul 2024' %}"
    "{%- endif %}{%- endif %}"
    "{{ '<|system|>\nCutting Knowledge Date: December 2023\nToday Date: ' + date_string + '\n' }}"
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
DAY = date(2023, 3, 9)  # not today, and not the template's own fallback


@pytest.fixture(scope="module")
def chat_model(tiny_model_dir):
    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    tok.chat_template = LLAMA_STYLE_TEMPLATE
    return model, tok


def _stamp(day: date) -> str:
    return f"Today Date: {day.strftime('%d %b %Y')}\n"


def _contexts(prepared) -> list[str]:
    return [inst.args[0] for instances in prepared.instances.values() for inst in instances]


@pytest.mark.parametrize("rendering", ["paper", "lm-eval"])
@pytest.mark.slow
def test_the_template_sees_the_fixed_date_in_both_renderings(chat_model, rendering):
    """lm-eval 0.4.5's rendering (ours) and lm-eval 0.4.13's own (its build_all_requests) both see the day."""
    model, tok = chat_model
    common = dict(model="x-Instruct", shots=2, limit=3, datasets="bundled", rendering=rendering)
    prepared = prepare(model, tok, eval_request("winogrande", chat_date=DAY.isoformat(), **common))
    contexts = _contexts(prepared)
    assert contexts and all(_stamp(DAY) in c for c in contexts), contexts[0][:200]
    assert prepared.protocol.chat_date == DAY
    today = prepare(model, tok, eval_request("winogrande", **common))  # the default: the day of the run, recorded
    assert today.protocol.chat_date == date.today()
    assert all(_stamp(date.today()) in c for c in _contexts(today))


def test_lm_evals_own_chat_call_sees_it_too(chat_model):
    """`DormantLM.apply_chat_template`, which lm-eval calls when it drives the model (simple_evaluate)."""
    model, tok = chat_model
    lm = DormantLM(model, tok, chat_date=DAY)
    assert _stamp(DAY) in lm.apply_chat_template([{"role": "user", "content": "hi"}])
    assert _stamp(DAY) in render_chat(tok, [{"role": "user", "content": "hi"}], chat_date=DAY)


def test_each_row_records_the_date_and_the_store_keeps_it(chat_model, tiny_model_dir, tmp_path):
    model, tok = chat_model
    prepared = prepare(
        model,
        tok,
        eval_request("winogrande", model="x-Instruct", shots=1, limit=2, datasets="bundled", chat_date=DAY.isoformat()),
    )
    result = run_sweep(prepared, ["ahon_ln"], quantiles=(0.0, 0.1), progress=False)
    assert {r["chat_date"] for r in result.rows} == {DAY}
    assert f"chat template rendered as lm-eval 0.4.5 (paper) on {DAY}" in protocol_line(
        {**result.rows[0], "data_source": "bundled"}
    )
    plain, plain_tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    no_chat = prepare(plain, plain_tok, eval_request("winogrande", model="x", shots=0, limit=2, datasets="bundled"))
    assert no_chat.protocol.chat_date is None  # no template saw a date

    common = {"model_id": "x-Instruct", "revision": "main", "stage": -1, "step": -1, "tokens": -1}
    stamp = {"code_version": "test", "request_id": "r", "evaluated_at": datetime.now(UTC)}
    write_table(tmp_path, "evaluations", [{**common, **r, **stamp} for r in result.rows], file_key="r")
    assert {r["chat_date"] for r in read_table(tmp_path, "evaluations").to_pylist()} == {DAY}
    # a file written before the column existed reads it as null ("not recorded")
    folder = next((tmp_path / "evaluations").glob("series=*"))
    older = pq.read_table(folder / "r.parquet").drop_columns(["chat_date"])
    pq.write_table(older, folder / "r.parquet")
    shutil.rmtree(tmp_path / "_sums")  # that version kept no whole-file checksums either
    assert SCHEMAS["evaluations"].field("chat_date").type == pa.date32()
    assert {r["chat_date"] for r in read_table(tmp_path, "evaluations").to_pylist()} == {None}


def test_a_bad_date_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), chat_date="26 Jul 2024")
    assert EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), chat_date="2024-07-26").chat_date == "2024-07-26"
    store = tmp_path / "store"
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", "--model", str(tmp_path), "--store", str(store)]
        + ["--chat-date", "2024-02-30"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--chat-date '2024-02-30'" in lines[0], r.stderr[-1500:]
    assert not store.exists()
