"""Write docs/measurements.md: the hand-written docs/measurements.head.md, then tables generated from the reference
results the kit ships (data/reference/<profile>/ with its provenance.json, and data/reference/*.csv), so the numbers
in the document cannot drift from the data.

Run: ``python scripts/write_measurements_doc.py`` (writes the file) or ``--check`` (exits 1, naming the command to
run, when the file differs from what it would write). The output depends only on the inputs: no generation time.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # helpers, for the acceptance summary
HEAD = ROOT / "docs" / "measurements.head.md"
OUT = ROOT / "docs" / "measurements.md"
REFERENCE = ROOT / "data" / "reference"
COMMAND = "python scripts/write_measurements_doc.py"

# Columns shown, in this order, where a CSV has them; (low, high) columns are folded into their estimate's cell.
SHOWN = [
    "layout", "category", "prompt_length", "prompt_tokens", "concurrency", "temperature", "draft_sample_method",
    "arm", "vs", "k", "torch_threads", "tok_per_s", "tpot_ms", "baseline_tpot_ms", "ttft_ms", "acceptance_rate",
    "mean_acceptance_length", "speedup", "decode_speedup", "tokens_per_verify_step", "c_eff", "pairs", "repetitions",
    "interval", "prompts", "tau", "point", "predicted", "measured", "inside", "acceptance_from", "group", "parameter",
    "value", "se", "rows", "median_ms", "min_ms", "max_ms",
]
INTERVALS = {"speedup": ("speedup_ci_low", "speedup_ci_high"), "decode_speedup": ("decode_ci_low", "decode_ci_high"),
             "tau": ("tau_low", "tau_high"), "predicted": ("low", "high"), "measured": ("measured_low", "measured_high")}
TITLES = {
    "prompt_length": "prompt length", "prompt_tokens": "prompt tokens (mean)", "draft_sample_method": "drafting",
    "vs": "baseline of", "torch_threads": "torch threads", "tok_per_s": "tok/s", "tpot_ms": "TPOT ms",
    "baseline_tpot_ms": "baseline TPOT ms", "ttft_ms": "TTFT ms", "acceptance_rate": "acceptance",
    "mean_acceptance_length": "mean acceptance length", "speedup": "speedup [low, high]",
    "decode_speedup": "decode-only speedup [low, high]", "tokens_per_verify_step": "tokens per verify step",
    "tau": "tokens per decode step [95% over prompts]", "predicted": "predicted [95% prediction interval]",
    "measured": "measured [its interval]", "median_ms": "ms (median over rounds)", "min_ms": "fastest round ms",
    "max_ms": "slowest round ms",
}
# Ratios and rates to two decimals (as the notebooks and the README quote them); other floats to 3 significant digits.
TWO_DECIMALS = {"acceptance_rate", "mean_acceptance_length", "speedup", "decode_speedup", "tokens_per_verify_step",
                "c_eff", "tau", "predicted", "measured", *(c for pair in INTERVALS.values() for c in pair)}
FOLDED = {c for pair in INTERVALS.values() for c in pair}


def number(value, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if column in TWO_DECIMALS:
        return f"{value:.2f}"
    if float(value).is_integer():
        return f"{int(value)}"
    magnitude = abs(value)
    return f"{value:.0f}" if magnitude >= 100 else f"{value:.1f}" if magnitude >= 10 else f"{value:.2f}"


def cell(row: pd.Series, column: str) -> str:
    if column == "vs" and "arm" in row.index and row["vs"] == row["arm"]:
        return ""  # an arm's own row; "paired with" names the arm a baseline row belongs to
    text = number(row[column], column)
    low, high = INTERVALS.get(column, (None, None))
    if low in row.index and high in row.index and text != "–":
        bounds = number(row[low], low), number(row[high], high)
        if bounds != (text, text):  # a baseline against itself: 1.00, no interval
            text += f" [{bounds[0]}, {bounds[1]}]"
    return text.replace("|", "\\|")


def table(frame: pd.DataFrame) -> str:
    """The CSV's rows as a Markdown table; columns with one value in every row are stated once above it instead."""
    frame = frame.astype(object).where(frame.notna(), None)
    shown = [c for c in SHOWN if c in frame.columns]
    constant = [c for c in frame.columns if c not in FOLDED and frame[c].map(repr).nunique() == 1]
    columns = [c for c in shown if c not in constant]
    hidden = [c for c in frame.columns if c not in shown and c not in constant and c not in FOLDED]
    lines = []
    if constant:
        lines.append("Same in every row: " + "; ".join(f"{c} = {number(frame[c].iloc[0], c)}" for c in constant)
                     + ".")
    if hidden:
        lines.append("Also in the file, not shown: " + ", ".join(f"`{c}`" for c in hidden) + ".")
    lines.append("")
    lines.append("| " + " | ".join(TITLES.get(c, c) for c in columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(cell(row, c) for c in columns) + " |")
    return "\n".join(lines)


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """A file's rows as the document shows them: per-prompt acceptance summarised per point (the file keeps every
    prompt), the speed model's parameters without their covariance matrix (the file keeps it), the matmul timings per
    row count over their rounds (the file keeps each round)."""
    if "prompt_index" in frame and "tau" in frame:
        from helpers.sweeps import acceptance_summary

        keys = [c for c in ("category", "draft_sample_method", "temperature", "method", "k") if c in frame]
        return acceptance_summary(frame, keys=tuple(keys))
    if {"round", "rows", "seconds"} <= set(frame.columns):
        ms = frame.assign(ms=frame["seconds"] * 1000).groupby("rows")["ms"]
        return pd.DataFrame({"median_ms": ms.median(), "min_ms": ms.min(), "max_ms": ms.max(),
                             "rounds": ms.size()}).reset_index()
    if "covariance" in frame:
        return frame.drop(columns=[c for c in ("covariance", "split") if c in frame])
    return frame


def provenance_section(folder: Path) -> str:
    record = json.loads((folder / "provenance.json").read_text())
    items = [("date", record.get("date")), ("commit", record.get("commit")), ("vLLM", record.get("vllm")),
             ("hardware", record.get("hardware")), ("CPU features", ", ".join(record.get("cpu_features") or [])),
             ("mode", record.get("mode"))]
    lines = [f"- {name}: {value}" for name, value in items if value]
    for path, digest in sorted((record.get("inputs") or {}).items()):
        lines.append(f"- sha256 of `{path}`: `{digest}`")
    files = record.get("files") or {}
    if files:
        lines += ["", "| file | rows | repetitions |", "|---|---|---|"]
        for name, info in sorted(files.items()):
            reps = ", ".join(str(r) for r in info.get("repetitions") or [])
            lines.append(f"| `{name}` | {info.get('rows')} | {reps} |")
    edits = record.get("edits") or []
    if edits:
        lines += ["", "Edits recorded after the run:", ""] + [f"- {edit}" for edit in edits]
    return "\n".join(lines)


def generated() -> str:
    parts = ["## Reference data", "",
             f"Generated by `{COMMAND}` from `data/reference/`; edit the data or `docs/measurements.head.md`, not "
             "this section. Speedups are the baseline's time per token over the arm's, with the interval the "
             "`interval` column names; `–` where a value does not apply (a baseline has no drafts)."]
    for folder in sorted(p for p in REFERENCE.iterdir() if p.is_dir() and (p / "provenance.json").exists()):
        rel = folder.relative_to(ROOT).as_posix()
        parts += ["", f"### `{rel}/`", "", provenance_section(folder)]
        for csv in sorted(folder.glob("*.csv")):
            parts += ["", f"#### `{csv.name}`", "", table(readable(pd.read_csv(csv)))]
    for csv in sorted(REFERENCE.glob("*.csv")):
        parts += ["", f"### `{csv.relative_to(ROOT).as_posix()}`", "", table(pd.read_csv(csv))]
    return "\n".join(parts)


def render() -> str:
    banner = (f"<!-- Generated by `{COMMAND}` from docs/measurements.head.md and data/reference/. "
              "Do not edit by hand: tests/test_measurements_doc.py fails when it is stale. -->")
    return banner + "\n\n" + HEAD.read_text().rstrip("\n") + "\n\n" + generated() + "\n"


def stale_reason() -> str | None:
    """None when docs/measurements.md is what this script writes; otherwise why not and what to run."""
    if not OUT.exists():
        return f"{OUT.relative_to(ROOT)} is missing: run `{COMMAND}`"
    if OUT.read_text() != render():
        return f"{OUT.relative_to(ROOT)} is stale (the reference data or the head changed): run `{COMMAND}`"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from what would be written")
    args = parser.parse_args(argv)
    if args.check:
        reason = stale_reason()
        if reason:
            print(reason, file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(ROOT)} is up to date")
        return 0
    OUT.write_text(render())
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
