import os

import pytest

os.environ.setdefault("SPECDEC_FAST", "1")


@pytest.fixture(scope="session")
def cpu_models():
    """The offline models must have been built (`make models`, run by `make test`)."""
    from helpers.models import TARGET_DIR, draft_dir, read_manifest

    missing = [str(p) for p in [TARGET_DIR, *(draft_dir(n) for n in read_manifest()["drafts"])]
               if not (p / "config.json").exists()]
    if missing:
        pytest.fail(f"offline models missing: {missing}; run `make models`")
    return TARGET_DIR
