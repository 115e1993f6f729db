"""Run by .venv-lmeval045's Python (lm-eval 0.4.5, the paper authors' version), not by the test suite's.

Reads {"model": folder, "requests": [[context, generation arguments], ...]} as JSON on stdin and prints
{"version": ..., "texts": [...], "eos_token_id": ..., "repetition_penalty": ...}: what 0.4.5's stock HFLM
(float32, one request per batch, default arguments) generates for each request through `generate_until`,
i.e. `model.generate` under the checkpoint's generation_config, and that config's two settings as loaded.
"""

import json
import sys
from importlib.metadata import version

from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

job = json.load(sys.stdin)
lm = HFLM(pretrained=job["model"], device="cpu", batch_size=1, dtype="float32")
requests = [
    Instance(request_type="generate_until", doc={}, arguments=(context, kwargs), idx=i)
    for i, (context, kwargs) in enumerate(job["requests"])
]
texts = lm.generate_until(requests, disable_tqdm=True)
config = lm.model.generation_config
json.dump(
    {
        "version": version("lm_eval"),
        "texts": texts,
        "eos_token_id": config.eos_token_id,
        "repetition_penalty": config.repetition_penalty,
    },
    sys.stdout,
)
