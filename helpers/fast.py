"""``SPECDEC_FAST=1`` (set by ``make test`` and CI) shrinks prompts, tokens and repetitions.

The engines stay real: fast mode only asks them for less work.
"""

from __future__ import annotations

import os

FAST = os.environ.get("SPECDEC_FAST", "") not in ("", "0")


def pick(full, fast):
    """``fast`` in fast mode, else ``full``."""
    return fast if FAST else full


def mode() -> str:
    return "fast (SPECDEC_FAST=1: fewer prompts, tokens and repetitions)" if FAST else "full"
