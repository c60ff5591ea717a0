"""Pre-flight for a workshop machine (`make check`): is everything the notebooks need here?

Checks Python, the CPU features vLLM-CPU branches on, RAM, free disk, the ports notebook 07 starts its servers on,
the offline models, and one tiny real engine run. Prints one line per check and what to do about each failure;
exits 1 when something is missing. ``--no-engine`` skips the engine run (seconds instead of about a minute).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIN_RAM_GIB = 8  # two live engines of the cpu profile plus JupyterLab; the kit's machines have 24 GiB
MIN_FREE_DISK_GIB = 2  # results, figures, logs and a server's log per run
PORTS = range(8765, 8768)  # notebook 07: one server per method (baseline, draft model, n-gram)


@dataclass
class Check:
    name: str
    ok: bool
    seen: str
    fix: str = ""

    def line(self) -> str:
        return f"[{'ok' if self.ok else 'MISSING'}] {self.name}: {self.seen}" + ("" if self.ok else f"\n      fix: {self.fix}")


def python_check() -> Check:
    from scripts.check_python import TESTED, allowed, requires_python

    spec = requires_python()
    version = sys.version_info[:2]
    return Check("Python", allowed(spec, version), f"{version[0]}.{version[1]} (requires {spec}, tested on {TESTED})",
                 f"rebuild the venv with a supported Python: rm -rf .venv && make setup PYTHON=python{TESTED}")


def cpu_check() -> Check:
    from helpers import hardware

    features = hardware.cpu_features()
    return Check("CPU features", "AVX2" in features or "AVX-512" in features, hardware.describe(),
                 "vLLM-CPU's x86 build needs at least AVX2; use a newer x86 machine or a GPU profile")


def ram_check(min_gib: float = MIN_RAM_GIB) -> Check:
    import psutil

    available = psutil.virtual_memory().available / 2**30
    return Check("RAM", available >= min_gib, f"{available:.1f} GiB available (needs {min_gib} GiB)",
                 "close other programs (each vLLM engine of the cpu profile holds about 1.5-2.5 GB)")


def disk_check(path: Path = ROOT, min_gib: float = MIN_FREE_DISK_GIB) -> Check:
    free = shutil.disk_usage(path).free / 2**30
    return Check("disk", free >= min_gib, f"{free:.1f} GiB free at {path} (needs {min_gib} GiB)",
                 "free some disk (make clean removes build/ and the converted models)")


def ports_check(ports=PORTS) -> Check:
    from helpers.serving import PortInUseError, check_port_free

    busy = []
    for port in ports:
        try:
            check_port_free(port)
        except PortInUseError:
            busy.append(port)
    return Check("ports for notebook 07", not busy, f"{ports[0]}-{ports[-1]} " + (f"in use: {busy}" if busy else "free"),
                 f"stop what listens there (`ss -ltnp | grep :{busy[0] if busy else ports[0]}`), e.g. a server "
                 "left from an earlier run")


def models_check() -> Check:
    from helpers.models import TARGET_DIR, draft_dir, read_manifest

    folders = [TARGET_DIR, *(draft_dir(name) for name in read_manifest()["drafts"])]
    missing = [str(p.relative_to(ROOT)) for p in folders if not (p / "config.json").exists()]
    return Check("offline models", not missing, "missing: " + ", ".join(missing) if missing else
                 f"{len(folders)} present ({', '.join(p.name for p in folders)})", "run `make models`")


def engine_check() -> Check:
    from helpers.engines import EngineSpec, shutdown_engine
    from helpers.timing import run, sampling_params

    start = time.perf_counter()
    try:
        text = run(EngineSpec("cpu"), ["Say hi."], sampling_params(0.0, 8))["outputs"][0].outputs[0].text
        shutdown_engine()
    except Exception as error:  # noqa: BLE001 (any failure is the answer)
        return Check("one engine run", False, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}",
                     "see build/logs/vllm.log; `make setup` again if the install is broken")
    return Check("one engine run", bool(text.strip()), f"{time.perf_counter() - start:.0f} s, wrote {text.strip()!r}",
                 "see build/logs/vllm.log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-engine", action="store_true", help="skip the tiny engine run")
    args = parser.parse_args()
    checks = [python_check, cpu_check, ram_check, disk_check, ports_check, models_check]
    results = []
    for check in checks:
        results.append(check())
        print(results[-1].line(), flush=True)
    if not args.no_engine and results[-1].ok:
        results.append(engine_check())
        print(results[-1].line(), flush=True)
    failed = [r.name for r in results if not r.ok]
    print(f"\n{'ready' if not failed else 'not ready: ' + ', '.join(failed)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
