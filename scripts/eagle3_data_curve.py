"""What more training data buys the kit's EAGLE-3 head: tokens per verify step against training sequences.

Trains the kit's head recipe (``make drafts``: soft labels, base + extra sets, 4 epochs) on seeded random subsets of
its training answers (``--sizes``) into build/data-curve/, then measures in vLLM each of those heads and the committed
``eagle3`` (all the answers) on the structured suite at T = 0: the prompts 04 times, its answer length, one batched
untimed run per head (vLLM's per-request counters give each prompt's tokens per verify step). The speed model that
04 and 06 use (``helpers.speed_model``) turns each head's acceptance into a predicted speedup, one request at a
time, with its interval over the prompts.

``helpers.data_curve`` fits tau = a_prompt + b ln N on the subsets alone; the committed head is the check on a point
not fitted (a 95% prediction interval for one head). Then, refitted on every head: at how many training sequences the
line puts a predicted speedup of ``--goal`` with the interval's low end above ``--low`` (the speed target of the
kit's issue on EAGLE-3), each prompt's tau capped at k + 1; beyond the largest head trained, an extrapolation. Writes data/measurements/eagle3-data-curve-<date>.csv (one row per head and prompt).
Each subset's head is a checkpoint: one already in build/data-curve/eagle3.json is not trained again.

``--epochs``, ``--batch`` and ``--bf16`` train heads with another recipe (e.g. ``--sizes 1486 --epochs 5``: all the
answers for 5 epochs) into a CSV of their own. ``--analyse CSV --others CSV...`` then checks the subsets' line in
ln(optimizer steps) and in ln(training passes, sequences x epochs) on those heads, and says how many passes, and how
many minutes of training at the best head's rate, the goal needs.

``--prompts-file`` measures the heads on another file's structured prompts (``data/workloads/structured_check.jsonl``:
8 prompts written before any head was measured on them, on shapes and subjects no training set was aimed at).

Run: ``.venv/bin/python scripts/eagle3_data_curve.py`` (about 40 minutes on 2 cores at the default sizes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "data-curve"
N_PROMPTS, MAX_TOKENS = 8, 64  # notebook 04's timed structured prompts and answer length (full mode)


SETS = ("base", "extra")  # the prompt sets of the curve's recipe (and of the committed head)


def recipe_suffix(epochs: int, batch: int, bf16: bool = False, sets: tuple[str, ...] = SETS) -> str:
    """How a head's recipe differs from the curve's (4 epochs, batch 8, float32, base + extra sets), for its name and
    its CSV's."""
    return ("" if epochs == 4 else f"-{epochs}ep") + ("" if batch == 8 else f"-b{batch}") + ("-bf16" if bf16 else "") \
        + "".join(f"-{s}" for s in sets if s not in SETS)


def head_name(n: int, epochs: int, batch: int = 8, bf16: bool = False, sets: tuple[str, ...] = SETS) -> str:
    return f"eagle3-{n}{recipe_suffix(epochs, batch, bf16, sets)}"


def train_subsets(sizes: list[int], epochs: int = 4, batch: int = 8, bf16: bool = False,
                  sets: tuple[str, ...] = SETS) -> dict[str, dict]:
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_eagle3

    manifest = OUT / "eagle3.json"
    for n in sizes:
        name = head_name(n, epochs, batch, bf16, sets)
        if name not in (json.loads(manifest.read_text()) if manifest.exists() else {}):
            train_eagle3.train(steps=4, epochs=epochs, batch=batch, lr=2e-3, vocab=8192, soft=True,
                               prompt_sets=sets, name=name, out_dir=OUT, sequences=n, bf16=bf16)
    return json.loads(manifest.read_text())


def measure(heads: dict[str, str], suite: Path | None = None) -> pd.DataFrame:
    """Each head's per-prompt acceptance on the structured suite (or ``suite``'s structured prompts) at T = 0 (one
    batched run per head)."""
    from helpers import profiles
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.sweeps import acceptance
    from helpers.workloads import SUITE, prompts

    cpu = profiles.get_profile("cpu")
    profiles.with_eagle_heads(cpu, heads, "cpu-data-curve")  # a profile like cpu whose heads are the ones measured here
    frames = []
    for name in heads:
        spec = EngineSpec("cpu-data-curve", "eagle3", k=cpu.k, draft=name)
        frames.append(acceptance(spec, prompts("structured", N_PROMPTS, suite or SUITE), 0.0, MAX_TOKENS).assign(head=name))
        shutdown_engine(spec)
        print(f"{name}: {frames[-1]['tau'].mean():.2f} tokens per verify step", flush=True)
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[93, 186, 371, 743])
    parser.add_argument("--epochs", type=int, default=4, help="epochs for the subsets (not 4: heads to check the "
                        "lines in ln(steps) and ln(passes) on, written to a CSV of their own for --others)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per optimizer step for the subsets (not 8: "
                        "more steps for the same data and time, written to a CSV of their own for --others)")
    parser.add_argument("--bf16", action="store_true", help="train the subsets under bfloat16 autocast "
                        "(train_eagle3.py --bf16), written to a CSV of their own for --others")
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="prompt sets the subsets learn from (not base "
                        "and extra: e.g. base extra code, written to a CSV of their own for --others)")
    parser.add_argument("--prompts-file", type=Path, help="measure on this file's first 8 structured prompts instead "
                        "of the suite's (e.g. data/workloads/structured_check.jsonl, prompts no training set was aimed "
                        "at), written to a CSV of its own; heads already trained are measured, not trained again")
    parser.add_argument("--goal", type=float, default=2.0)
    parser.add_argument("--low", type=float, default=1.8)
    parser.add_argument("--analyse", type=Path, help="analyse a CSV this script wrote, without training or measuring")
    parser.add_argument("--others", type=Path, nargs="+", help="with --analyse: CSVs of other heads (e.g. other "
                        "epochs or batch sizes) to check the lines in ln(steps) and ln(passes) on")
    args = parser.parse_args()
    if args.analyse:
        rows = pd.read_csv(args.analyse)
        analyse(rows, args.goal, args.low)
        if args.others:
            training_check(rows, pd.concat([pd.read_csv(p) for p in args.others], ignore_index=True), args.goal,
                           args.low)
        return

    from helpers import hardware
    from helpers.models import DEFAULT_EAGLE_HEAD, DRAFTS_DIR, read_eagle_manifest

    sets = tuple(args.sets)
    recipe = recipe_suffix(args.epochs, args.batch, args.bf16, sets)
    subsets = train_subsets(args.sizes, args.epochs, args.batch, args.bf16, sets)
    committed = read_eagle_manifest()[DEFAULT_EAGLE_HEAD]
    entries = {**{name: subsets[name] for name in (head_name(n, args.epochs, args.batch, args.bf16, sets) for n in args.sizes)},
               DEFAULT_EAGLE_HEAD: committed}
    paths = {name: str((OUT if name != DEFAULT_EAGLE_HEAD else DRAFTS_DIR) / e["dir"]) for name, e in entries.items()}
    rows = measure(paths, args.prompts_file)
    if args.prompts_file:
        recipe += f"-on-{args.prompts_file.stem}"
    for column, key in {"sequences": "training_sequences", "epochs": "epochs", "batch": "batch",
                        "training_steps": "training_steps", "training_seconds": "training_seconds"}.items():
        rows[column] = rows["head"].map({name: e[key] for name, e in entries.items()})
    rows["fitted"] = rows["head"] != DEFAULT_EAGLE_HEAD
    date = datetime.date.today().isoformat()
    path = ROOT / "data" / "measurements" / f"eagle3-data-curve-{date}{recipe}.csv"
    rows.assign(hardware=hardware.describe(), date=date).to_csv(path, index=False)
    print(f"-> {path.relative_to(ROOT)}")
    if not recipe and len(args.sizes) >= 3:
        analyse(rows, args.goal, args.low)


def analyse(rows: pd.DataFrame, goal: float, low: float, k: int = 4) -> None:
    """Print each head's predicted speedup, the fit on the subsets, its check on the head not fitted, and, refitted
    on every head, where the line meets the goal. ``rows``: :func:`measure`'s, with ``sequences`` and ``fitted``."""
    from helpers import data_curve, speed_model

    rows = rows.assign(prompt=rows["prompt_index"])
    fitted = speed_model.load_fitted("cpu")
    if fitted is None:
        raise SystemExit("no speed model: run notebook 06 or use the shipped reference (data/reference/cpu/)")
    costs, source = fitted

    def predicted(per_prompt: pd.DataFrame) -> dict:
        return speed_model.category_prediction(costs, per_prompt)

    summary = []
    for name, group in rows.groupby("head", sort=False):
        p = predicted(group)
        summary.append({"head": name, "sequences": int(group["sequences"].iloc[0]), "tau": group["tau"].mean(),
                        "speedup": p["speedup"], "low": p["low"], "high": p["high"]})
    print(pd.DataFrame(summary).round(3).to_string(index=False))
    curve = data_curve.fit(rows[rows["fitted"]])
    check = rows[~rows["fitted"]]
    n_check = int(check["sequences"].iloc[0])
    mean, lo, hi = curve.interval(n_check)
    print(f"fit on {sorted(set(rows[rows['fitted']]['sequences']))} sequences: tau = a_prompt + {curve.slope:.3f} ln N "
          f"(95% CI {curve.slope_interval()[0]:.3f} .. {curve.slope_interval()[1]:.3f}, over heads, {curve.dof} dof)")
    print(f"check at {n_check} sequences (not fitted): predicted {mean:.2f} [{lo:.2f}, {hi:.2f}] (95% prediction "
          f"interval for one head), measured {check['tau'].mean():.2f} tokens per verify step")

    curve = data_curve.fit(rows)
    print(f"refitted on every head: slope {curve.slope:.3f} ({curve.slope_interval()[0]:.3f} .. "
          f"{curve.slope_interval()[1]:.3f}, {curve.dof} dof)")
    means = rows.groupby("sequences")["tau"].mean()
    local = (means.iloc[-1] - means.iloc[-2]) / np.log(means.index[-1] / means.index[-2])
    print(f"the last doubling ({means.index[-2]} -> {means.index[-1]} sequences): {means.iloc[-2]:.2f} -> "
          f"{means.iloc[-1]:.2f} tokens per verify step, a slope of {local:.3f} per unit of ln N")
    largest = check.set_index("prompt")["tau"]

    def at(taus: pd.Series) -> dict:
        """The speed model's prediction with each prompt at ``taus``, kept within the 1 to k + 1 tokens a verify
        step can give."""
        extrapolated = check.set_index("prompt").loc[taus.index].reset_index()
        extrapolated["tau"] = taus.clip(1, k + 1).to_numpy()
        return predicted(extrapolated)

    from helpers.models import DEFAULT_EAGLE_HEAD, read_eagle_manifest

    head = read_eagle_manifest()[DEFAULT_EAGLE_HEAD]
    per_sequence_epoch = head["training_seconds"] / (head["training_sequences"] * head["epochs"])
    rates = {"the line over every head": lambda n: curve.per_prompt(n),
             "the last doubling's rate": lambda n: largest + local * np.log(n / n_check)}
    for label, taus_at in rates.items():
        met = None
        for n in np.exp(np.linspace(np.log(n_check), np.log(1e9), 200)):
            p = at(taus_at(n))
            if p["speedup"] >= goal and p["low"] > low:
                met = n
                break
        if met is None:
            print(f"at {label}: {goal}x with a low end above {low}x is not reached by 1e9 sequences")
            continue
        hours = met * head["epochs"] * per_sequence_epoch / 3600
        print(f"at {label}: {goal}x with a low end (over prompts) above {low}x at about {met:,.0f} training sequences "
              f"({met / n_check:.1f} times the committed head's; an extrapolation), mean "
              f"{taus_at(met).clip(1, k + 1).mean():.2f} tokens per verify step ({p['speedup']:.2f}x "
              f"[{p['low']:.2f}, {p['high']:.2f}]); {head['epochs']} epochs over them would take about {hours:,.1f} "
              f"hours on this machine at the committed head's rate")
        if taus_at is rates["the line over every head"]:
            needed = float(curve.per_prompt(met).mean())
            low_b, high_b = curve.slope_interval()
            print(f"  the line's slope at its 95% CI ends puts that mean at {curve.sequences_for(needed, high_b):,.0f} "
                  f".. {curve.sequences_for(needed, low_b):,.0f} sequences")
    print(f"speed model: {source}")


def training_check(rows: pd.DataFrame, others: pd.DataFrame, goal: float, low: float, k: int = 4) -> None:
    """The line in ln(optimizer steps) and in ln(training passes: sequences x epochs) instead of ln(sequences):
    fitted on the subsets (whose steps, passes and sequences all grow together at 4 epochs and batch 8), checked on
    heads trained with other epochs or batch sizes (``others``: rows like :func:`measure`'s). Then, from the head with
    the most tokens per verify step, every prompt moved up by the same amount: the mean that meets the goal, the
    passes the passes line puts it at, and the training time at that head's seconds per pass."""
    from helpers import data_curve, speed_model

    others = others[~others["head"].isin(rows["head"])]  # a head measured in both files counts once
    checked = pd.concat([rows[~rows["fitted"]], others], ignore_index=True)
    units = {"steps": lambda f: f["training_steps"], "passes": lambda f: f["sequences"] * f["epochs"]}
    lines = {}
    for unit, of in units.items():
        fitted = rows[rows["fitted"]].assign(prompt=lambda f: f["prompt_index"], sequences=of)
        lines[unit] = curve = data_curve.fit(fitted)
        print(f"in ln({unit}), fitted on the subsets: slope {curve.slope:.3f} ({curve.slope_interval()[0]:.3f} .. "
              f"{curve.slope_interval()[1]:.3f}, {curve.dof} dof)")
        for name, group in checked.groupby("head", sort=False):
            at = int(of(group).iloc[0])
            mean, lo, hi = curve.interval(at)
            inside = "inside" if lo <= group["tau"].mean() <= hi else "OUTSIDE"
            print(f"  {name} ({int(group['sequences'].iloc[0])} sequences x {int(group['epochs'].iloc[0])} epochs, "
                  f"batch {int(group['batch'].iloc[0])}: {at} {unit}): predicted {mean:.2f} [{lo:.2f}, {hi:.2f}], "
                  f"measured {group['tau'].mean():.2f}, {inside}")

    costs, _ = speed_model.load_fitted("cpu")
    best_name = checked.groupby("head")["tau"].mean().idxmax()
    best = checked[checked["head"] == best_name].assign(prompt=lambda f: f["prompt_index"])
    for shift in np.arange(0, k, 0.01):
        p = speed_model.category_prediction(costs, best.assign(tau=(best["tau"] + shift).clip(1, k + 1)))
        if p["speedup"] >= goal and p["low"] > low:
            break
    else:
        print(f"from {best_name}: {goal}x with a low end above {low}x is not reached with every prompt at up to k + 1")
        return
    needed = float((best["tau"] + shift).clip(1, k + 1).mean())
    per_pass = float((best["training_seconds"] / (best["sequences"] * best["epochs"])).iloc[0])
    line = lines["passes"]
    passes = [line.sequences_for(needed, b) for b in (line.slope, *reversed(line.slope_interval()))]
    minutes = [n * per_pass / 60 for n in passes]
    print(f"from {best_name} (mean {best['tau'].mean():.2f}), every prompt +{shift:.2f}: {p['speedup']:.2f}x "
          f"[{p['low']:.2f}, {p['high']:.2f}]. {goal}x with a low end above {low}x needs a mean of {needed:.2f} "
          f"tokens per verify step: {passes[0]:,.0f} passes on the passes line ({passes[1]:,.0f} .. {passes[2]:,.0f} "
          f"at its slope's 95% CI ends; an extrapolation), {minutes[0]:.0f} ({minutes[1]:.0f} .. {minutes[2]:.0f}) "
          f"minutes of training at {best_name}'s {per_pass:.3f} s a pass on this machine")


if __name__ == "__main__":
    main()
