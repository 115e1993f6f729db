"""Progress on a pipe or file (`dormant_tasks.progress.LogProgress`): plain lines, at least every EVERY_S seconds,
driven here by a fake clock (no sleeping, no timed assertion)."""

from __future__ import annotations

import io

from dormant_tasks.progress import EVERY_S, LogProgress, progress_bar, waiting


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_a_line_at_start_then_whenever_the_last_is_every_seconds_old_and_at_the_end():
    clock, out = FakeClock(), io.StringIO()
    bar = LogProgress(total=600, desc="pretrain-tiny", unit="step", stream=out, clock=clock, heartbeat=False)
    assert _lines(out) == ["pretrain-tiny: 0/600 step, 0s elapsed (started)"]
    for _ in range(50):  # 50 quick steps within one interval: no line
        clock.now += 0.1
        bar.update(1)
    assert len(_lines(out)) == 1
    clock.now += EVERY_S  # one slow step: the next update prints, with the estimate: 549 steps at 25 s / 51
    bar.set_postfix(loss="3.210")
    bar.update(1)
    assert _lines(out)[-1] == "pretrain-tiny: 51/600 step, 25s elapsed, about 4m29s left, loss=3.210"
    bar.close()
    assert _lines(out)[-1].endswith("(stopped)")  # 51 of 600: the step ended early
    bar.close()  # closing twice prints once
    assert len(_lines(out)) == 3


def test_the_heartbeat_prints_while_one_item_blocks():
    """A download or a long batch updates nothing: `tick` (what the heartbeat thread calls every second) still
    prints once the last line is EVERY_S old, so a log never goes silent for longer than that (+ 1 s)."""
    clock, out = FakeClock(), io.StringIO()
    bar = LogProgress(total=4, initial=1, desc="checkpoints", unit="ckpt", stream=out, clock=clock, heartbeat=False)
    assert _lines(out) == ["checkpoints: 1/4 ckpt, 0s elapsed (started)"]
    silent = []
    last_line_at = clock.now
    for _ in range(200):  # 200 s of one blocked checkpoint, the heartbeat ticking each second
        clock.now += 1.0
        if bar.tick():
            silent.append(clock.now - last_line_at)
            last_line_at = clock.now
    assert len(silent) == 200 // int(EVERY_S) and max(silent) <= EVERY_S < 30
    bar.update(3)
    bar.close()
    assert _lines(out)[-1] == "checkpoints: 4/4 ckpt, 3m20s elapsed (done)"


def test_iterating_counts_each_item_and_closes():
    clock, out = FakeClock(), io.StringIO()
    seen = []
    for step in LogProgress(range(1, 4), desc="steps", unit="step", stream=out, clock=clock, heartbeat=False):
        seen.append(step)
        clock.now += EVERY_S
    assert seen == [1, 2, 3]
    assert _lines(out)[0] == "steps: 0/3 step, 0s elapsed (started)"
    assert _lines(out)[-1] == "steps: 3/3 step, 1m00s elapsed (done)"


def test_the_real_heartbeat_thread_stops_on_close():
    bar = LogProgress(total=1, desc="x", unit="it", stream=io.StringIO())
    bar.close()
    assert bar._thread is not None and not bar._thread.is_alive()


def test_off_the_terminal_the_bar_is_plain_lines_and_disabled_is_silent(capsys):
    bar = progress_bar(total=2, desc="scoring", unit="batch")  # pytest's captured stderr is no terminal
    assert isinstance(bar, LogProgress)
    bar.update(2)
    bar.close()
    assert capsys.readouterr().err.splitlines()[-1] == "scoring: 2/2 batch, 0s elapsed (done)"
    off = progress_bar(range(3), desc="scoring", unit="batch", enabled=False)
    assert list(off) == [0, 1, 2]
    off.update(1)
    off.close()
    assert capsys.readouterr().err == ""


def test_waiting_is_silent_when_quick_and_prints_time_only_lines_when_slow(capsys):
    with waiting("download org/model@main"):  # a quick step (or a quick failure): no line at all
        pass
    assert capsys.readouterr().err == ""
    clock, out = FakeClock(), io.StringIO()
    slow = LogProgress(
        desc="download org/model@main", unit="", stream=out, clock=clock, heartbeat=False, quiet_start=True
    )
    for _ in range(45):
        clock.now += 1.0
        slow.tick()
    slow.close()
    assert _lines(out) == [
        "download org/model@main: 20s elapsed",
        "download org/model@main: 40s elapsed",
        "download org/model@main: 45s elapsed (done)",
    ]


def test_an_early_step_prints_its_first_line_after_one_second_then_every_interval(capsys):
    """Issue 30 item 8: a new series' listing (hashing its checkpoints) speaks within its first seconds, not after
    EVERY_S; a quick one, or a quick failure, prints nothing."""
    from dormant_tasks.progress import early

    with early("dormant track: m: listing"):
        pass
    assert capsys.readouterr().err == ""
    clock, out = FakeClock(), io.StringIO()
    step = LogProgress(
        desc="listing", unit="", stream=out, clock=clock, heartbeat=False, quiet_start=True, first_after=1.0
    )
    clock.now += 0.5
    step.tick()
    assert _lines(out) == []
    clock.now += 0.5
    step.tick()
    for _ in range(21):
        clock.now += 1.0
        step.tick()
    step.close()
    assert _lines(out) == ["listing: 1s elapsed", "listing: 21s elapsed", "listing: 22s elapsed (done)"]
