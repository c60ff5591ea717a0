"""Every live speculative method of the profile on the same prompts: baseline, draft model, EAGLE-3, n-gram and
suffix decoding, one request at a time, greedy (T = 0) by default.

The suite's first ``--prompts`` prompts of each category; every arm's engine stays live, so the arms are
interleaved per repetition on the same prompts. Suffix decoding also drafts from earlier answers: its engine first
answers one unrelated prompt (a warm-up that caches none of the measured answers), so repetition 0 is *cold* (no
earlier answer of the same prompt cached; answers of other prompts of the suite are, as they come) and repetition
1 is *warm* (its tree holds every measured answer). Writes build/results/methods.csv and prints one row per
(category, arm, repetition) as Markdown.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("SPECDEC_MAX_ENGINES", "8")  # keep every arm live: a rebuilt suffix engine forgets its tree

import pandas as pd  # noqa: E402

from helpers.engines import EngineSpec, suffix_available  # noqa: E402
from helpers.profiles import active_profile, with_eagle_heads  # noqa: E402
from helpers.results import markdown  # noqa: E402
from helpers.timing import paired_runs, run, sampling_params, summarize, warm_kinds  # noqa: E402
from helpers.workloads import agent_loop_prompts, prompts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UNRELATED = "Name three rivers in Europe and the countries they flow through."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--categories", nargs="+", default=["structured", "creative"],
                        help="suite categories, or agent_loop (data/workloads/agent_loop.jsonl, in its order)")
    parser.add_argument("--eagle-k", type=int, nargs="+", default=[4])
    parser.add_argument("--methods", nargs="+", default=["draft_model", "eagle3", "ngram", "suffix"])
    parser.add_argument("--eagle-heads", nargs="+", metavar="NAME[=PATH]",
                        help="the EAGLE-3 heads to time (default: every head of the profile): a head of the profile "
                             "by name, or another by NAME=PATH (a folder, e.g. a head under build/data-curve/)")
    parser.add_argument("--out", default="methods", help="build/results/OUT.csv")
    args = parser.parse_args()
    profile = active_profile()
    if args.eagle_heads:
        profile = with_eagle_heads(profile, args.eagle_heads)  # one engine name per head, apart from the profile's
    baseline = EngineSpec(profile.name)
    arms = [EngineSpec(profile.name, "draft_model", k=profile.k),
            *(EngineSpec(profile.name, "eagle3", k=k, draft=head) for head in profile.eagle_heads for k in args.eagle_k),
            EngineSpec(profile.name, "ngram", k=profile.k)]
    with_suffix = suffix_available() and "suffix" in args.methods
    if with_suffix:
        suffix = EngineSpec(profile.name, "suffix", k=8)
        arms.append(suffix)
    arms = [a for a in arms if a.method in args.methods]
    frames = []
    for category in args.categories:
        if with_suffix:  # a fresh tree per category, warmed on a prompt that is not measured
            from helpers.engines import shutdown_engine

            shutdown_engine(suffix)
            run(suffix, [UNRELATED], sampling_params(args.temperature, args.max_tokens))
            warm_kinds(suffix).add((args.temperature > 0, False))
        chosen = agent_loop_prompts(args.prompts) if category == "agent_loop" else prompts(category, args.prompts)
        runs = paired_runs(baseline, arms, chosen, temperature=args.temperature,
                           max_tokens=args.max_tokens, repetitions=2, tags={"category": category})
        base_text = runs[runs["arm"] == "baseline"].set_index(["repetition", "prompt_index"])["text"]
        runs["identical"] = [t == base_text.get((r, i)) for t, r, i in
                             runs[["text", "repetition", "prompt_index"]].itertuples(index=False)]
        for rep, group in runs.groupby("repetition"):
            table = summarize(group).assign(category=category, repetition=rep,
                                            suffix_tree="warm" if rep else "cold")
            # greedy output identical to the baseline's on every prompt (T = 0 only: sampled outputs differ)
            table["identical_to_baseline"] = table["arm"].map(group.groupby("arm")["identical"].all())
            frames.append(table)
    out = pd.concat(frames, ignore_index=True)
    path = ROOT / "build" / "results" / f"{args.out}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
    cols = ["category", "repetition", "arm", "identical_to_baseline", "acceptance_rate", "tokens_per_verify_step", "c_eff", "speedup",
            "speedup_ci_low", "speedup_ci_high", "interval"]
    print(markdown(out[[c for c in cols if c in out]]))
    print(f"-> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
