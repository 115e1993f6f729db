"""Head roles over training: per checkpoint, the share of heads in each role (Xu 2026; `engine.roles`), overall
and per layer, from the stored checkpoint means of the seven role functions.

A series tracked with the role functions (`--scores roles`, on any calibration set; the induction probe is the set
they are defined for) stores, per checkpoint and head, each function's mean over the inputs where it is defined
(`head_scores.score`); the selectivities are their ratios to the baseline's mean, the role the best class at the
threshold. `role_shares` reads them from the first calibration set of the series that holds every role function,
the induction probe's first. A role's share is a count over the checkpoint's heads, not a sample: it carries no
interval. A head whose selectivities are all undefined (its layer's window keeps every target from the last query)
counts as "undefined".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dormant_tasks.engine import ROLE_IDS, ROLE_THRESHOLD, UNDEFINED, head_roles

PROBE_KIND = "induction-probe"


@dataclass
class RoleShare:
    """One role at one checkpoint: its share of the heads and of each layer's heads (a row of the findings table,
    labelled with both)."""

    revision: str
    role: str
    share: float
    per_layer: list[float]


@dataclass
class RoleCheckpoint:
    """One checkpoint's roles: each role's share of heads (ROLES and "undefined"), overall and per layer."""

    revision: str
    tokens: int
    roles: list[RoleShare]

    @property
    def shares(self) -> dict[str, float]:
        return {r.role: r.share for r in self.roles}

    @property
    def layer_shares(self) -> dict[str, list[float]]:
        return {r.role: r.per_layer for r in self.roles}


@dataclass
class RoleShares:
    calibration_id: str
    threshold: float
    checkpoints: list[RoleCheckpoint]
    undefined: dict[str, str]  # class -> why it is undefined on every head at some checkpoint (first seen)


def role_shares(views, threshold: float = ROLE_THRESHOLD) -> RoleShares | None:
    """The role shares of a series (its `SeriesView`s, primary first) over its checkpoints; None when no
    calibration set of the series holds every role function."""
    holding = [v for v in views if set(ROLE_IDS) <= set(v.taus)]
    if not holding:
        return None
    view = sorted(holding, key=lambda v: not v.calibration_id.startswith(PROBE_KIND))[0]
    t = view.head_scores(ROLE_IDS, columns=["revision", "score_fn", "layer", "head_index", "score"])
    revision, fn = t.column("revision").to_numpy(zero_copy_only=False), t.column("score_fn").to_numpy(False)
    layer, head, score = (t.column(c).to_numpy() for c in ("layer", "head_index", "score"))
    n_layers, n_heads = int(layer.max()) + 1, int(head.max()) + 1
    out, undefined = [], {}
    for c in view.checkpoints:
        here = revision == c["revision"]
        means = {}
        for f in ROLE_IDS:
            m = np.full((n_layers, n_heads), np.nan)
            rows = here & (fn == f)
            m[layer[rows], head[rows]] = score[rows]
            means[f] = m
        found = head_roles(means, threshold)
        shares = found.shares() | {UNDEFINED: float((found.role == UNDEFINED).mean())}
        layers = found.layer_shares() | {UNDEFINED: [float(x) for x in (found.role == UNDEFINED).mean(-1)]}
        roles = [RoleShare(c["revision"], r, shares[r], layers[r]) for r in shares]
        out.append(RoleCheckpoint(c["revision"], int(c["tokens"]), roles))
        for k, why in found.reasons.items():
            undefined.setdefault(k, f"{why} (first at {c['revision']})")
    return RoleShares(view.calibration_id, threshold, out, undefined)


# The findings table's labels of the role shares, by quantity id (findings/table.py's QUANTITIES takes them)
ROLE_LABELS = {
    "role_shares.threshold": "the selectivity a head needs for a role (Xu 2026)",
    "role_shares.checkpoints.*.roles.*.share": "share of heads in the {role} role at {revision}",
}

__all__ = ["ROLE_LABELS", "RoleCheckpoint", "RoleShare", "RoleShares", "role_shares"]
