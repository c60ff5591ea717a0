"""The kit's prompt suite (``data/prompts/suite.jsonl``) and long-context prompts of a chosen length.

The long-context entries are written by ``scripts/make_long_context.py``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

SUITE = Path(__file__).resolve().parent.parent / "data" / "prompts" / "suite.jsonl"
CATEGORIES = ("structured", "creative")  # the short-prompt categories
LONG_CONTEXT = "long_context"
# An agent-like loop: one request after another with the same output schema, so answers share long spans with
# earlier answers (suffix decoding's case); not part of the suite, and kept outside data/prompts so that adding it
# does not make the reference (which hashes data/prompts) stale
AGENT_LOOP = SUITE.parent.parent / "workloads" / "agent_loop.jsonl"


def load_suite(path: Path = SUITE) -> pd.DataFrame:
    """One row per prompt: id, category, subcategory, prompt."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    frame = pd.DataFrame(rows)
    unknown = set(frame["category"]) - {*CATEGORIES, LONG_CONTEXT}
    if unknown:
        raise ValueError(f"{path.name}: unknown categories {sorted(unknown)}")
    return frame


def ordered(category: str, path: Path = SUITE) -> pd.DataFrame:
    """The suite's prompts of ``category``, round-robin over subcategories (suite order within each), so the first
    n prompts of "structured" are JSON, SQL, code and extraction, not n JSON prompts."""
    if category not in (*CATEGORIES, LONG_CONTEXT):
        raise ValueError(f"unknown category {category!r}; choose one of {(*CATEGORIES, LONG_CONTEXT)}")
    frame = load_suite(path)
    chosen = frame[frame["category"] == category].copy()
    chosen["turn"] = chosen.groupby("subcategory", sort=False).cumcount()
    return chosen.sort_values("turn", kind="stable").reset_index(drop=True)


def prompts(category: str, n: int | None = None, path: Path = SUITE) -> list[str]:
    """The first ``n`` prompts of ``category`` (all when ``n`` is None), spread across its subcategories."""
    chosen = ordered(category, path)["prompt"].tolist()
    return chosen[:n] if n else chosen


def agent_loop_prompts(n: int | None = None) -> list[str]:
    """The agent-loop requests, in the loop's order."""
    rows = [json.loads(line)["prompt"] for line in AGENT_LOOP.read_text().splitlines() if line.strip()]
    return rows[:n]


def chat_token_ids(tokenizer, message: str) -> list[int]:
    """Token ids of one user message under the chat template, with the generation prompt."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": message}], add_generation_prompt=True)
    if isinstance(ids, Mapping):  # transformers 5 returns a BatchEncoding (a Mapping, not a dict)
        ids = ids["input_ids"]
    return list(ids)


def long_context_entries(path: Path = SUITE) -> list[dict]:
    """The suite's long-context entries (document, question, answer), in suite order."""
    frame = load_suite(path)
    return frame[frame["category"] == LONG_CONTEXT].to_dict("records")


def long_context_prompt(tokenizer, prompt_tokens: int, entry: int = 0, path: Path = SUITE) -> tuple[str, int]:
    """A long-context chat prompt of close to (at most) ``prompt_tokens`` tokens, like a RAG request.

    Entry ``entry``'s document comes first, then the other entries' documents as further retrieved
    context, cut at a line boundary; the entry's question closes the message. The question's answer
    lies in the first two lines of its document, so every length that fits it keeps it answerable.
    Returns the user message and its exact token count under the chat template.
    """
    entries = long_context_entries(path)
    first = entries[entry % len(entries)]
    lines = [line for e in [first, *(e for e in entries if e is not first)] for line in e["document"].splitlines()]

    def measure(n_lines: int) -> tuple[str, int]:
        message = f"{first['intro']}\n\n" + "\n".join(lines[:n_lines]) + f"\n\n{first['question']}"
        return message, len(chat_token_ids(tokenizer, message))

    if measure(2)[1] > prompt_tokens:
        raise ValueError(f"{prompt_tokens} tokens is too short for two lines of a document and a question")
    if measure(len(lines))[1] <= prompt_tokens:
        raise ValueError(f"{prompt_tokens} tokens is longer than all long-context documents together")
    low, high = 2, len(lines)  # measure(low) fits, measure(high) does not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if measure(mid)[1] <= prompt_tokens else (low, mid)
    return measure(low)
