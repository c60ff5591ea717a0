"""Execute every notebook headless and write it as HTML (figures go to build/figures)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="build", type=Path)
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in notebooks:
        start = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
        body, _ = HTMLExporter().from_notebook_node(nb)
        (out / f"{path.stem}.html").write_text(body)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s -> {args.out / (path.stem + '.html')}", flush=True)


if __name__ == "__main__":
    main()
