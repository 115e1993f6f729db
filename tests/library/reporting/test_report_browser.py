"""The report opens offline in a real browser and every image loads (headless Chromium, Debian package `chromium`).

The tests render a report (and a comparison of two series) from a hand-built store (see test_report.py), copies index.html to a probe page
in the same folder (so relative image paths resolve the same way) with a script that, once the page has
loaded, writes each <img>'s src, completeness and natural size into the DOM; Chromium's --dump-dom
prints that DOM. Network access is switched off, so a CDN reference would fail to load as well.
Skipped, with the reason, where no Chromium is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from dormant_tasks.reporting.compare_page import render_comparison
from dormant_tasks.reporting.report import render_report
from tests.builders.stores import MODEL, TOKENS, known_picture, write_series

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

PROBE = """<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images).map(i => ({src: i.getAttribute("src"), complete: i.complete,
                                                       width: i.naturalWidth, height: i.naturalHeight}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(images);
  document.body.appendChild(out);
});
</script>"""


def images_in_chromium(index_html, tmp_path) -> list[dict]:
    """Every <img> of the page as headless Chromium loaded it (offline): src, complete, natural size."""
    probe = index_html.parent / "_probe.html"
    probe.write_text(index_html.read_text().replace("</body>", PROBE + "</body>"))
    cmd = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probe.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    probe.unlink()
    match = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert match, f"no probe output from Chromium (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_every_image_of_the_report_loads_in_chromium(tmp_path):
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture(), "lthon_ln": known_picture()[:, ::-1]}, TOKENS)
    result = render_report(store, MODEL, out_dir=tmp_path / "report")
    images = images_in_chromium(result.index_html, tmp_path)
    assert sorted(i["src"] for i in images) == sorted(f"figures/{png.name}" for png, _ in result.figures.values())
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_every_image_of_a_comparison_loads_in_chromium(tmp_path):
    """Two series of different shapes (2 x 3 and 3 x 2 heads) and cadences, compared under two functions."""
    small = np.stack([known_picture(), known_picture()[:, ::-1]])  # [fn, checkpoint, layer, head]
    store = write_series(tmp_path / "store", dict(zip(("ahon_ln", "lthon_ln"), small)), TOKENS)
    other = small[:, ::2].reshape(2, 3, 3, 2)  # every other checkpoint, the heads as 3 layers x 2
    write_series(store, dict(zip(("ahon_ln", "lthon_ln"), other)), TOKENS[::2], model_id="test-org/other")
    result = render_comparison(store, [MODEL, "test-org/other"], tmp_path / "cmp", ["ahon_ln", "lthon_ln"])
    images = images_in_chromium(result.index_html, tmp_path)
    assert len(images) == 6 and {i["src"] for i in images} == {f"figures/{p.name}" for p, _ in result.figures.values()}
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_the_per_head_view_draws_the_most_dormant_head_in_chromium(tmp_path):
    """The inline script draws, offline: the head dormant at the most checkpoints, one point per checkpoint (red
    where dormant), the tau line, and every head in the list."""
    picture = known_picture()
    store = write_series(tmp_path / "store", {"ahon_ln": picture}, TOKENS)
    result = render_report(store, MODEL, out_dir=tmp_path / "report")
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9"]
    cmd += [f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom"]
    dom = subprocess.run([*cmd, result.index_html.as_uri()], capture_output=True, text=True, timeout=120).stdout
    (plot,) = re.findall(r'<svg id="head-plot".*?</svg>', dom, re.S)
    dormant = picture.reshape(len(TOKENS), -1).sum(axis=0)  # [head] checkpoints dormant
    assert plot.count("<circle") == len(TOKENS) and plot.count('fill="#d62728"') == dormant.max()
    assert "tau = 0.5 (inactive on an input if score &lt; tau)" in plot
    assert dom.count("<option") == picture[0].size
