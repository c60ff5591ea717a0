"""helpers.serving without a vLLM server: commands (checked against vLLM's own parsers), /metrics parsing, the
result JSON (its keys checked against vllm/benchmarks/serve.py), and the server lifecycle with a stand-in process
(tests/fixtures/standin_server.py) in place of vLLM."""

import ast
import gc
import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import bench, serving
from helpers.metrics import SpecCounters
from helpers.processes import free_port
from helpers.profiles import get_profile
from helpers.serving import PortInUseError, Server, ServerError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
STANDIN = FIXTURES / "standin_server.py"
VLLM = Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
SERVE_PY = VLLM / "benchmarks" / "serve.py"


def standin(port, *flags):
    return [sys.executable, str(STANDIN), "--port", str(port), *flags]


def gone(pgid) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def make(tmp_path, *flags, **options) -> Server:
    port = options.pop("port", None) or free_port()
    return Server(argv=standin(port, *flags), port=port, log_dir=tmp_path, name="standin", **options)


# ------------------------------------------------------------------------------------------- commands


def test_server_command_for_the_cpu_profile(cpu_models):
    profile = get_profile("cpu")
    argv = serving.server_command("cpu", "baseline", port=8811)
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--model"] == profile.target and pairs["--dtype"] == "float32"
    assert pairs["--max-model-len"] == "2048" and pairs["--seed"] == "0" and pairs["--port"] == "8811"
    assert pairs["--host"] == "127.0.0.1"
    assert "--enforce-eager" in argv and "--no-enable-prefix-caching" in argv  # as the offline engines
    assert "--speculative-config" not in argv and "--disable-log-stats" not in argv

    draft = serving.server_command(profile, "draft_model", 3, 8811, draft="1l")
    config = json.loads(dict(zip(draft, draft[1:]))["--speculative-config"])
    assert config == {"method": "draft_model", "model": profile.draft("1l"), "num_speculative_tokens": 3,
                      "draft_sample_method": "greedy"}
    ngram = serving.server_command("cpu", "ngram", 5)
    assert json.loads(dict(zip(ngram, ngram[1:]))["--speculative-config"])["method"] == "ngram"
    default_k = serving.server_command("cpu", "draft_model")
    assert json.loads(default_k[default_k.index("--speculative-config") + 1])["num_speculative_tokens"] == profile.k


def gpu_talk():
    """gpu-talk with the gpu_memory_utilization get_profile derives on a card (none here: no CUDA)."""
    return replace(get_profile("gpu-talk"), engine_options={"gpu_memory_utilization": 0.45})


def test_server_command_for_a_gpu_profile_with_tensor_parallelism():
    argv = serving.server_command(gpu_talk(), "draft_model", 4, tensor_parallel_size=2, draft_tensor_parallel_size=1)
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--model"] == "meta-llama/Llama-3.1-8B-Instruct" and pairs["--dtype"] == "bfloat16"
    assert pairs["--tensor-parallel-size"] == "2" and pairs["--gpu-memory-utilization"] == "0.45"
    config = json.loads(pairs["--speculative-config"])
    assert config["model"] == "meta-llama/Llama-3.2-1B-Instruct" and config["draft_tensor_parallel_size"] == 1
    assert "--enforce-eager" not in argv


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "medusa"}, "unknown server method"),
    ({"method": "draft_alone"}, "unknown server method"),
    ({"method": "draft_model", "k": 0}, "k .* must be an integer"),
    ({"method": "draft_model", "draft": "nope"}, "has no draft 'nope'"),
    ({"method": "ngram", "draft_tensor_parallel_size": 1}, "applies to method 'draft_model' only"),
    ({"method": "draft_model", "tensor_parallel_size": 2, "draft_tensor_parallel_size": 3}, "must be 1 or the target"),
    ({"method": "baseline", "tensor_parallel_size": 0}, "tensor_parallel_size must be"),
])
def test_server_command_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        serving.server_command("gpu-talk", **kwargs)


def test_server_env():
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # as helpers.engines sets it for the offline engines
    env = serving.server_env({"EXTRA": "1"})
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and env["EXTRA"] == "1"
    assert str(ROOT) in env["PYTHONPATH"].split(os.pathsep)
    assert "127.0.0.1" in env["NO_PROXY"].split(",") and "localhost" in env["no_proxy"].split(",")
    assert serving.server_env({"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def bench_argv(tmp_path, **overrides):
    options = dict(concurrency=2, max_tokens=64, temperature=0.7, num_prompts=9, result_dir=tmp_path,
                   result_filename="r.json")
    options.update(overrides)
    return bench.bench_command("http://127.0.0.1:8765", tmp_path / "d.jsonl", "some/model", **options)


def test_bench_flags_exist_in_vllms_source(tmp_path):
    source = SERVE_PY.read_text() + (VLLM / "benchmarks" / "datasets" / "datasets.py").read_text()
    flags = [a for a in bench_argv(tmp_path, ignore_eos=True) if a.startswith("--")]
    assert flags and all(f'"{flag}"' in source for flag in flags), [f for f in flags if f'"{f}"' not in source]


def test_commands_parse_with_vllms_own_parsers(tmp_path, cpu_models):
    """The slow one (~15 s): imports vLLM to parse both commands exactly as the server and the client will."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.config import SpeculativeConfig
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    server_parser = make_arg_parser(FlexibleArgumentParser())
    argv = serving.server_command("cpu", "draft_model", 4, port=8799)
    args = server_parser.parse_args(argv[3:])
    assert (args.model, args.dtype, args.max_model_len, args.port) == (get_profile("cpu").target, "float32", 2048, 8799)
    assert args.enforce_eager is True and args.enable_prefix_caching is False and args.seed == 0
    assert args.disable_log_stats is False  # the spec-decode counters on /metrics need stats
    assert args.speculative_config["num_speculative_tokens"] == 4
    gpu = server_parser.parse_args(serving.server_command(gpu_talk(), "draft_model", 4, tensor_parallel_size=2,
                                                          draft_tensor_parallel_size=2)[3:])
    assert gpu.tensor_parallel_size == 2 and gpu.gpu_memory_utilization == 0.45
    assert set(gpu.speculative_config) <= set(SpeculativeConfig.__dataclass_fields__)  # draft_tensor_parallel_size
    assert gpu.speculative_config["draft_tensor_parallel_size"] == 2

    bench_parser = FlexibleArgumentParser()
    add_cli_args(bench_parser)
    bench = bench_parser.parse_args(bench_argv(tmp_path)[3:])
    assert (bench.backend, bench.endpoint, bench.dataset_name) == ("openai-chat", "/v1/chat/completions", "custom")
    assert bench.skip_chat_template and bench.disable_shuffle and bench.save_result
    assert (bench.custom_output_len, bench.num_prompts, bench.max_concurrency) == (64, 9, 2)
    assert bench.temperature == 0.7 and math.isinf(bench.request_rate) and bench.num_warmups == 1
    assert bench.percentile_metrics == "ttft,tpot,itl,e2el" and bench.metric_percentiles == "99"
    assert (bench.result_dir, bench.result_filename, bench.model) == (str(tmp_path), "r.json", "some/model")
    assert not bench.ignore_eos


# ------------------------------------------------------------------------------------------- /metrics

BEFORE = (FIXTURES / "metrics_before.prom").read_text()
AFTER = (FIXTURES / "metrics_after.prom").read_text()


def test_spec_counters_from_prometheus_text():
    before, after = serving.parse_spec_counters(BEFORE), serving.parse_spec_counters(AFTER)
    assert before == SpecCounters(120, 480, 300, (100, 80, 70, 50))
    run = after - before
    assert run == SpecCounters(300, 1200, 700, (240, 180, 150, 130))
    assert run.acceptance_rate == pytest.approx(700 / 1200)
    assert run.mean_acceptance_length == pytest.approx(1 + 700 / 300)
    assert run.position_acceptance == pytest.approx([0.8, 0.6, 0.5, 130 / 300])


def test_baseline_metrics_have_no_spec_counters():
    baseline = "\n".join(line for line in AFTER.splitlines() if "spec_decode" not in line) + "\n"
    assert "vllm:num_requests_running" in baseline
    assert serving.parse_spec_counters(baseline) is None


def test_counters_sum_over_engines_and_filter_by_model():
    rows = []
    for name, values in [("drafts", (10, 5, 7)), ("draft_tokens", (40, 20, 28)), ("accepted_tokens", (20, 8, 14))]:
        rows.append(f"# TYPE vllm:spec_decode_num_{name}_total counter")
        rows += [f'vllm:spec_decode_num_{name}_total{{engine="{e}",model_name="{m}"}} {v}.0'
                 for (e, m), v in zip([("0", "a"), ("1", "a"), ("0", "b")], values)]
    rows.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
    rows += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="{m}",position="{p}"}} {v}.0'
             for e, m, p, v in [("0", "a", 1, 8), ("0", "a", 0, 12), ("1", "a", 0, 5), ("1", "a", 1, 3),
                                ("0", "b", 0, 14)]]
    text = "\n".join(rows) + "\n"
    assert serving.parse_spec_counters(text) == SpecCounters(22, 88, 42, (31, 11))
    assert serving.parse_spec_counters(text, "a") == SpecCounters(15, 60, 28, (17, 11))
    assert serving.parse_spec_counters(text, "b") == SpecCounters(7, 28, 14, (14,))
    assert serving.parse_spec_counters(text, "c") is None


def test_prometheus_fixture_uses_vllms_names_and_labels():
    from prometheus_client.parser import text_string_to_metric_families

    spec_source = (VLLM / "v1" / "spec_decode" / "metrics.py").read_text()
    logger_source = (VLLM / "v1" / "metrics" / "loggers.py").read_text()
    assert 'labelnames = ["model_name", "engine"]' in logger_source
    assert 'pos_labelnames = labelnames + ["position"]' in spec_source
    for name in ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"):
        assert f'"{name}"' in spec_source
        samples = [s for f in text_string_to_metric_families(AFTER) for s in f.samples if s.name == name + "_total"]
        labels = {"model_name", "engine"} | ({"position"} if name.endswith("per_pos") else set())
        assert samples and all(set(s.labels) == labels for s in samples)


# ------------------------------------------------------------------------------------------- the result JSON


def serve_py_keys():
    """String literals, f-string templates and process_one_metric names in vllm/benchmarks/serve.py."""
    tree = ast.parse(SERVE_PY.read_text())
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    templates = {"".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                         for v in n.values) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)}
    metrics = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
               and getattr(n.func, "id", None) == "process_one_metric" and isinstance(n.args[0], ast.Constant)}
    return literals, templates, metrics


def test_every_key_parse_bench_reads_is_in_vllms_serve_py():
    literals, templates, metrics = serve_py_keys()
    for key in [*bench.BENCH_FIELDS, *bench.REQUIRED_FIELDS, *bench.SPEC_FIELDS, "inf"]:
        assert key in literals, f"{key!r} is no longer a string literal in {SERVE_PY}"
    assert set(bench.LATENCY_METRICS) <= metrics
    assert {"mean_{metric_attribute_name}_ms", "median_{metric_attribute_name}_ms",
            "p{p_word}_{metric_attribute_name}_ms"} <= templates
    assert 'str(int(p)) if int(p) == p else str(p)' in SERVE_PY.read_text()  # p_word: 99.0 -> "99"
    assert all(s in ("mean", "median") or re.fullmatch(r"p\d+", s) for s in bench.LATENCY_STATS)


@pytest.mark.parametrize("fixture", ["bench_draft_model.json", "bench_baseline.json"])
def test_fixture_keys_are_keys_serve_py_writes(fixture):
    literals, _, metrics = serve_py_keys()
    for key in json.loads((FIXTURES / fixture).read_text()):
        match = re.fullmatch(r"(mean|median|std|p\d+)_(\w+)_ms", key)
        assert key in literals or (match and match.group(2) in metrics), key


def test_parse_bench_speculative_run():
    row = bench.parse_bench(FIXTURES / "bench_draft_model.json")
    assert row["label"] == "draft_model-k4" and row["concurrency"] == 2 and row["completed"] == 9
    assert row["failed"] == 0 and row["duration_s"] == 21.7 and math.isinf(row["request_rate"])
    assert row["output_throughput"] == pytest.approx(1010 / 21.7)
    assert row["request_throughput"] == pytest.approx(9 / 21.7)
    assert row["mean_ttft_ms"] == 412.5 and row["median_tpot_ms"] == 37.9 and row["p99_itl_ms"] == 205.8
    assert row["p99_e2el_ms"] == 5120.9
    assert row["acceptance_rate"] == pytest.approx(700 / 1200)  # a fraction, as SpecCounters.acceptance_rate
    assert row["mean_acceptance_length"] == pytest.approx(1 + 700 / 300)
    assert (row["drafts"], row["draft_tokens"], row["accepted_tokens"]) == (300, 1200, 700)
    assert row["position_acceptance"] == pytest.approx([0.8, 0.6, 0.5, 130 / 300])
    # The same numbers as the server's own counters differenced around the run (the .prom fixtures).
    run = serving.parse_spec_counters(AFTER) - serving.parse_spec_counters(BEFORE)
    assert row["acceptance_rate"] == pytest.approx(run.acceptance_rate)
    assert row["position_acceptance"] == pytest.approx(run.position_acceptance)


def test_parse_bench_baseline_and_table(tmp_path):
    row = bench.parse_bench(FIXTURES / "bench_baseline.json")
    assert row["label"] == "baseline" and math.isnan(row["acceptance_rate"]) and math.isnan(row["drafts"])
    table = bench.bench_table([FIXTURES / "bench_baseline.json", FIXTURES / "bench_draft_model.json"])
    assert list(table["label"]) == ["baseline", "draft_model-k4"]
    assert {f"{s}_{m}_ms" for s in ("mean", "median", "p99") for m in ("ttft", "tpot", "itl", "e2el")} <= set(table)
    partial = json.loads((FIXTURES / "bench_baseline.json").read_text())
    del partial["p99_e2el_ms"]
    (tmp_path / "partial.json").write_text(json.dumps(partial))
    assert math.isnan(bench.parse_bench(tmp_path / "partial.json")["p99_e2el_ms"])
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a `vllm bench serve` result"):
        bench.parse_bench(tmp_path / "other.json")


def fake_bench(script):
    def command(base_url, dataset_path, model, *, result_dir, result_filename, **options):
        return [sys.executable, "-c", textwrap.dedent(script), str(Path(result_dir) / result_filename), str(model)]
    return command


def test_run_bench_runs_the_client_and_returns_its_json(tmp_path, monkeypatch):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    monkeypatch.setattr(bench, "bench_command", fake_bench(f"""
        import shutil, sys
        print("client output for", sys.argv[2])
        shutil.copy({str(FIXTURES / "bench_draft_model.json")!r}, sys.argv[1])
    """))
    path = bench.run_bench("http://127.0.0.1:1", dataset, "m", concurrency=2, result_dir=tmp_path, label="x")
    assert path.parent == tmp_path and path.name.startswith("x-c2-")
    assert bench.parse_bench(path)["completed"] == 9
    assert "client output for m" in path.with_suffix(".log").read_text()


def test_bench_workload_writes_the_dataset_and_passes_the_settings(tmp_path, monkeypatch):
    from helpers.workload_files import prepare_workload

    seen = {}

    def command(base_url, dataset_path, model, *, result_dir, result_filename, **options):
        seen.update(options, dataset=Path(dataset_path).read_text(), model=model)
        return [sys.executable, "-c", "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])",
                str(FIXTURES / "bench_baseline.json"), str(Path(result_dir) / result_filename)]

    monkeypatch.setattr(bench, "bench_command", command)
    workload = prepare_workload("Write a haiku.\nName three rivers.", max_model_len=2048, max_tokens=32,
                                concurrency=2, temperature=0.5, num_prompts=4)
    path = bench.bench_workload("http://127.0.0.1:1", workload, tmp_path / "w.jsonl", result_dir=tmp_path)
    assert bench.parse_bench(path)["label"] == "baseline"
    assert seen["dataset"] == '{"prompt": "Write a haiku."}\n{"prompt": "Name three rivers."}\n'
    assert (seen["concurrency"], seen["max_tokens"], seen["temperature"], seen["num_prompts"]) == (2, 32, 0.5, 4)


def test_run_bench_failures(tmp_path, monkeypatch):
    dataset = tmp_path / "d.jsonl"
    with pytest.raises(FileNotFoundError, match="write_custom_dataset"):
        bench.run_bench("http://127.0.0.1:1", dataset, result_dir=tmp_path)
    dataset.write_text('{"prompt": "a"}\n')
    with pytest.raises(ValueError, match="concurrency"):
        bench.run_bench("http://127.0.0.1:1", dataset, concurrency=0, result_dir=tmp_path)
    monkeypatch.setattr(bench, "bench_command", fake_bench("import sys; print('Traceback: boom'); sys.exit(2)"))
    with pytest.raises(bench.BenchError, match=r"(?s)exit code 2.*Traceback: boom"):
        bench.run_bench("http://127.0.0.1:1", dataset, result_dir=tmp_path)
    monkeypatch.setattr(bench, "bench_command", fake_bench("print('fine')"))
    with pytest.raises(bench.BenchError, match="wrote no"):
        bench.run_bench("http://127.0.0.1:1", dataset, result_dir=tmp_path)
    monkeypatch.setattr(bench, "bench_command", fake_bench("import time; time.sleep(60)"))
    started = time.monotonic()
    with pytest.raises(bench.BenchError, match="longer than 1 s"):
        bench.run_bench("http://127.0.0.1:1", dataset, result_dir=tmp_path, timeout_s=1)
    assert time.monotonic() - started < 15


# ------------------------------------------------------------------------------------------- lifecycle


def test_start_health_stop(tmp_path):
    server = make(tmp_path)
    with server as s:
        assert s.healthy() and s.running and s.startup_s is not None
        pgid = s.pgid
        assert os.getpgid(s.process.pid) == pgid != os.getpgid(0)  # its own process group
        os.killpg(pgid, 0)
        assert "stand-in server starting" in s.log_tail() and s.log_path.parent == tmp_path
        assert serving.running_servers() == [s]
    assert gone(pgid) and not server.running and not serving.is_healthy(server.base_url)
    assert serving.running_servers() == []
    server.stop()  # idempotent


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_stopped_when_the_block_raises(tmp_path, error):
    server = make(tmp_path)
    with pytest.raises(type(error)):
        with server:
            pgid = server.pgid
            raise error
    assert gone(pgid)


def test_sigkill_when_sigterm_is_ignored(tmp_path):
    server = make(tmp_path, "--ignore-sigterm", stop_timeout_s=0.5)
    server.start()
    pgid = server.pgid
    started = time.monotonic()
    server.stop()
    assert gone(pgid) and time.monotonic() - started < 5 and server.process.returncode == -signal.SIGKILL


def test_the_whole_group_is_stopped(tmp_path):
    with make(tmp_path, "--child") as server:
        pgid = server.pgid
        time.sleep(0.3)
        child = int(re.search(r"child pid (\d+)", server.log_tail()).group(1))
        assert os.getpgid(child) == pgid
    assert gone(pgid) and not Path(f"/proc/{child}").exists()


def test_slow_start_is_waited_for(tmp_path):
    with make(tmp_path, "--delay", "1.5") as server:
        assert server.startup_s >= 1.5 and server.healthy()


def test_started_together_their_start_ups_overlap_and_a_failure_stops_all(tmp_path):
    slow = [make(tmp_path, "--delay", "1.5", exclusive=False) for _ in range(2)]
    started = time.monotonic()
    serving.start_together(*slow)
    assert time.monotonic() - started < 2.9  # waited for together, not one after the other (3 s)
    assert all(s.healthy() and s.startup_s >= 1.5 for s in slow)
    for server in slow:
        server.stop()
    fine, failing = make(tmp_path, exclusive=False), make(tmp_path, "--fail", exclusive=False)
    with pytest.raises(ServerError, match="exited with code 3"):
        serving.start_together(fine, failing)
    assert gone(fine.pgid) and gone(failing.pgid) and serving.running_servers() == []


def test_exit_before_healthy_shows_the_log(tmp_path):
    server = make(tmp_path, "--fail")
    with pytest.raises(ServerError, match=r"(?s)exited with code 3 before it was healthy.*stand-in failure"):
        server.start()
    assert gone(server.pgid)


def test_startup_timeout_shows_the_log_and_stops(tmp_path):
    server = make(tmp_path, "--delay", "60", startup_timeout_s=1)
    with pytest.raises(ServerError, match=r"(?s)not healthy .* after 1 s.*stand-in server starting"):
        with server:
            pass
    assert gone(server.pgid)


def test_port_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is in use"):
            serving.check_port_free(port)
        server = make(tmp_path, port=port)
        with pytest.raises(PortInUseError, match=f"port {port}"):
            server.start()
        assert server.process is None  # nothing was started
    serving.check_port_free(port)  # free again


def test_port_held_by_a_healthy_server_suggests_from_url(tmp_path):
    with make(tmp_path) as first:
        with pytest.raises(PortInUseError, match=r"answers GET /health there: .*Server\.from_url"):
            make(tmp_path, port=first.port, exclusive=False).start()


def test_one_server_at_a_time(tmp_path):
    with make(tmp_path) as first:
        with pytest.raises(ServerError, match="another server is running"):
            make(tmp_path).start()
        with make(tmp_path, exclusive=False) as second:
            assert first.healthy() and second.healthy()
    lost = make(tmp_path).start()  # as if its variable were overwritten while IPython's history still holds it
    pgid = lost.pgid
    assert serving.stop_all() == 1 and gone(pgid) and serving.running_servers() == []


def test_from_url_checks_health_and_never_stops(tmp_path):
    with make(tmp_path, "--metrics", str(FIXTURES / "metrics_after.prom")) as real:
        external = Server.from_url(real.base_url + "/", model="m")
        with external as same:
            assert same is external and external.base_url == real.base_url and external.model == "m"
        external.stop()
        assert real.healthy() and not external.running
        assert external.spec_counters() == SpecCounters(420, 1680, 1000, (340, 260, 220, 180))
    with pytest.raises(ServerError, match=f"no healthy server at http://127.0.0.1:{real.port}"):
        Server.from_url(real.base_url, timeout_s=0.5)


def test_stopped_when_garbage_collected(tmp_path):
    server = make(tmp_path).start()
    pgid = server.pgid
    del server
    gc.collect()
    assert gone(pgid)


def run_and_report(tmp_path, port, ending, die_with_parent=True):
    """Start a stand-in Server from another Python process that then ends as ``ending`` says; return the pgid."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from helpers.serving import Server
        server = Server(argv={standin(port)!r}, port={port}, log_dir={str(tmp_path)!r},
                        die_with_parent={die_with_parent})
        server.start()
        print(server.pgid, flush=True)
        {ending}
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    return int(done.stdout.split()[0])


def test_stopped_at_interpreter_exit(tmp_path):
    pgid = run_and_report(tmp_path, free_port(), "sys.exit(0)  # no stop(): the atexit finalizer must do it")
    assert gone(pgid)


def test_stopped_when_the_starting_process_is_killed(tmp_path):
    """SIGKILL runs no Python: the kernel's parent-death signal stops the server (here PID 1 may leave a zombie)."""
    pgid = run_and_report(tmp_path, free_port(), "os.kill(os.getpid(), signal.SIGKILL)")
    deadline = time.monotonic() + 10
    while serving.group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not serving.group_alive(pgid)


def test_without_parent_death_signal_a_killed_parent_leaves_the_server(tmp_path):
    """The control for the test above: the stand-in does survive a hard-killed parent without the signal."""
    port = free_port()
    pgid = run_and_report(tmp_path, port, "os.kill(os.getpid(), signal.SIGKILL)", die_with_parent=False)
    try:
        time.sleep(0.5)
        assert serving.group_alive(pgid) and serving.is_healthy(f"http://127.0.0.1:{port}")
    finally:
        os.killpg(pgid, signal.SIGKILL)


# A stand-in for the client loop: the same request/reply protocol as bench._BENCH_LOOP, without vLLM. It copies
# the fixture to the result path (the --result-dir/--result-filename options), or exits when told to "die".
FAKE_LOOP = f"""
import json, os, shutil, sys
reply = os.fdopen(os.dup(1), 'w')
for line in sys.stdin:
    request = json.loads(line)
    argv = request['argv']
    with open(request['log'], 'w') as log:
        log.write(f'client pid {{os.getpid()}}\\n')
    if 'die' in argv:
        sys.exit(3)
    if 'sleep' in argv:
        import time; time.sleep(60)
    target = os.path.join(argv[argv.index('--result-dir') + 1], argv[argv.index('--result-filename') + 1])
    shutil.copy({str(FIXTURES / "bench_draft_model.json")!r}, target)
    reply.write(json.dumps({{'code': 0}}) + '\\n'); reply.flush()
"""


def test_one_client_process_runs_many_runs_and_a_failed_run_stops_it(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "a"}\n')
    with bench.BenchClient(program=FAKE_LOOP, log_path=tmp_path / "client.log") as client:
        paths = [bench.run_bench("http://127.0.0.1:1", dataset, "m", concurrency=c, result_dir=tmp_path,
                                   client=client, label=f"c{c}") for c in (1, 2)]
        assert [bench.parse_bench(p)["completed"] for p in paths] == [9, 9]
        pids = {p.with_suffix(".log").read_text() for p in paths}
        assert len(pids) == 1, pids  # both runs in one process
        first = client.process
        with pytest.raises(bench.BenchError, match="exit code 3"):
            bench.run_bench("http://127.0.0.1:1", dataset, "m", result_dir=tmp_path, client=client,
                              extra_args=["die"])
        assert client.process is None or client.process is not first
        started = time.monotonic()
        with pytest.raises(bench.BenchError, match="longer than 1 s"):
            bench.run_bench("http://127.0.0.1:1", dataset, "m", result_dir=tmp_path, client=client, timeout_s=1,
                              extra_args=["sleep"])
        assert time.monotonic() - started < 15 and client.process is None  # stopped, not left sleeping
        path = bench.run_bench("http://127.0.0.1:1", dataset, "m", result_dir=tmp_path, client=client)
        assert bench.parse_bench(path)["completed"] == 9  # a new client took over
        last = client.process
    assert last.poll() is not None  # the with block stopped it
