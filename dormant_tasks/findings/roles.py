"""Head roles over training: per checkpoint, the share of heads in each role (Xu 2026; `engine.roles`), overall
and per layer, from the stored checkpoint means of the seven role functions.

A series tracked with the role functions (`--scores roles`, on any calibration set; the induction probe is the set
they are defined for) stores, per checkpoint and head, each function's mean over the inputs where it is defined
(`head_scores.score`); the selectivities are their ratios to the baseline's mean, the role the best class at the
threshold. `role_shares` reads them from the first calibration set of the series that holds every role function,
the induction probe's first. A role's share is a count over the checkpoint's heads, not a sample: it carries no
interval. Between consecutive checkpoints, each class's mask changes are counted (heads that took the role, heads
that left it) and each class's emergence is the first checkpoint where a head holds it; no test of confidence
is made on them (the dormancy masks' confident states have no counterpart for roles yet). A head whose selectivities are all undefined (its layer's window keeps every target from the last query)
counts as "undefined".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dormant_tasks.engine import ROLE_CLASSES, ROLE_IDS, ROLE_THRESHOLD, UNDEFINED, head_roles

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
class RoleChange:
    """Between two consecutive checkpoints, the heads that took a role and the heads that left it (a count of
    mask changes, as the dormancy masks' are before any test of confidence)."""

    from_revision: str
    to_revision: str
    role: str
    entered: int
    left: int


@dataclass
class RoleEmergence:
    """The first checkpoint at which some head holds the role (revision and tokens None: none does)."""

    role: str
    revision: str | None
    tokens: int | None


@dataclass
class RoleShares:
    calibration_id: str
    threshold: float
    checkpoints: list[RoleCheckpoint]
    undefined: dict[str, str]  # class -> why it is undefined on every head at some checkpoint (first seen)
    changes: list[RoleChange]  # per consecutive pair of checkpoints and class (ROLE_CLASSES)
    emergence: list[RoleEmergence]  # per class


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
    out: list[RoleCheckpoint] = []
    undefined: dict[str, str] = {}
    masks: list[np.ndarray] = []
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
        masks.append(found.role)  # [layer, head]
        for k, why in found.reasons.items():
            undefined.setdefault(k, f"{why} (first at {c['revision']})")
    changes = [
        RoleChange(a.revision, b.revision, r, int(((ma != r) & (mb == r)).sum()), int(((ma == r) & (mb != r)).sum()))
        for (a, ma), (b, mb) in zip(zip(out, masks), zip(out[1:], masks[1:]))
        for r in ROLE_CLASSES
    ]
    first = {r: next((c for c, m in zip(out, masks) if (m == r).any()), None) for r in ROLE_CLASSES}
    emergence = [
        RoleEmergence(r, None, None) if c is None else RoleEmergence(r, c.revision, c.tokens) for r, c in first.items()
    ]
    return RoleShares(view.calibration_id, threshold, out, undefined, changes, emergence)


# The findings table's labels of the role shares, by quantity id (findings/table.py's QUANTITIES takes them)
ROLE_LABELS = {
    "role_shares.threshold": "the selectivity a head needs for a role (Xu 2026)",
    "role_shares.checkpoints.*.roles.*.share": "share of heads in the {role} role at {revision}",
    "role_shares.changes.*.entered": "heads that took the {role} role from {from_revision} to {to_revision}",
    "role_shares.changes.*.left": "heads that left the {role} role from {from_revision} to {to_revision}",
    "role_shares.emergence.*.tokens": "training tokens at the first checkpoint with a {role} head",
}

__all__ = ["ROLE_LABELS", "RoleChange", "RoleCheckpoint", "RoleEmergence", "RoleShare", "RoleShares", "role_shares"]
