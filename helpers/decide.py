"""The decision as a command: notebook 07's measurement, headless, written up as a report under ``build/``.

    python -m helpers.decide --prompts FILE [--url baseline=URL --url draft_model=URL] [--workload structured]
                             [--temperature 0] [--max-tokens 48] [--concurrency 1 4] [--repetitions 2]

Without ``--url`` it starts the active profile's servers on 127.0.0.1 (ports 8765 and up), as notebook 07 does;
with them it measures that deployment and starts nothing. Prompt lengths are then counted by the deployment's own
tokenizer (its ``/tokenize`` endpoint, chat template included) against its own context length (``/v1/models``).
Everything is checked before a server starts or a request is sent: the file and its format, every prompt's length,
the run settings, that each URL answers. The report (``report.md`` and ``report.html`` with a figure, under
``--out``, default ``build/decide/``) holds the checklist's prediction, the measured speedups with their intervals,
the verdict, and where the numbers came from. It uses the same helpers as notebook 07, step for step.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import sys
import urllib.request
from pathlib import Path

import pandas as pd

from helpers import hardware, plots, served, served_findings, serving
from helpers.profiles import Profile, active_profile
from helpers.results import markdown as markdown_table
from helpers.workload_files import TokenCounter

OUT = serving.ROOT / "build" / "decide"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.decide", description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", required=True, help="a .jsonl (\"prompt\" field), .csv (prompt column) or .txt")
    parser.add_argument("--url", action="append", default=[], metavar="METHOD=URL",
                        help="a running server per method (baseline, draft_model, ngram); the baseline is required")
    parser.add_argument("--workload", default="structured", help="what the prompts are, for the checklist")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--num-prompts", type=int, default=None, help="requests per run (default: one per prompt)")
    parser.add_argument("--methods", nargs="+", default=None, help="without --url: default baseline draft_model")
    parser.add_argument("--out", type=Path, default=OUT)
    return parser.parse_args(argv)


def base_urls(pairs: list[str]) -> dict[str, str] | None:
    """``["baseline=http://h:8000", ...]`` as a dict; None for none. ``ValueError`` for a malformed pair."""
    urls = {}
    for pair in pairs:
        method, sep, url = pair.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ValueError(f"--url takes METHOD=URL, e.g. baseline=http://10.0.0.5:8000; got {pair!r}")
        urls[method.strip()] = url.strip().rstrip("/")
    return urls or None


def _post_json(url: str, body: dict, timeout_s: float = 30.0) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with serving._OPENER.open(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def deployment(base_url: str) -> tuple[str, int, TokenCounter]:
    """(model id, context length, prompt -> token count) of a running vLLM server, from its own endpoints."""
    status, body = serving.http_get(base_url + "/v1/models", timeout_s=10)
    if status != 200:
        raise ValueError(f"{base_url}/v1/models answered {status}: is this a vLLM (OpenAI-compatible) server?")
    model = json.loads(body)["data"][0]
    if "max_model_len" not in model:
        raise ValueError(f"{base_url}/v1/models names no max_model_len: the kit reads the context from vLLM's server")

    def count(prompt: str) -> int:
        reply = _post_json(base_url + "/tokenize", {"model": model["id"], "add_generation_prompt": True,
                                                    "messages": [{"role": "user", "content": prompt}]})
        return int(reply["count"])

    count.chat_template = True  # counted by the server itself, its chat template included
    return model["id"], int(model["max_model_len"]), count


def plan(args: argparse.Namespace, profile: Profile):
    """The checked workload and settings; raises before anything starts."""
    urls = base_urls(args.url)
    tokenizer, max_model_len, model = None, None, None
    if urls is not None:
        for url in urls.values():  # every server answers before anything else
            serving.Server.from_url(url, timeout_s=10)
        model, max_model_len, tokenizer = deployment(urls.get(served.BASELINE) or next(iter(urls.values())))
    methods = list(urls) if urls else (args.methods or ["baseline", "draft_model"])  # checked by served.prepare
    workload = served.prepare(Path(args.prompts), profile=profile, max_tokens=args.max_tokens,
                              temperature=args.temperature, concurrencies=args.concurrency,
                              repetitions=args.repetitions, num_prompts=args.num_prompts, methods=methods,
                              base_urls=urls, workload_kind=args.workload, tokenizer=tokenizer,
                              max_model_len=max_model_len)
    return workload, methods, urls, model


def decide(args: argparse.Namespace, profile: Profile, checked) -> Path:
    """Measure as notebook 07 does and write the report; returns the path of ``report.html``."""
    workload, methods, urls, model = checked
    print(served.describe_workload(workload), flush=True)
    data, where = served.checklist_data(profile)
    predicted = None if data is None else served.predictions(
        data, workload_kind=args.workload, temperature=args.temperature, output_tokens=args.max_tokens,
        prompt_tokens=int(pd.Series(workload.prompt_tokens).median()), concurrencies=args.concurrency,
        target_config=profile.target, draft_config=profile.draft(), dtype=profile.dtype)
    table = served.measure(profile, workload, methods, args.concurrency, args.repetitions, base_urls=urls)
    gains = served.speedups(table)
    compared = gains if predicted is None else served.compare(gains, predicted)
    models = (f"the deployment's {model.rstrip('/').split('/')[-1]}" if model else
              f"target {profile.target.split('/')[-1]}, draft {profile.default_draft}, k={profile.k}")
    return write_report(args.out, workload, compared, table, served.verdict_lines(compared),
                        served_findings.agreement(gains, data, args.workload, args.temperature, table), where, models,
                        args.repetitions, urls)


def write_report(out: Path, workload, compared: pd.DataFrame, table: pd.DataFrame, verdicts: list[str],
                 agreement: list[str], where: str, models: str, repetitions: int, urls) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    footer = f"{served.short_source(workload)}, T={workload.temperature:g}, max_tokens {workload.max_tokens}"
    fig = plots.served_speedup(compared, sorted(table["concurrency"].unique()), models, repetitions, footer)
    fig.savefig(out / "speedup.png", bbox_inches="tight")
    columns = [c for c in ("method", "concurrency", "speedup", "speedup_ci_low", "speedup_ci_high", "interval",
                           "verdict", "predicted", "inside", "acceptance_rate", "tok_per_s", "baseline_tok_per_s")
               if c in compared]
    table.to_csv(out / "runs.csv", index=False)
    sections = [
        ("Verdict", "\n".join(f"- {line}" for line in verdicts)),
        ("Measured against predicted", markdown_table(compared[columns])),
        ("Against notebooks 04 and 06", "\n".join(f"- {line}" for line in agreement)),
        ("Where the numbers come from", "\n".join(f"- {line}" for line in (
            f"Workload: {served.describe_workload(workload)}.",
            f"Servers: {urls if urls else 'started here on 127.0.0.1, one per method'}; models: {models}.",
            f"Measured on: {hardware.describe() if not urls else 'the deployment (this report ran on ' + hardware.describe() + ')'}"
            f"; {len(table)} client runs (`vllm bench serve`), {repetitions} repetition(s) per concurrency, the "
            "methods in turns; every run is in runs.csv.",
            f"Prediction: the checklist (notebook 06) from {where}.",
            f"Written {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC by `python -m helpers.decide`.")))]
    markdown = "# Is speculative decoding worth it for this workload?\n\n![speedup](speedup.png)\n\n" + "\n\n".join(
        f"## {title}\n\n{body}" for title, body in sections) + "\n"
    (out / "report.md").write_text(markdown)
    import mistune

    page = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(served.short_source(workload))}: decision"
            "</title><style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;line-height:1.4}"
            "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}</style>"
            + mistune.html(markdown))
    (out / "report.html").write_text(page)
    return out / "report.html"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    profile = active_profile(verbose=False)
    try:
        checked = plan(args, profile)
    except (ValueError, OSError, serving.ServerError) as error:  # refused before anything started
        print(f"refused, nothing was started: {error}", file=sys.stderr)
        return 2
    print(f"report: {decide(args, profile, checked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
