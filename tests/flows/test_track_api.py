"""One run, one place: `dormant_tasks.track(...)`, the Python call, is the run `dormant track` runs as a Prefect flow.

The call runs in its own process here, with PREFECT_API_URL on a closed port: it must neither need nor import
Prefect. Its tables equal, in every data column, those of `dormant track` with the same options (the flow on the
session's Prefect server); the columns that say when and by which run a row was written are left out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking import TrackRequest
from flows.cli import build_parser
from flows.cli.track import request_from_args
from flows.track import track as track_flow
from tests.builders.processes import cli_env
from tests.builders.track import store_rows

OPTIONS = {"limit": 8, "tau": ["ahon=q0.2"], "max": 2, "no_report": True}
CALL = """
import json, sys
import dormant_tasks
result = dormant_tasks.track(sys.argv[1], store=sys.argv[2], **json.loads(sys.argv[3]))
print(json.dumps({"analysed": result.analysed, "failed": len(result.failed), "prefect": "prefect" in sys.modules}))
"""


def test_the_python_call_needs_no_prefect_and_stores_what_the_command_stores(random_series, tmp_path, prefect_harness):
    by_command = tmp_path / "command"  # `dormant track`'s request, run by its flow (on the session's server)
    args = ["track", "--model", random_series, "--store", by_command, "--limit", "8", "--tau", "ahon=q0.2"]
    request = request_from_args(build_parser().parse_args([*map(str, args), "--max", "2", "--no-report"]))
    assert track_flow(request).analysed == 2

    by_call = tmp_path / "call"
    env = cli_env(PREFECT_API_URL="http://127.0.0.1:9/api")  # nothing listens there
    r = subprocess.run(
        [sys.executable, "-c", CALL, str(random_series), str(by_call), json.dumps(OPTIONS)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == {"analysed": 2, "failed": 0, "prefect": False}
    assert store_rows(by_call) == store_rows(by_command)
    assert not (tmp_path / "reports").exists()  # no_report=True, as --no-report


def test_the_options_are_the_commands_long_options(random_series, tmp_path):
    request = TrackRequest.from_options(
        model=str(random_series), store=str(tmp_path), max_batch_tokens=512, no_report=True, revisions=["step*"]
    )
    assert (request.max_batch_tokens, request.report, request.selection.revisions_glob) == (512, False, ("step*",))
    assert request == TrackRequest(
        source=str(random_series), store=str(tmp_path), max_batch_tokens=512, report=False, selection=request.selection
    )
    with pytest.raises(ConfigError, match=r"track has no option 'max_tokenz' \(did you mean \"max_tokens\"\?\)"):
        TrackRequest.from_options(model=str(random_series), store=str(tmp_path), max_tokenz=5)
