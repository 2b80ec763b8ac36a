"""A cheap fingerprint of a local checkpoint directory, for the identity of a local model backend.

A local backend's identity (part of the cache key of every model reward using it) used to be its path:
a checkpoint retrained and saved over the same directory (the usual way an RL team refreshes its reward
model) kept serving the old weights' cached scores for the cache's lifetime. Hashing the weights would
read gigabytes at start-up; the fingerprint instead hashes the small files that describe the model
(``config.json``, tokenizer and generation configs) and the name, size and modification time of every
other file, with a few small blocks sampled across it. Rewriting the weights changes their modification
time, so the fingerprint changes; copying the same checkpoint elsewhere changes it too, which costs cache
hits, never correctness. The sampled blocks are for a checkpoint whose times say nothing: a container
image or artifact built reproducibly sets every file's time to one constant (``SOURCE_DATE_EPOCH``,
buildpacks' 1980-01-01), and a retrained model of the same architecture has the same sizes, so it read
as the old one and its old scores were served from a shared cache. Retraining changes nearly every
weight, so any sampled block tells the checkpoints apart.

A model named by hub id (``org/name``, loaded offline from the Hugging Face cache) is fingerprinted at
the snapshot the cache's ``refs/main`` points to: a newer revision downloaded into the cache is another
model, where the id alone stayed the same.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["checkpoint_fingerprint"]

_READ_WHOLE = 1 << 20  # files up to 1 MiB (configs, vocabularies) are hashed by content
_MAX_FILES = 10_000  # a directory with more is not a checkpoint; its path stands for it
_SAMPLES = 16  # blocks read from each larger file, evenly spaced from its start to its end
_SAMPLE_BYTES = 4096


def checkpoint_fingerprint(path: str) -> str:
    """12 hex digits standing for the checkpoint at ``path`` (a directory, or a hub id found in the local
    Hugging Face cache); ``""`` when it is neither."""
    root = local_dir(path)
    if root is None:
        return ""
    h = hashlib.sha256()
    try:
        files = sorted(p for p in root.rglob("*") if p.is_file())
    except OSError:
        return ""
    if len(files) > _MAX_FILES:
        return ""
    for p in files:
        try:
            st = p.stat()
            h.update(str(p.relative_to(root)).encode())
            if st.st_size <= _READ_WHOLE:
                h.update(p.read_bytes())
            else:
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
                h.update(_sampled(p, st.st_size))
        except OSError:
            continue  # vanished while listed: the rest still tells this checkpoint from another
    return h.hexdigest()[:12]


def _sampled(path: Path, size: int) -> bytes:
    """``_SAMPLES`` blocks of the file, the first at its start and the last at its end (about 64 KiB read,
    not the gigabytes of a model's weights)."""
    span = max(0, size - _SAMPLE_BYTES)
    out = bytearray()
    with path.open("rb") as f:
        for k in range(_SAMPLES):
            f.seek(span * k // (_SAMPLES - 1))
            out += f.read(_SAMPLE_BYTES)
    return bytes(out)


def local_dir(path: str) -> Path | None:
    """The directory the model is loaded from: ``path`` itself, or for a hub id the cached snapshot that
    ``from_pretrained(..., local_files_only=True)`` reads."""
    if not path:  # Path("") is the working directory
        return None
    root = Path(path)
    if root.is_dir():
        return root
    if root.is_absolute() or path.count("/") != 1:
        return None  # not a hub id
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # no models extra: nothing could load it either
        return None
    try:
        return Path(snapshot_download(path, local_files_only=True))
    except Exception:  # not cached, or not a valid repo id: the load will say so
        return None
