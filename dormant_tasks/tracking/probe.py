"""The induction probe: Xu's synthetic batch for head roles (arXiv 2606.02378), generated, never bundled.

Each sequence is `length` token ids drawn uniformly from [100, min(vocab_hi, the model's vocabulary)), with a
distinct pair A B planted at a random position p in [20, length / 2) (A at p, B at p + 1), every other occurrence
of A or B drawn again, and the last token A: the last query's induction target is B (p + 1), its duplicate target
the first A (p). The draws follow Xu's code with numpy's `RandomState(seed)`, sequence after sequence: the row,
the pair (`choice` without replacement), p, then the redraws of other As, then of other Bs; where a redraw lands on
A or B again it is drawn once more (Xu's keeps it, so a rare sequence of Xu's holds a third A or B; this set holds
none, which `tests/library/tracking/test_probe.py` checks on every sequence).

As a calibration set (`--calibration induction-probe`, `PROBE_SET`) it is token ids, scored with no tokenizer and
no special tokens; each sequence is its own cluster. Its `calibration_id` names the recipe (sequences, length,
seed, vocab_hi); the ids are drawn when the checkpoint is scored, since their range is capped at its vocabulary.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from dormant_tasks.errors import ConfigError

PROBE_SET = "induction-probe"
PROBE_SIZE = 2000  # sequences, Xu's batch
PROBE_LENGTH = 256
PROBE_SEED = 42
VOCAB_LO = 100
VOCAB_HI = 10000
PAIR_LO = 20  # the first A's position is drawn in [PAIR_LO, length // 2)


def induction_probe(n: int, length: int = PROBE_LENGTH, seed: int = PROBE_SEED, vocab_hi: int = VOCAB_HI):
    """int64 array [n, length]: the probe's sequences (module docstring), ids in [100, vocab_hi)."""
    import numpy as np

    if length < 2 * PAIR_LO + 2:
        raise ConfigError(f"the induction probe needs sequences of at least {2 * PAIR_LO + 2} tokens, got {length}")
    if vocab_hi - VOCAB_LO < 3:
        raise ConfigError(f"the induction probe draws ids from [{VOCAB_LO}, {vocab_hi}): a vocabulary too small")
    rng = np.random.RandomState(seed)
    out = np.empty((n, length), dtype=np.int64)

    def other(a: int, b: int) -> int:
        while True:
            x = int(rng.randint(VOCAB_LO, vocab_hi))
            if x not in (a, b):
                return x

    for i in range(n):
        seq = rng.randint(VOCAB_LO, vocab_hi, size=length).astype(np.int64)
        a, b = (int(x) for x in rng.choice(np.arange(VOCAB_LO, vocab_hi), size=2, replace=False))
        p = int(rng.randint(PAIR_LO, length // 2))
        seq[p], seq[p + 1] = a, b
        for k in range(length):
            if seq[k] == a and k != p:
                seq[k] = other(a, b)
        for k in range(length):
            if seq[k] == b and k != p + 1:
                seq[k] = other(a, b)
        seq[-1] = a
        out[i] = seq
    return out


@dataclass(frozen=True)
class ProbeSpec:
    """The recipe of an induction-probe calibration set; `rows(vocab_size)` draws its token ids."""

    n: int = PROBE_SIZE
    length: int = PROBE_LENGTH
    seed: int = PROBE_SEED
    vocab_hi: int = VOCAB_HI

    def rows(self, vocab_size: int):
        """int64 [n, length]: the ids, their range capped at the model's vocabulary."""
        return induction_probe(self.n, self.length, self.seed, min(self.vocab_hi, int(vocab_size)))

    @property
    def digest(self) -> str:
        recipe = f"induction_probe(n={self.n}, length={self.length}, seed={self.seed}, vocab_hi={self.vocab_hi})"
        return hashlib.sha256(recipe.encode()).hexdigest()[:12]


__all__ = ["PROBE_SET", "PROBE_SIZE", "ProbeSpec", "induction_probe"]
