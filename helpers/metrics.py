"""Speculation counters from ``llm.get_metrics()``, snapshotted and differenced.

vLLM's counters are cumulative for the engine's lifetime (and process-global), so a run's own
numbers are the difference of a snapshot after it and one before it, on the same engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclass(frozen=True)
class SpecCounters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = field(default_factory=tuple)

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        width = max(len(self.per_position), len(before.per_position))
        pad = lambda xs: tuple(xs) + (0,) * (width - len(xs))  # noqa: E731
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(a - b for a, b in zip(pad(self.per_position), pad(before.per_position))),
        )

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per target step: 1 (the target's own) + accepted drafts per step. NaN with no drafts."""
        return 1 + self.accepted / self.drafts if self.drafts else float("nan")

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens. NaN with no drafts."""
        return self.accepted / self.draft_tokens if self.draft_tokens else float("nan")

    @property
    def position_acceptance(self) -> list[float]:
        """P(draft position i accepted) = accepted at i / number of drafts."""
        return [n / self.drafts if self.drafts else float("nan") for n in self.per_position]

    def as_dict(self) -> dict:
        return {
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "position_acceptance": self.position_acceptance,
            "accepted_per_position": list(self.per_position),
        }


def counters_from(metrics) -> SpecCounters:
    """Sum the speculation counters in a ``get_metrics()`` list (absent ones count as 0)."""
    totals = {DRAFTS: 0, DRAFT_TOKENS: 0, ACCEPTED: 0}
    per_position: list[int] = []
    for metric in metrics:
        if metric.name in totals:
            totals[metric.name] += int(metric.value)
        elif metric.name == PER_POSITION:
            values = [int(v) for v in metric.values]
            per_position += [0] * (len(values) - len(per_position))
            for i, value in enumerate(values):
                per_position[i] += value
    return SpecCounters(totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED], tuple(per_position))


def snapshot(llm) -> SpecCounters:
    return counters_from(llm.get_metrics())
