"""Replay greedy draft-model speculation step by step with transformers, on the same weights as vLLM.

vLLM reports only totals offline (drafts, proposed, accepted, per position). To show *which*
tokens were accepted, this module re-runs the algorithm itself: the target's prefill gives the
first token; then each step the draft proposes k tokens greedily, the target scores the context
plus the k proposals in one pass, keeps the longest prefix that matches its own argmax, and
adds one token of its own (the correction at the first mismatch, or a bonus after k matches).
The notebook checks the replay's totals against vLLM's counters for the same prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Step:
    proposed: tuple[int, ...]
    accepted: int
    target_token: int  # the correction (accepted < k) or the bonus token (accepted == k)

    @property
    def emitted(self) -> tuple[int, ...]:
        return (*self.proposed[: self.accepted], self.target_token)


@dataclass
class Replay:
    first_token: int  # from the target's prefill
    steps: list[Step]
    output: list[int]

    @property
    def drafts(self) -> int:
        return len(self.steps)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)

    @property
    def draft_tokens(self) -> int:
        return sum(len(s.proposed) for s in self.steps)


class _Cached:
    """A causal LM with a KV cache that can be cut back after a rejection."""

    def __init__(self, model):
        from transformers import DynamicCache

        self.model, self.cache, self.length = model, DynamicCache(), 0

    @torch.no_grad()
    def logits(self, ids: list[int]) -> torch.Tensor:
        """Logits for positions ``self.length .. len(ids)-1`` (the cache then holds all of ``ids``)."""
        new = torch.tensor([ids[self.length:]])
        out = self.model(input_ids=new, past_key_values=self.cache, use_cache=True)
        self.length = len(ids)
        return out.logits[0]

    def crop(self, length: int) -> None:
        if length < self.length:
            self.cache.crop(length)
            self.length = length


def replay_greedy(target, draft, prompt_ids: list[int], max_new_tokens: int, k: int,
                  stop_ids: set[int] = frozenset()) -> Replay:
    if k < 1 or max_new_tokens < 1:
        raise ValueError("k and max_new_tokens must be >= 1")
    t, d = _Cached(target.eval()), _Cached(draft.eval())
    first = int(t.logits(list(prompt_ids))[-1].argmax())
    output, steps = [first], []
    while len(output) < max_new_tokens and output[-1] not in stop_ids:
        context = list(prompt_ids) + output
        proposal: list[int] = []
        for _ in range(k):
            proposal.append(int(d.logits(context + proposal)[-1].argmax()))
        t.crop(len(context) - 1)  # re-score from the last emitted token onwards
        predicted = t.logits(context + proposal)[-(k + 1):].argmax(-1).tolist()
        accepted = 0
        while accepted < k and proposal[accepted] == predicted[accepted]:
            accepted += 1
        step = Step(tuple(proposal), accepted, predicted[accepted])
        steps.append(step)
        for token in step.emitted:
            if len(output) < max_new_tokens and output[-1] not in stop_ids:
                output.append(token)
        keep = len(context) + accepted
        t.crop(keep)
        d.crop(keep)
    return Replay(first, steps, output)


COLOURS = {"accepted": "#b7e4c7", "rejected": "#f4a3a3", "target": "#a9c7f5"}


def step_html(replay: Replay, decode, max_steps: int = 40) -> str:
    """The emitted text, coloured: green accepted draft tokens, blue tokens the target produced itself.

    Under each step the rejected draft token is shown struck through in red.
    """
    def span(text: str, kind: str, strike: bool = False) -> str:
        import html

        style = f"background:{COLOURS[kind]};padding:1px 2px;border-radius:3px;white-space:pre-wrap"
        if strike:
            style += ";text-decoration:line-through"
        return f'<span style="{style}">{html.escape(text)}</span>'

    parts = [span(decode([replay.first_token]), "target")]
    for step in replay.steps[:max_steps]:
        parts += [span(decode([tok]), "accepted") for tok in step.proposed[: step.accepted]]
        if step.accepted < len(step.proposed):
            parts.append("<sup>" + span(decode([step.proposed[step.accepted]]), "rejected", strike=True) + "</sup>")
        parts.append(span(decode([step.target_token]), "target"))
        parts.append('<span style="color:#888">|</span>')
    legend = " ".join(span(name, kind) for kind, name in [
        ("target", "target's own token (prefill, correction or bonus)"), ("accepted", "accepted draft token"),
        ("rejected", "first rejected draft token")])
    return f"<div style='font-family:monospace;line-height:1.9'>{legend}<br><br>{''.join(parts)}</div>"
