"""Does a calibrated draft accept more with probabilistic drafting? Greedy against probabilistic drafting at T > 0,
for each EAGLE-3 head (hard labels and soft labels) and the draft models `2l` (hard labels) and `2l-soft` (soft labels),
per category.

Theory, for one draft position: greedy drafting proposes argmax q, accepted with probability p_T(argmax q);
probabilistic drafting proposes x ~ q_T, accepted with probability sum_x min(p_T(x), q_T(x)). The second is larger
only where q_T is close to p_T: a calibrated draft. ``--offline`` computes both for the first draft position from
the held-out training answers (build/train/eagle3_features.pt; p_T from the target's top-20 log-probabilities,
renormalised); the default measures acceptance in vLLM: per arm, one untimed batched run of ``--samples`` answers per prompt
for each of the suite's first ``--prompts`` prompts of a category (vLLM's counters), then compares the two
drafting methods prompt by prompt (an interval over prompts). Writes build/results/calibration.csv.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent


def offline(temperature: float) -> pd.DataFrame:
    sys.path.insert(0, str(ROOT / "scripts"))
    from train_drafts import split_rows
    from train_eagle3 import TOP, rows_and_features

    from helpers.eagle3 import Eagle3Head
    from helpers.models import DRAFTS_DIR, TARGET_DIR, read_eagle_manifest

    config = json.loads((TARGET_DIR / "config.json").read_text())
    from safetensors.torch import load_file

    embed = load_file(TARGET_DIR / "model.safetensors")["model.embed_tokens.weight"]
    rows, feats = rows_and_features(("base",))
    feats = dict(zip(map(id, rows), feats))
    _, held = split_rows(rows)
    out = []
    for name, entry in read_eagle_manifest().items():
        head = Eagle3Head.load(DRAFTS_DIR / entry["dir"], config).eval()
        sums: dict[str, list[float]] = {}
        with torch.no_grad():
            for row in held:
                f, n = feats[id(row)], len(row["prompt_token_ids"])
                seq = torch.tensor(row["prompt_token_ids"] + row["token_ids"])
                t = len(seq)
                normed = head.unroll(f["aux"].float()[None], embed[torch.cat([seq[1:], seq[:1]])][None],
                                     torch.ones(1, t, dtype=torch.bool), 1)[0][0]
                idx = torch.arange(max(n - 2, 0), t - 2)  # index i predicts what follows position i + 1
                q = torch.zeros(len(idx), config["vocab_size"])
                q[:, head.draft_vocab] = (head.lm_head(normed[idx]) / temperature).softmax(-1)
                p = torch.zeros_like(q)
                top_p = (f["top_logprobs"][idx + 1].float() / temperature).softmax(-1)
                p.scatter_(1, f["top_ids"][idx + 1].long(), top_p)
                greedy = p.gather(1, q.argmax(-1, keepdim=True)).squeeze(1)
                sampled = torch.minimum(p, q).sum(-1)
                acc = sums.setdefault(row["category"], [0.0, 0.0, 0])
                acc[0] += float(greedy.sum())
                acc[1] += float(sampled.sum())
                acc[2] += len(idx)
        for category, (g, s, count) in sorted(sums.items()):
            out.append({"head": name, "category": category, "temperature": temperature, "positions": count,
                        "greedy_first_position": g / count, "probabilistic_first_position": s / count,
                        "note": f"held-out training answers; p from the target's top-{TOP}"})
    return pd.DataFrame(out)


def measured(temperature: float, n_prompts: int, samples: int, max_tokens: int,
             methods: tuple[str, ...] = ("draft_model", "eagle3")) -> pd.DataFrame:
    from helpers import hardware
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.profiles import active_profile
    from helpers.timing import run, sampling_params
    from helpers.workloads import prompts

    profile = active_profile()
    drafts = {"draft_model": profile.calibration_drafts, "eagle3": list(profile.eagle_heads)}
    arms = [EngineSpec(profile.name, method, k=profile.k, draft=draft, draft_sample_method=m)
            for method in methods for draft in drafts[method] for m in ("greedy", "probabilistic")]
    out = []
    for spec in arms:
        for category in ("structured", "creative"):
            for prompt in prompts(category, n_prompts):  # one batch of `samples` answers per prompt
                c = run(spec, [prompt] * samples, sampling_params(temperature, max_tokens), batch=True)["counters"]
                out.append({"hardware": hardware.describe(), "arm": spec.label(), "draft_sample_method": spec.draft_sample_method,
                            "category": category, "prompt": prompt[:60], "temperature": temperature,
                            "samples": samples, "draft_tokens": c.draft_tokens, "accepted": c.accepted,
                            "acceptance_rate": c.acceptance_rate, "per_position": list(c.per_position)})
            print(out[-1]["arm"], spec.draft_sample_method, category, "done", flush=True)
        shutdown_engine(spec)
    return pd.DataFrame(out)


def compare(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arm and category: mean acceptance over prompts, greedy and probabilistic, and the paired difference
    (probabilistic - greedy) with a 95% t interval over prompts."""
    from scipy.stats import t

    rows = []
    for (arm, category), group in frame.groupby(["arm", "category"], sort=False):
        wide = group.pivot(index="prompt", columns="draft_sample_method", values="acceptance_rate").dropna()
        diff = wide["probabilistic"] - wide["greedy"]
        half = t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / len(diff) ** 0.5
        rows.append({"arm": arm, "category": category, "prompts": len(diff),
                     "greedy": round(wide["greedy"].mean(), 3), "probabilistic": round(wide["probabilistic"].mean(), 3),
                     "difference": round(diff.mean(), 3), "low": round(diff.mean() - half, 3),
                     "high": round(diff.mean() + half, 3)})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--methods", nargs="+", default=["draft_model", "eagle3"], choices=["draft_model", "eagle3"])
    args = parser.parse_args()
    frame = offline(args.temperature) if args.offline else measured(args.temperature, args.prompts, args.samples,
                                                                    args.max_tokens, tuple(args.methods))
    path = ROOT / "build" / "results" / f"calibration{'-offline' if args.offline else ''}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    print(frame.to_string() if args.offline else compare(frame).to_string())
    print(f"-> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
