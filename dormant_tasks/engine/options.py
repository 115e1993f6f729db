"""What `score_texts` computes and how it cuts and batches its inputs: `ScoringOptions`, stdlib only, so a request
that builds one (`tracking.TrackRequest.scoring`) loads no torch."""

from __future__ import annotations

from dataclasses import dataclass

from dormant_tasks.engine.score_functions import parse_score_functions
from dormant_tasks.errors import ConfigError


@dataclass(frozen=True)
class ScoringOptions:
    """What `score_texts` computes and how it cuts and batches its inputs (`TrackRequest.scoring` builds one from a
    track request). Out-of-range values are refused here, in one line naming the option."""

    score_fns: tuple[str, ...] | None = None  # ids, in this order (None: every function)
    batch_size: int | None = None  # inputs per forward pass (None: the device's default, engine.batching)
    max_tokens: int | None = None  # tokens kept of each input (None: the model's context, also the upper bound)
    max_batch_tokens: int | None = None  # padded tokens per forward pass (None: the device's default)
    seed: int = 0  # of the `random` baseline
    query_block: int | None = None  # force the float32 query-block path (scoring_pass)

    def __post_init__(self):
        object.__setattr__(self, "score_fns", tuple(parse_score_functions(self.score_fns)))
        for name in ("batch_size", "max_tokens", "max_batch_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}")


__all__ = ["ScoringOptions"]
