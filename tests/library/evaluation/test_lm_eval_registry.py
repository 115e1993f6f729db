"""`DormantLM` in lm-eval's model registry: `simple_evaluate(model="dormant", model_args=...)` runs an intervention.

lm-eval builds the model from its argument string and runs its own evaluation loop; the per-item
log-likelihoods must be those of our sweep's setting with the same zeroing (the same engine, the same requests),
and differ from the un-intervened model's.
"""

from __future__ import annotations

import lm_eval
import pytest

import dormant_tasks.evaluation.model  # noqa: F401 - registers "dormant"
from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.engine.scoring import DynamicZeroing
from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation.lm_tasks import DEFAULT_FEWSHOT_SEED, task_manager
from dormant_tasks.evaluation.request import DataSource
from dormant_tasks.evaluation.sweep import prepare, run_setting
from tests.builders.evaluation import eval_request

LIMIT = 6


def _lls(results) -> dict[int, list[float]]:
    return {s["doc_id"]: [float(r[0][0]) for r in s["resps"]] for s in results["samples"]["winogrande"]}


def _simple(model_args: str):
    return lm_eval.simple_evaluate(
        model="dormant",
        model_args=model_args,
        tasks=["winogrande"],
        task_manager=task_manager(DataSource.BUNDLED),
        num_fewshot=0,
        fewshot_random_seed=DEFAULT_FEWSHOT_SEED,
        limit=LIMIT,
        log_samples=True,
        bootstrap_iters=0,
    )


@pytest.mark.slow
def test_simple_evaluate_runs_an_intervention(tiny_model_dir):
    from lm_eval.api.registry import get_model

    assert get_model("dormant") is dormant_tasks.evaluation.model.DormantLM
    assert get_model("hf").__name__ == "HFLM"  # lm-eval's own names are still there
    zeroed = _lls(_simple(f"pretrained={tiny_model_dir},device=cpu,zeroing=ahon_ln:0.9"))
    plain = _lls(_simple(f"pretrained={tiny_model_dir},device=cpu"))

    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    prepared = prepare(model, tok, eval_request("winogrande", model="tiny", shots=0, limit=LIMIT, datasets="bundled"))
    ours = run_setting(prepared, prepared.specs[0], DynamicZeroing("ahon_ln", 0.9), log_samples=True)
    assert 0 < ours.frac_zeroed < 1
    mine = {item["doc_id"]: item["loglikelihoods"] for item in ours.items}
    assert set(mine) == set(zeroed) and len(mine) == LIMIT
    for doc_id, lls in mine.items():
        assert lls == pytest.approx(zeroed[doc_id], abs=1e-5)
    assert any(zeroed[d] != pytest.approx(plain[d], abs=1e-3) for d in plain)


def test_bad_model_args_are_one_line():
    from dormant_tasks.evaluation.model import DormantLM

    with pytest.raises(EvaluationError, match="lack pretrained"):
        DormantLM.create_from_arg_string("device=cpu")
    with pytest.raises(EvaluationError, match="unknown model_args 'zeroes'"):
        DormantLM.create_from_arg_string("pretrained=x,zeroes=ahon_ln:1")
