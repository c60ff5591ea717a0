"""How much each notebook measures, set by one variable: ``SPECDEC_MODE``.

- ``fast``: CI and ``make test`` (``SPECDEC_FAST=1`` means the same): the fewest prompts, tokens and repetitions
  that still exercise every code path on real engines;
- ``workshop`` (the default, for ``make run`` and JupyterLab): each notebook fits a workshop slot, about 5 minutes
  on the reference machine (2 CPU cores), and the widgets also show the shipped reference results;
- ``full``: the reference measurement (``make reference``), the sizes behind the README's numbers.

The engines stay real in every mode: a mode only asks them for more or less work.
"""

from __future__ import annotations

import os

MODES = ("fast", "workshop", "full")


def _mode() -> str:
    requested = os.environ.get("SPECDEC_MODE", "").strip().lower()
    if requested:
        if requested not in MODES:
            raise ValueError(f"SPECDEC_MODE={requested!r}: choose one of {', '.join(MODES)}")
        return requested
    return "fast" if os.environ.get("SPECDEC_FAST", "") not in ("", "0") else "workshop"


MODE = _mode()
FAST = MODE == "fast"


def pick(full, fast, workshop=None):
    """The value for the active mode: ``fast``, ``workshop`` (``full`` when not given) or ``full``."""
    if MODE == "fast":
        return fast
    if MODE == "workshop" and workshop is not None:
        return workshop
    return full


def mode() -> str:
    return {"fast": "fast (fewest prompts, tokens and repetitions: CI and make test)",
            "workshop": "workshop (each notebook about 5 minutes on 2 CPU cores; reference results beside)",
            "full": "full (the reference measurement: make reference)"}[MODE]
