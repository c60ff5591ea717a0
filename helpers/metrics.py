"""Speculation counters of one engine, snapshotted and differenced.

vLLM's counters are cumulative for the engine's lifetime, so a run's own numbers are the difference of a
snapshot after it and one before it, on the same engine.

Why not ``llm.get_metrics()`` alone: it reads prometheus_client's process-global ``REGISTRY``, and every new
engine's ``PrometheusStatLogger`` first unregisters all ``vllm:`` collectors there
(``vllm.v1.metrics.loggers.PrometheusStatLogger.__init__`` calls ``unregister_vllm_metrics()``). With two
engines alive in one process, ``get_metrics()`` on the older one returns the *newer* engine's counters, so a
run on the older engine reads as 0 drafts (measured: a draft-model engine reused after an n-gram engine was
built reported 0 drafts while its own logger counted 144). ``snapshot`` therefore reads the engine's own
counters from its stat logger, and falls back to ``get_metrics()`` where that structure is absent.
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


def own_counters(llm) -> SpecCounters | None:
    """The engine's own counters, read from its ``PrometheusStatLogger``; None if vLLM has no such logger."""
    manager = getattr(llm.llm_engine, "logger_manager", None)
    for logger in getattr(manager, "stat_loggers", []):
        prom = getattr(logger, "spec_decoding_prom", None)
        if prom is None:
            continue
        if not prom.spec_decoding_enabled:
            return SpecCounters()

        def total(children) -> int:  # each child's "<name>_total" sample, through prometheus_client's collect()
            return sum(int(sample.value) for child in children for family in child.collect()
                       for sample in family.samples if sample.name.endswith("_total"))

        per_engine = list(prom.counter_spec_decode_num_accepted_tokens_per_pos.values())
        per_position = tuple(total(column) for column in zip(*per_engine)) if per_engine else ()
        return SpecCounters(total(prom.counter_spec_decode_num_drafts.values()),
                            total(prom.counter_spec_decode_num_draft_tokens.values()),
                            total(prom.counter_spec_decode_num_accepted_tokens.values()), per_position)
    return None


def snapshot(llm) -> SpecCounters:
    own = own_counters(llm)
    return own if own is not None else counters_from(llm.get_metrics())
