"""The induction probe (dormant_tasks/tracking/probe.py): its structure on every sequence of the default set, the
calibration set `induction-probe` (token ids, `--limit`), and `dormant score --calibration induction-probe`."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking import PROBE_SET, induction_probe, load_calibration_sets
from flows.cli import main


def check_structure(seqs: np.ndarray, vocab_hi: int) -> None:
    """Per sequence: ids in [100, vocab_hi); A at p in [20, L/2) and B at p + 1, A != B; the last token A; no other A
    or B anywhere."""
    n, length = seqs.shape
    for i, seq in enumerate(seqs):
        a = seq[-1]
        where_a = np.flatnonzero(seq == a)
        assert len(where_a) == 2, i  # the planted A and the last token
        p = where_a[0]
        b = seq[p + 1]
        assert 20 <= p < length // 2 and b != a, i
        assert list(np.flatnonzero(seq == b)) == [p + 1], i
        assert seq.min() >= 100 and seq.max() < vocab_hi, i


def test_the_default_probe_has_its_structure_on_every_sequence():
    seqs = induction_probe(2000)
    assert seqs.shape == (2000, 256) and seqs.dtype == np.int64
    check_structure(seqs, 10000)
    assert np.array_equal(seqs[:5], induction_probe(5))  # the first sequences do not depend on n
    assert not np.array_equal(seqs[:5], induction_probe(5, seed=1))
    positions = [np.flatnonzero(s == s[-1])[0] for s in seqs]
    assert min(positions) == 20 and max(positions) == 127  # the whole range of p is drawn


def test_a_small_vocabulary_caps_the_ids():
    seqs = induction_probe(50, 64, seed=3, vocab_hi=120)  # only 20 ids: redraws of A and B happen often
    check_structure(seqs, 120)
    with pytest.raises(ConfigError, match="too small"):
        induction_probe(1, 64, vocab_hi=102)


def test_the_calibration_set_is_the_recipe_with_its_limit():
    (full,) = load_calibration_sets([PROBE_SET])
    (small,) = load_calibration_sets([PROBE_SET], limit=8)
    assert full.n_inputs == 2000 and small.n_inputs == 8 and full.texts == () and full.clusters is None
    assert full.calibration_id.startswith("induction-probe-2000-") and small.calibration_id != full.calibration_id
    assert np.array_equal(small.probe.rows(50_000), induction_probe(8))
    assert np.array_equal(small.probe.rows(512), induction_probe(8, vocab_hi=512))  # the model's vocabulary caps it


def test_score_takes_the_probe_as_token_ids(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "roles.parquet"
    args = ["score", "--model", tiny_model_dir, "--calibration", PROBE_SET, "--limit", "3", "--scores", "roles"]
    assert main([str(a) for a in [*args, "--out", out]]) == 0
    table = pq.read_table(out).to_pandas()
    assert set(table.score_fn) == {f"attn_{t}" for t in ("induction", "duplicate", "previous", "self", "first")} | {
        "attn_local",
        "attn_baseline",
    }
    assert table.input_index.nunique() == 3 and table.calibration_id.iloc[0].startswith("induction-probe-3-")
    assert table.score.notna().all()  # every target exists in a probe sequence and the model has no window
    assert "scored 3 inputs (induction-probe-3-" in capsys.readouterr().out
    assert (
        main(["score", "--model", str(tiny_model_dir), "--texts", "x", "--calibration", PROBE_SET, "--out", "o"]) == 2
    )
