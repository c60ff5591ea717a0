"""The kit's prompt suite (``data/prompts/suite.jsonl``) and long-context prompts of a chosen length."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

SUITE = Path(__file__).resolve().parent.parent / "data" / "prompts" / "suite.jsonl"
CATEGORIES = ("structured", "creative")


def load_suite(path: Path = SUITE) -> pd.DataFrame:
    """One row per prompt: id, category, subcategory, prompt."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    frame = pd.DataFrame(rows)
    unknown = set(frame["category"]) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"{path.name}: unknown categories {sorted(unknown)}")
    return frame


def prompts(category: str, n: int | None = None, path: Path = SUITE) -> list[str]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; choose one of {CATEGORIES}")
    frame = load_suite(path)
    chosen = frame[frame["category"] == category]["prompt"].tolist()
    return chosen[:n] if n else chosen


SITES = ["north depot", "river plant", "east yard", "harbour office", "hill station", "west mill"]
STATES = ["running normally", "stopped for repairs", "running at half speed", "waiting for parts", "idle"]


def log_document(records: int, seed: int = 0) -> tuple[str, str, str]:
    """A maintenance log of ``records`` entries, a question about one entry, and its answer."""
    rng = random.Random(seed)
    lines = []
    for day in range(1, records + 1):
        site, state = rng.choice(SITES), rng.choice(STATES)
        temp = rng.randint(12, 38)
        lines.append(f"Day {day}: the pump at the {site} was {state}; the temperature was {temp} degrees.")
    pick = rng.randrange(records)
    question_day = pick + 1
    answer = lines[pick].split(" was ")[1].split(";")[0]
    question = f"According to the log, how was the pump on day {question_day}? Answer in a few words."
    return "\n".join(lines), question, answer


def chat_token_ids(tokenizer, message: str) -> list[int]:
    """Token ids of one user message under the chat template, with the generation prompt."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": message}], add_generation_prompt=True)
    if isinstance(ids, Mapping):  # transformers 5 returns a BatchEncoding (a Mapping, not a dict)
        ids = ids["input_ids"]
    return list(ids)


def long_context_prompt(tokenizer, prompt_tokens: int, seed: int = 0) -> tuple[str, int]:
    """A log document + question whose chat prompt is close to (at most) ``prompt_tokens`` tokens.

    Returns the user message and its exact token count under the chat template.
    """
    def measure(records: int) -> tuple[str, int]:
        document, question, _ = log_document(records, seed)
        message = f"Here is a maintenance log.\n\n{document}\n\n{question}"
        return message, len(chat_token_ids(tokenizer, message))

    if measure(1)[1] > prompt_tokens:
        raise ValueError(f"{prompt_tokens} tokens is too short for a document and a question")
    low, high = 1, 2
    while measure(high)[1] <= prompt_tokens:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if measure(mid)[1] <= prompt_tokens else (low, mid)
    return measure(low)
