"""Run by .venv-lmeval045's Python (lm-eval 0.4.5, the paper authors' version), not by the test suite's.

Reads {"model": folder, "pairs": [[context, continuation], ...], "texts": [text, ...]} as JSON on stdin and
prints {"version": ..., "pairs": [[context ids, continuation ids], ...], "texts": [ids, ...]}: what 0.4.5's
stock HFLM (default arguments, so `add_bos_token=False`) encodes for loglikelihood requests (`_encode_pair`)
and for generation contexts (`tok_batch_encode`, the path of `generate_until`).
"""

import json
import sys
from importlib.metadata import version

from lm_eval.models.huggingface import HFLM

job = json.load(sys.stdin)
lm = HFLM(pretrained=job["model"], device="cpu", batch_size=1)
pairs = [lm._encode_pair(context, continuation) for context, continuation in job["pairs"]]
texts = [lm.tok_batch_encode([text])[0][0].tolist() for text in job["texts"]]
json.dump({"version": version("lm_eval"), "pairs": pairs, "texts": texts}, sys.stdout)
