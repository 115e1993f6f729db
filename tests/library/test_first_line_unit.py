"""`progress.FirstLine`: a command's first line when it is slow to print one (issue 62), driven by a fake clock."""

from __future__ import annotations

import io

from dormant_tasks.progress import FirstLine, _Watched


def test_the_line_comes_after_a_second_of_silence_repeats_and_stops_at_the_first_output():
    now = [100.0]
    out = io.StringIO()
    line = FirstLine("track", out, started=100.0, every=20.0, clock=lambda: now[0], heartbeat=False)
    now[0] = 100.9
    assert not line.tick() and out.getvalue() == ""
    now[0] = 101.0
    assert line.tick()
    assert out.getvalue() == "dormant track: starting (loading its libraries): 1s elapsed\n"
    now[0] = 110.0
    assert not line.tick()  # the next one after `every`
    line.phase = "waiting for the store"
    now[0] = 121.0
    assert line.tick() and out.getvalue().splitlines()[-1] == "dormant track: waiting for the store: 21s elapsed"
    watched = _Watched(io.StringIO(), line.done)
    watched.write("store: data/store\n")  # the command's own output: no line after it
    now[0] = 200.0
    assert not line.tick() and len(out.getvalue().splitlines()) == 2


def test_a_quick_command_prints_no_such_line():
    now = [0.0]
    out = io.StringIO()
    line = FirstLine("status", out, started=0.0, clock=lambda: now[0], heartbeat=False)
    now[0] = 0.4
    _Watched(io.StringIO(), line.done).write("series: ...\n")
    now[0] = 5.0
    assert not line.tick() and out.getvalue() == ""
