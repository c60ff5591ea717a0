"""An attendee's own prompts, checked and written as the custom dataset that ``vllm bench serve`` reads.

Sources (:func:`load_prompts` picks the format by the file's extension):

* ``.jsonl``: one JSON object per line with a ``"prompt"`` string; other fields are ignored, so the kit's own
  suite (``data/prompts/suite.jsonl``: id, category, subcategory, prompt, and for long-context entries also
  intro, document, question, answer, where ``prompt`` is the full message) loads as it is. Blank lines are skipped.
* ``.csv``: a header row with a ``prompt`` column (other columns ignored); quoted fields may span lines.
* ``.txt``: plain text, split by ``text_mode``: ``"lines"`` (the default) makes every non-empty line one prompt;
  ``"paragraphs"`` separates prompts by one or more blank lines and keeps the line breaks inside a prompt (for
  multi-line prompts such as code). There is no automatic choice between the two: one stray blank line would
  silently merge prompts.

Pasted text goes through :func:`prompts_from_text` with the same two modes.

Everything that would fail later is checked by :func:`prepare_workload` before a server starts: a missing,
empty or unknown-format file, run settings out of range, and prompts too long for the server, counted the way
the server counts them (the chat template applied to one user message, as ``/v1/chat/completions`` does).

The file written for vLLM (:func:`write_custom_dataset`) has one ``{"prompt": ...}`` per line: the field that
``vllm.benchmarks.datasets.datasets.CustomDataset.load_data`` requires (it reads the JSONL with pandas and
raises unless there is a ``prompt`` column; the file name must end in ``.jsonl``, anything else raises
``NotImplementedError``). The output length comes from ``--custom-output-len`` (``helpers.bench.run_bench``
passes ``max_tokens``), so no ``output_tokens`` field is written.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".txt": "text"}
TEXT_MODES = ("lines", "paragraphs")
PROMPT_FIELD = "prompt"  # vllm/benchmarks/datasets/datasets.py, CustomDataset.load_data
PREVIEW_WORDS = 8


@dataclass(frozen=True)
class Prompt:
    text: str
    where: str  # where it came from, for error messages: "line 3", "row 4", "pasted line 2"


@dataclass(frozen=True)
class Workload:
    """Checked prompts and run settings, ready for :func:`write_custom_dataset` and ``bench.run_bench``."""

    prompts: tuple[str, ...]
    source: str
    max_tokens: int
    concurrency: int
    temperature: float
    num_prompts: int
    prompt_tokens: tuple[int, ...] | None = None  # under the chat template; None when not counted

    def __len__(self) -> int:
        return len(self.prompts)


def preview(text: str, words: int = PREVIEW_WORDS) -> str:
    """The first ``words`` words of ``text`` on one line, with an ellipsis when cut."""
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


# --------------------------------------------------------------------------------------------- reading


def prompts_from_text(text: str, mode: str = "lines", where: str = "pasted line") -> list[Prompt]:
    """Split pasted or file text into prompts: one per non-empty line, or (``"paragraphs"``) per blank-line block."""
    if mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {mode!r}")
    lines = text.splitlines()
    prompts: list[Prompt] = []
    if mode == "lines":
        for number, line in enumerate(lines, 1):
            if line.strip():
                prompts.append(Prompt(line.strip(), f"{where} {number}"))
        return prompts
    block: list[str] = []
    start = 0
    for number, line in enumerate([*lines, ""], 1):
        if line.strip():
            if not block:
                start = number
            block.append(line.rstrip())
        elif block:
            prompts.append(Prompt("\n".join(block).strip("\n"), f"{where} {start}"))
            block = []
    return prompts


def _read_jsonl(path: Path) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path.name} line {number} is not valid JSON ({error.msg}): {preview(line)!r}") from None
        if not isinstance(row, dict) or PROMPT_FIELD not in row:
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise ValueError(f"{path.name} line {number} has no {PROMPT_FIELD!r} field (it has {keys}); every line "
                             f'must be a JSON object such as {{"prompt": "Write a haiku about tea."}}')
        prompts.append(_checked(row[PROMPT_FIELD], f"line {number}", path))
    return prompts


def _read_csv(path: Path) -> list[Prompt]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if PROMPT_FIELD not in [c.strip() for c in columns]:
            raise ValueError(f"{path.name} has no {PROMPT_FIELD!r} column in its header row (columns: {columns})")
        column = next(c for c in columns if c.strip() == PROMPT_FIELD)
        # Row numbers count the header as row 1, as a spreadsheet shows them.
        return [_checked(row[column], f"row {number}", path) for number, row in enumerate(reader, 2)
                if any((value or "").strip() for value in row.values() if isinstance(value, str))]


def _checked(value: Any, where: str, path: Path) -> Prompt:
    if not isinstance(value, str):
        raise ValueError(f"{path.name} {where}: the prompt must be a string, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ValueError(f"{path.name} {where}: the prompt is empty")
    return Prompt(value, where)


def load_prompts(path: str | Path, text_mode: str = "lines") -> list[Prompt]:
    """The prompts in ``path`` (``.jsonl``, ``.csv`` or ``.txt``; see the module docstring), in file order."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"prompt file {path} does not exist")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give the path of one prompt file")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"unknown prompt file format {path.suffix or '(no extension)'!r} for {path.name}; use one of "
                         f"{sorted(FORMATS)}: JSONL with a 'prompt' field, CSV with a 'prompt' column, or plain text")
    if not path.read_text(encoding="utf-8").strip():
        raise ValueError(f"prompt file {path} is empty")
    if kind == "jsonl":
        prompts = _read_jsonl(path)
    elif kind == "csv":
        prompts = _read_csv(path)
    else:
        if text_mode not in TEXT_MODES:
            raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
        prompts = prompts_from_text(path.read_text(encoding="utf-8"), text_mode, where="line")
    if not prompts:
        raise ValueError(f"prompt file {path} holds no prompts")
    return prompts


# --------------------------------------------------------------------------------------------- checking


def check_run_settings(concurrency: int, max_tokens: int, temperature: float, num_prompts: int | None = None,
                       request_rate: float = math.inf) -> None:
    """Raise ``ValueError`` for a setting ``vllm bench serve`` or the server would reject or misread."""
    def whole(name: str, value: Any, low: int = 1) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")

    whole("concurrency", concurrency)
    whole("max_tokens", max_tokens)
    if num_prompts is not None:
        whole("num_prompts", num_prompts)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0 = greedy), got {temperature!r}")
    if isinstance(request_rate, bool) or not isinstance(request_rate, int | float) or not request_rate > 0:
        raise ValueError(f"request_rate must be > 0 requests/s (inf = all at once), got {request_rate!r}")


TokenCounter = Callable[[str], int]


def token_counter(tokenizer: Any) -> TokenCounter:
    """A function prompt -> token count as the server sees it (chat template, one user message, generation prompt).

    ``tokenizer`` is a model folder or Hugging Face id (loaded with ``transformers.AutoTokenizer``), a loaded
    tokenizer with a chat template, or already such a function.
    """
    if isinstance(tokenizer, str | Path):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
    if hasattr(tokenizer, "apply_chat_template"):
        from helpers.workloads import chat_token_ids

        def count(prompt: str) -> int:
            return len(chat_token_ids(tokenizer, prompt))

        count.chat_template = True  # counted as the server counts: chat template and generation prompt included
        return count
    if callable(tokenizer):
        return tokenizer
    raise TypeError(f"tokenizer must be a model path, a tokenizer or a function str -> int, got {type(tokenizer)}")


def check_lengths(prompts: Sequence[Prompt | str], count: TokenCounter, max_model_len: int,
                  max_tokens: int, shown: int = 5) -> list[int]:
    """Token counts of ``prompts``; raise ``ValueError`` naming every prompt longer than max_model_len - max_tokens."""
    limit = max_model_len - max_tokens
    if limit < 1:
        raise ValueError(f"max_tokens {max_tokens} leaves no room for a prompt within max_model_len {max_model_len}")
    prompts = [p if isinstance(p, Prompt) else Prompt(p, "") for p in prompts]
    counts = [int(count(p.text)) for p in prompts]
    too_long = [(i, n) for i, n in enumerate(counts) if n > limit]
    if too_long:
        lines = [f"  #{i + 1}{f' ({prompts[i].where})' if prompts[i].where else ''}: {n} tokens, "
                 f"{preview(prompts[i].text)!r}" for i, n in too_long[:shown]]
        if len(too_long) > shown:
            lines.append(f"  ... and {len(too_long) - shown} more: #" + ", #".join(str(i + 1) for i, _ in too_long[shown:]))
        raise ValueError(
            f"{len(too_long)} of {len(prompts)} prompts are longer than {limit} tokens (max_model_len {max_model_len} "
            f"minus max_tokens {max_tokens}{_how_counted(count)}). "
            "Shorten or drop them, or lower max_tokens:\n" + "\n".join(lines))
    return counts


def _how_counted(count: TokenCounter) -> str:
    return "; counted with the chat template, as the server counts them" if getattr(count, "chat_template", False) else ""


def prepare_workload(source: str | Path | Sequence[str], *, max_model_len: int, max_tokens: int = 128,
                     concurrency: int = 1, temperature: float = 0.0, num_prompts: int | None = None,
                     tokenizer: Any = None, text_mode: str = "lines", request_rate: float = math.inf) -> Workload:
    """Load and check a workload before any server starts.

    ``source``: a file path (``Path``, or a ``str`` naming an existing file or ending in a known extension),
    pasted text (any other ``str``), or a list of prompt strings. ``num_prompts`` defaults to the number of
    prompts; more than that repeats prompts (``vllm bench serve`` oversamples). ``tokenizer`` (see
    :func:`token_counter`) enables the length check; without it lengths are not checked.
    """
    check_run_settings(concurrency, max_tokens, temperature, num_prompts, request_rate)
    prompts, label = _prompts_from(source, text_mode)
    counts = None
    if tokenizer is not None:
        counts = tuple(check_lengths(prompts, token_counter(tokenizer), max_model_len, max_tokens))
    return Workload(tuple(p.text for p in prompts), label, max_tokens, concurrency, float(temperature),
                    num_prompts or len(prompts), counts)


def _looks_like_path(source: str) -> bool:
    """An existing file, or one line without spaces that ends in an extension ("my_prompts.jsonl")."""
    if "\n" in source or len(source) > 4096:
        return False
    path = Path(source.strip()).expanduser()
    try:
        if path.exists():
            return True
    except OSError:  # e.g. a pasted line longer than a file name may be
        return False
    return not any(c.isspace() for c in source.strip()) and bool(path.suffix)


def _prompts_from(source: str | Path | Sequence[str], text_mode: str) -> tuple[list[Prompt], str]:
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(str(source).strip()).expanduser()
        return load_prompts(path, text_mode), str(path)
    if isinstance(source, str):
        prompts = prompts_from_text(source, text_mode)
        if not prompts:
            raise ValueError("the pasted text holds no prompts (it is empty or only blank lines)")
        return prompts, "pasted text"
    items = list(source)
    if not items:
        raise ValueError("the list of prompts is empty")
    prompts = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"prompt #{i} of the list is {'empty' if isinstance(item, str) else repr(item)}; "
                             "every prompt must be a non-empty string")
        prompts.append(Prompt(item, f"list item {i}"))
    return prompts, "list"


# --------------------------------------------------------------------------------------------- writing


def write_custom_dataset(prompts: Workload | Sequence[str], path: str | Path) -> Path:
    """Write ``prompts`` as ``vllm bench serve --dataset-name custom`` reads them: one ``{"prompt": ...}`` per line."""
    texts = list(prompts.prompts if isinstance(prompts, Workload) else prompts)
    if not texts:
        raise ValueError("no prompts to write")
    path = Path(path)
    if path.suffix != ".jsonl":
        raise ValueError(f"vLLM's custom dataset must be a .jsonl file (CustomDataset.load_data), got {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({PROMPT_FIELD: text}, ensure_ascii=False) + "\n")
    return path
