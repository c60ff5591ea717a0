"""helpers.serving against a real vLLM server: start, health, vLLM's own benchmark client at two concurrency
levels (one client process for all runs), the result parser and the /metrics counters on its output, T = 1 draft
acceptance in vLLM's multiprocess engine (the kit's CPU correction loaded there), stop with no process left, and a
port conflict refused before anything starts."""

import math
import socket

import pytest

from helpers import bench, serving
from helpers.serving import PortInUseError, Server
from helpers.workload_files import write_custom_dataset
from helpers.workloads import prompts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_draft_model_server_measured_by_vllms_client(cpu_models, tmp_path):
    dataset = write_custom_dataset(prompts("structured", 3), tmp_path / "tiny.jsonl")
    server = Server("cpu", "draft_model", 4, port=free_port(), log_dir=tmp_path)
    with server, bench.BenchClient(log_path=tmp_path / "client.log") as client:  # one client for both runs
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
    pgid = server.pgid
    assert not serving.group_alive(pgid), serving.group_members(pgid)  # nothing of the server is left
    serving.check_port_free(server.port)  # and its port is free again
    for concurrency, (row, counted) in zip((1, 2), rows):
        assert row["concurrency"] == concurrency and row["completed"] == 3 and row["failed"] == 0
        assert row["output_throughput"] > 0 and row["median_tpot_ms"] > 0 and math.isfinite(row["p99_e2el_ms"])
        assert counted.drafts > 0 and 0 <= counted.acceptance_rate <= 1  # the server's own counters moved
        assert 0 <= row["acceptance_rate"] <= 1  # the client's copy of them, as a fraction
    assert not serving.running_servers()
