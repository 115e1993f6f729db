"""The head roles' paragraph of the findings (`dormant findings`, summary.md, the report): findings/roles.py's shares
at the first and the last checkpoint."""

from __future__ import annotations

from collections.abc import Callable

from dormant_tasks.checkpoints import format_tokens


def roles_line(rs, esc: Callable[[str], str]) -> str:
    """The head roles' shares at the first and the last checkpoint (findings/roles.py), the roles no head holds
    anywhere left out."""
    held = [r for r in rs.checkpoints[0].shares if any(c.shares[r] for c in rs.checkpoints)]

    def at(c) -> str:
        return f"{esc(c.revision)} ({format_tokens(c.tokens)} tokens): " + ", ".join(
            f"{r} {100 * c.shares[r]:.1f}%" for r in held
        )

    first, last = rs.checkpoints[0], rs.checkpoints[-1]
    emerged = [f"{e.role} at {esc(e.revision)} ({format_tokens(e.tokens)} tokens)" for e in rs.emergence if e.revision]
    firsts = f" First held: {', '.join(emerged)}." if emerged else " No head holds a role at any checkpoint."
    undefined = f" Undefined: {'; '.join(f'{k}: {v}' for k, v in rs.undefined.items())}." if rs.undefined else ""
    return (
        f"4. **Head roles** (Xu 2026: a head's role is the class whose target its last query attends to at least "
        f"{rs.threshold:g}x its baseline, ratio of means over {esc(rs.calibration_id)}). Shares of heads at "
        f"{at(first)}; at {at(last)}.{firsts}{undefined}"
    )
