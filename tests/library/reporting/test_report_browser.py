"""The report opens offline in a real browser and every image loads (headless Chromium, Debian package `chromium`).

The test renders a report from a hand-built store (see test_report.py), copies index.html to a probe page
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

import pytest
from test_report import MODEL, TOKENS, known_picture, write_series

from dormant_tasks.reporting.report import render_report

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


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_every_image_of_the_report_loads_in_chromium(tmp_path):
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture(), "lthon_ln": known_picture()[:, ::-1]}, TOKENS)
    result = render_report(store, MODEL, out_dir=tmp_path / "report")
    probe = result.out_dir / "_probe.html"
    probe.write_text(result.index_html.read_text().replace("</body>", PROBE + "</body>"))
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
    match = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert match, f"no probe output from Chromium (exit {done.returncode}): {done.stderr[-2000:]}"
    images = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert sorted(i["src"] for i in images) == sorted(f"figures/{png.name}" for png, _ in result.figures.values())
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image
