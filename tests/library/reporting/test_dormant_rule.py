"""The stored rule of a dormant head, stated where a reader meets the masks (issue 62 item 4): a head with mean score
0.5056 under tau 0.5 is stored dormant when it is inactive on at least half of the inputs, so "dormant if score <
tau" (what the README and the report said) contradicts the data. The README, the report (summary.md and index.html)
and `dormant track --help` state the one sentence `engine.DORMANT_RULE`."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from dormant_tasks.engine import DORMANT_RULE
from dormant_tasks.reporting.report import render_report
from flows.cli import main
from tests.builders.stores import MODEL, write_series

REPO = Path(__file__).resolve().parents[3]


def flat(text: str) -> str:
    """`text` with its line breaks and runs of spaces as single spaces (wrapped by Markdown or argparse)."""
    return " ".join(text.split())


def test_the_readme_the_report_and_track_help_state_the_stored_rule(tmp_path, capsys):
    assert "at least half of the calibration inputs" in DORMANT_RULE
    assert flat(DORMANT_RULE) in flat((REPO / "README.md").read_text(encoding="utf-8"))
    d = np.zeros((3, 1, 4), dtype=bool)
    d[1:, 0, 0] = True
    root = write_series(tmp_path / "store", {"ahon_ln": d}, [0, 100, 200])
    report = render_report(root, MODEL, out_dir=tmp_path / "report")
    page = html.unescape(report.index_html.read_text(encoding="utf-8"))
    assert DORMANT_RULE in report.markdown and DORMANT_RULE in page
    assert "dormant if score" not in report.markdown + page
    try:
        main(["track", "--help"])
    except SystemExit:
        pass
    assert flat(DORMANT_RULE) in flat(capsys.readouterr().out)
