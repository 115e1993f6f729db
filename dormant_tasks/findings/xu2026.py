"""Xu 2026's emergence table as a reference: the revisions Xu tracked of each model, the dtype Xu ran it in, and the
share of first-token (BOS) heads the paper states at some of them (`data/xu_2026_roles.json`, with its citation),
beside the shares a tracked series gives (`findings.role_shares`): `dormant reproduce xu-2026`.

The list of revisions is data: each is looked up by name in the series' listing, never built from a step number;
a name the listing lacks is reported, not guessed. A published share the paper does not give is None and stays
"not given" in the comparison.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.paths import bundled_file

REFERENCE_FILE = "xu_2026_roles.json"
STUDY = "xu-2026"


@dataclass(frozen=True)
class XuModel:
    model_id: str
    dtype: str
    dtype_source: str
    revisions: tuple[str, ...]
    first: tuple[float | None, ...]  # the published % of first-token heads per revision (None: not given)


@cache
def reference() -> dict:
    return json.loads(bundled_file(REFERENCE_FILE).read_text(encoding="utf-8"))


def xu_model(model_id: str) -> XuModel:
    """The reference of one of Xu's models; ConfigError naming the three for another id."""
    models = reference()["models"]
    if model_id not in models:
        raise ConfigError(
            f"{STUDY} has no table for {model_id!r}{did_you_mean(model_id, models)}; choose one of {', '.join(models)}"
        )
    m = models[model_id]
    revs = m["revisions"]
    return XuModel(
        model_id, m["dtype"], m["dtype_source"], tuple(r["name"] for r in revs), tuple(r["first"] for r in revs)
    )


@dataclass(frozen=True)
class ComparisonRow:
    revision: str
    tokens: int | None  # None: not tracked
    ours: dict[str, float] | None  # role -> % of heads (None: not tracked)
    published_first: float | None  # % (None: not given)

    @property
    def difference(self) -> float | None:
        """Ours minus published, in points of % of heads, for the first-token role (None where either is missing)."""
        if self.ours is None or self.published_first is None:
            return None
        return self.ours["first"] - self.published_first


def comparison(model: XuModel, shares) -> list[ComparisonRow]:
    """One row per revision of Xu's list, in its order: our shares (from `findings.role_shares`, None: the series
    holds no such checkpoint) beside the published first-token share."""
    ours = {} if shares is None else {c.revision: c for c in shares.checkpoints}
    rows = []
    for name, first in zip(model.revisions, model.first):
        c = ours.get(name)
        pct = None if c is None else {r: 100 * v for r, v in c.shares.items()}
        rows.append(ComparisonRow(name, None if c is None else c.tokens, pct, first))
    return rows


def format_comparison(model: XuModel, rows: list[ComparisonRow]) -> str:
    """The table `dormant reproduce xu-2026` prints, with its citation and what each column is."""

    def pct(x: float | None, missing: str) -> str:
        return missing if x is None else f"{x:.1f}"

    lines = [
        f"{model.model_id}: head roles on the induction probe ({model.dtype}, as Xu ran it: {model.dtype_source})",
        f"{'revision':<26} {'ours first %':>12} {'published':>10} {'difference':>10} {'ours induction %':>17}",
    ]
    for r in rows:
        ours_first = pct(None if r.ours is None else r.ours["first"], "not tracked")
        induction = pct(None if r.ours is None else r.ours["induction"], "-")
        diff = "-" if r.difference is None else f"{r.difference:+.1f}"
        lines.append(
            f"{r.revision:<26} {ours_first:>12} {pct(r.published_first, 'not given'):>10} {diff:>10} {induction:>17}"
        )
    lines.append(f"published: {reference()['citation']}")
    return "\n".join(lines)


__all__ = ["STUDY", "ComparisonRow", "XuModel", "comparison", "format_comparison", "reference", "xu_model"]
