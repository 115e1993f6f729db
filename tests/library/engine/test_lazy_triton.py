"""The Triton kernel's module is imported only where the kernel may run (a CUDA tensor, or `kernel="triton"`): the
engine imports without Triton (0.2 s and 72 modules), and a CPU scoring pass defines no `@jit` function, so it
runs from `.pyc` files alone (Triton's `@jit` reads its function's source: "@jit functions should be defined in
a Python file"). (Where Triton is installed, torch._dynamo still imports Triton itself once transformers loads a
model class, through transformers.masking_utils: that import is theirs, and needs no source of ours.)"""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
from pathlib import Path

import dormant_tasks

ROOT = Path(dormant_tasks.__file__).resolve().parent.parent

SCORE_ON_CPU = """
import sys
sys.path.insert(0, {where!r})
sys.dont_write_bytecode = True
import torch
import dormant_tasks.engine.scoring as scoring
assert not [m for m in sys.modules if m.split(".")[0] == "triton"], "the engine imported Triton"
from transformers import Olmo2Config, Olmo2ForCausalLM
assert scoring.__file__.startswith({where!r}) and scoring.__file__.endswith(".pyc"), scoring.__file__
torch.manual_seed(0)
config = Olmo2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
model = Olmo2ForCausalLM(config).eval()
result = scoring.scoring_pass(model, torch.tensor([[1, 5, 9, 3], [2, 4, 6, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]))
assert result.scores.shape == (2, 16, 2, 4), result.scores.shape
print("loaded:", sorted(m for m in sys.modules if m.endswith("triton_attention")))
"""


def test_a_cpu_scoring_pass_runs_from_pyc_files_alone_without_triton(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "dormant_tasks", tree / "dormant_tasks", ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(tree, quiet=1, legacy=True)  # foo.pyc beside foo.py, importable without it
    for source in tree.rglob("*.py"):
        source.unlink()
    done = subprocess.run(
        [sys.executable, "-c", SCORE_ON_CPU.format(where=str(tree))],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "loaded: []", done.stdout
