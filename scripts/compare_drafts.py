"""Check re-trained drafts against the committed manifests: held-out top-1 agreement within 2 points each.

Usage: python scripts/compare_drafts.py COMMITTED_DIR NEW_DIR, each holding manifest.json (the small drafts) and
eagle3.json (the EAGLE-3 heads); ``make drafts`` runs it last."""

import json
import sys
from pathlib import Path

from helpers.models import agreement_changes


def main() -> int:
    committed, retrained = ({"drafts": json.loads((Path(d) / "manifest.json").read_text())["drafts"],
                             "eagle3": json.loads((Path(d) / "eagle3.json").read_text())} for d in sys.argv[1:3])
    problems = agreement_changes(committed, retrained)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print("every re-trained draft is within 2 points of the committed held-out agreement")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
