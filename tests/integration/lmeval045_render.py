"""Run by .venv-lmeval045's Python (lm-eval 0.4.5, the paper authors' version), not by the test suite's.

Reads {"model": folder, "runs": [{"key", "task", "overrides", "shots", "limit", "chat", "system_instruction",
"loglikelihoods"}]} as JSON on stdin. Per run, lm-eval 0.4.5 builds the task's requests as its simple_evaluate
does (overrides merged into the task's config, num_fewshot set, fewshot seed 1234; with "chat":
apply_chat_template=True, fewshot_as_multiturn=True and the stock HFLM's chat template), and prints
{"version": ..., "runs": {key: [[doc_id, idx, args, loglikelihood or null], ...]}}; the log-likelihoods are
0.4.5's stock HFLM's (float32, default arguments) when the run asks for them.
"""

import json
import random
import sys
from importlib.metadata import version

import numpy as np
import torch
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager

job = json.load(sys.stdin)
lm = HFLM(pretrained=job["model"], device="cpu", batch_size=4, dtype="float32")
manager = TaskManager()
out = {}
for run in job["runs"]:
    random.seed(0)  # simple_evaluate's seeds
    np.random.seed(1234)
    torch.manual_seed(1234)
    loaded = manager.load_task_or_group([{"task": run["task"], **run["overrides"]}])
    task = loaded[run["task"]]
    if task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=run["shots"])
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(
        limit=run["limit"],
        rank=0,
        world_size=1,
        system_instruction=run.get("system_instruction"),
        apply_chat_template=run["chat"],
        fewshot_as_multiturn=run["chat"],
        chat_template=lm.apply_chat_template if run["chat"] else None,
        tokenizer_name=lm.tokenizer_name if run["chat"] else "",
    )
    instances = task.instances
    lls = [None] * len(instances)
    if run.get("loglikelihoods"):
        lls = [float(ll) for ll, _ in lm.loglikelihood(instances, disable_tqdm=True)]
    out[run["key"]] = [[inst.doc_id, inst.idx, list(inst.args), ll] for inst, ll in zip(instances, lls)]
json.dump({"version": version("lm_eval"), "runs": out}, sys.stdout)
