"""Every user's string reaches Markdown and HTML escaped (issue "Nothing lost, second pass", item 3): a calibration
file named `<img src=x onerror=alert(1)>.txt` (its calibration id starts with the file's stem) and a series name
with Markdown's specials, through the real report, findings and comparison writers."""

from __future__ import annotations

from dormant_tasks.findings import series_findings
from dormant_tasks.reporting.compare_page import render_comparison
from dormant_tasks.reporting.findings_report import write_findings
from dormant_tasks.reporting.report import render_report
from dormant_tasks.text import md
from tests.builders.stores import TOKENS, known_picture, write_series

HOSTILE = "<img src=x onerror=alert(1)>-4-abc"  # what `CalibrationSet.calibration_id` makes of that file's name
SERIES = "test-org/my_model"  # `_` would start emphasis in Markdown
RAW = "<img src=x"


def test_md_escapes_html_and_markdown_specials():
    assert md("<b>a|b</b> *c* _d_ [e](f) `g` \\ & h\ni") == (
        "&lt;b&gt;a\\|b&lt;/b&gt; \\*c\\* \\_d\\_ \\[e\\](f) \\`g\\` \\\\ &amp; h i"
    )


def test_a_hostile_calibration_name_is_escaped_in_every_page_and_summary(tmp_path):
    store = write_series(
        tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS, model_id=SERIES, calibration_id=HOSTILE
    )
    write_series(store, {"ahon_ln": known_picture()}, TOKENS, model_id="test-org/b", calibration_id=HOSTILE)
    report = render_report(store, SERIES, out_dir=tmp_path / "report")
    summary = report.summary_md.read_text(encoding="utf-8")
    html = report.index_html.read_text(encoding="utf-8")
    assert RAW not in summary and "&lt;img src=x onerror=alert(1)&gt;-4-abc" in summary
    assert "# Dormant heads: test-org/my\\_model" in summary
    assert RAW not in html and "&lt;img src=x onerror=alert(1)&gt;-4-abc" in html
    assert "test-org/my_model" in html and "my\\_model" not in html  # the page is HTML: no Markdown escapes

    findings = write_findings(series_findings(store, SERIES), tmp_path / "findings", store)
    text = findings.summary_md.read_text(encoding="utf-8")
    assert RAW not in text and "&lt;img" in text and "# Findings: test-org/my\\_model" in text

    compared = render_comparison(store, [SERIES, "test-org/b"], out_dir=tmp_path / "cmp")
    text = compared.summary_md.read_text(encoding="utf-8")
    html = compared.index_html.read_text(encoding="utf-8")
    assert RAW not in text and "&lt;img" in text and "test-org/my\\_model vs test-org/b" in text
    assert RAW not in html and "&lt;img" in html
