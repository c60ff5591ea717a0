"""Execute every notebook headless and write it as HTML (figures go to build/figures).

Prints progress inside each notebook (cells done / total, elapsed). A notebook that fails is still written, with
its error, and the others run; the script exits non-zero at the end, naming every notebook that failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter

from helpers import vllm_log_lines

ROOT = Path(__file__).resolve().parent.parent


def log_lines(nb: nbformat.NotebookNode) -> dict[str, int]:
    """vLLM log lines ("INFO 12-03 10:24:15 [file.py:12] ...") that reached the notebook's outputs, by level."""
    return vllm_log_lines("\n".join(output.get("text", "") for cell in nb.cells for output in cell.get("outputs", [])
                                    if output.get("output_type") == "stream"))


def execute(path: Path) -> tuple[nbformat.NotebookNode, str | None]:
    nb = nbformat.read(path, as_version=4)
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    start = time.perf_counter()

    def progress(cell, cell_index, execute_reply):
        done = code_cells.index(cell_index) + 1
        print(f"  {path.name}: cell {done}/{len(code_cells)} done, {time.perf_counter() - start:.0f} s", flush=True)

    # The kernel's own start-up notice ("Kernel is running over TCP without encryption": a kernel on 127.0.0.1 that
    # this script started and talks to) would be the only other line in the terminal.
    client = NotebookClient(nb, timeout=3600, kernel_name="python3", on_cell_executed=progress,
                            resources={"metadata": {"path": str(path.parent)}},
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    try:
        client.execute()
    except CellExecutionError as error:
        return nb, str(error).splitlines()[-1] if str(error) else "cell error"
    return nb, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="build", type=Path)
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    failed = []
    for path in notebooks:
        start = time.perf_counter()
        nb, error = execute(path)
        body, _ = HTMLExporter().from_notebook_node(nb)
        (out / f"{path.stem}.html").write_text(body)
        logs = log_lines(nb)
        status = (f"FAILED ({error})" if error else "ok") + (
            f"; vLLM log lines in outputs: {logs['INFO']} INFO, {logs['WARNING']} WARNING, {logs['NATIVE']} native"
            if any(logs.values()) else "")
        print(f"{path.name}: {time.perf_counter() - start:.0f} s -> {args.out / (path.stem + '.html')} {status}",
              flush=True)
        if error:
            failed.append(path.name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
