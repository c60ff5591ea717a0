"""`make check`'s pre-flight: each check says what is missing and what to do, and the script exits non-zero."""

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import check_machine  # noqa: E402


def test_each_check_reports_a_shortfall_with_a_fix():
    for check in (check_machine.ram_check(min_gib=10**6), check_machine.disk_check(min_gib=10**9)):
        assert not check.ok and check.fix and "MISSING" in check.line()
    assert check_machine.python_check().ok and check_machine.cpu_check().ok


def test_a_busy_port_fails_the_script():
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", check_machine.PORTS[0]))
        listener.listen()
        assert not check_machine.ports_check().ok
        out = subprocess.run([sys.executable, "scripts/check_machine.py", "--no-engine"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"[MISSING] ports for notebook 07: 8765-8767 in use: [{check_machine.PORTS[0]}]" in out.stdout
    assert "not ready: ports for notebook 07" in out.stdout
