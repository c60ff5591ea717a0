"""Real vLLM servers, a baseline and a draft-model server started once for this module (a deployment, as notebook 07
and `python -m helpers.decide` see one): start, health, vLLM's own benchmark client at two concurrency levels (one
client process for all runs), the result parser and the /metrics counters on its output, T = 1 draft acceptance in
vLLM's multiprocess engine (the kit's CPU correction loaded there), a port conflict refused before anything starts,
`helpers.decide` measuring the deployment from its URLs, and stop with no process left."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import bench, decide, serving
from helpers.processes import free_port
from helpers.serving import PortInUseError, Server
from helpers.workload_files import write_custom_dataset
from helpers.workloads import prompts

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def deployment(cpu_models, tmp_path_factory):
    """A baseline and a draft-model server (k = 4), started together once for both tests (each start is half a minute
    of vLLM imports, mostly on one core). When the module ends nothing of either is left and its port is free."""
    log_dir = tmp_path_factory.mktemp("deployment")
    base = Server("cpu", "baseline", port=free_port(), log_dir=log_dir, exclusive=False)
    draft = Server("cpu", "draft_model", 4, port=free_port(), log_dir=log_dir, exclusive=False)
    serving.start_together(base, draft)  # their imports overlap on the two cores
    with base, draft:
        yield base, draft
    for server in (base, draft):
        assert not serving.group_alive(server.pgid), serving.group_members(server.pgid)  # nothing of it is left
        serving.check_port_free(server.port)  # and its port is free again
    assert not serving.running_servers()


def test_a_real_draft_model_server_measured_by_vllms_client(deployment, tmp_path):
    dataset = write_custom_dataset(prompts("structured", 3), tmp_path / "tiny.jsonl")
    server = deployment[1]
    with bench.BenchClient(log_path=tmp_path / "client.log") as client:  # one client for both runs
        assert server.healthy() and server.running
        # its EngineCore ran the kit's plugin (or this vLLM needs none): sampled runs are allowed
        assert server.sampling.state in ("corrected", "exact"), server.sampling
        with pytest.raises(PortInUseError, match=str(server.port)):  # refused before anything starts
            Server("cpu", "baseline", port=server.port, log_dir=tmp_path, exclusive=False).start()
        rows = []
        for concurrency in (1, 2):
            before = server.spec_counters()
            path = bench.run_bench(server, dataset, concurrency=concurrency, max_tokens=16, result_dir=tmp_path,
                                     label=f"draft-c{concurrency}", client=client, num_warmups=2 - concurrency)
            counted = server.spec_counters() - before
            rows.append((bench.parse_bench(path), counted))
        # T = 1 in vLLM's multiprocess engine: the kit's correction of the CPU expand kernel (a vLLM plugin) must load
        # in the server's EngineCore and Worker processes; without it T > 0 verification accepted no draft token.
        before = server.spec_counters()
        bench.run_bench(server, dataset, concurrency=2, max_tokens=32, temperature=1.0, result_dir=tmp_path,
                          label="draft-t1", client=client, num_warmups=0)
        sampled = server.spec_counters() - before
        client_pid = client.process.pid
    assert sampled.draft_tokens > 0 and sampled.acceptance_rate > 0.05, (
        f"T = 1 served: {sampled.accepted} of {sampled.draft_tokens} draft tokens accepted")
    assert not serving.group_alive(client_pid)  # the client is gone with the block
    for concurrency, (row, counted) in zip((1, 2), rows):
        assert row["concurrency"] == concurrency and row["completed"] == 3 and row["failed"] == 0
        assert row["output_throughput"] > 0 and row["median_tpot_ms"] > 0 and math.isfinite(row["p99_e2el_ms"])
        assert counted.drafts > 0 and 0 <= counted.acceptance_rate <= 1  # the server's own counters moved
        assert 0 <= row["acceptance_rate"] <= 1  # the client's copy of them, as a fraction


def test_decide_against_the_deployment(deployment, tmp_path):
    """The command starts nothing and reads the deployment's context and tokenizer; the report holds the verdict,
    the table, the figure and the provenance."""
    base, spec = deployment
    prompts_file = tmp_path / "prompts.txt"
    prompts_file.write_text("Return a JSON object with a name and an age.\nWrite a SQL query counting users.\n")
    model, context, count = decide.deployment(base.base_url)
    from helpers.profiles import get_profile
    from helpers.workload_files import token_counter

    assert context == get_profile("cpu").max_model_len
    prompt = "Write a SQL query counting users."
    assert count(prompt) == token_counter(get_profile("cpu").target)(prompt)  # the server counts as the kit does
    out = subprocess.run([sys.executable, "-m", "helpers.decide", "--prompts", str(prompts_file),
                          "--url", f"baseline={base.base_url}", "--url", f"draft_model={spec.base_url}",
                          "--concurrency", "1", "--repetitions", "1", "--max-tokens", "16",
                          "--out", str(tmp_path / "report")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert base.running and spec.running  # it stopped nothing
    report = (tmp_path / "report" / "report.md").read_text()
    for heading in ("## Verdict", "## Measured against predicted", "## Where the numbers come from"):
        assert heading in report
    assert "draft_model at concurrency 1:" in report and base.base_url in report
    assert (tmp_path / "report" / "speedup.png").stat().st_size > 10_000
    assert "<table>" in (tmp_path / "report" / "report.html").read_text()
    runs = (tmp_path / "report" / "runs.csv").read_text().splitlines()
    assert len(runs) == 3  # header, baseline, draft_model
    json.dumps(report)  # plain text
