"""The job's model as named float32 arrays: what a global version and an update carry.

Parameters only, each once (TinyGPT ties its output head to the token embedding, so the
tied tensor travels once, under the embedding's name), in ``named_parameters`` order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from kafeed.errors import SchemaError
from kafeed.federate.config import ModelSettings
from kafeed.train.models import GPTConfig, TinyGPT

Arrays = dict[str, np.ndarray]


def build_model(settings: ModelSettings, seed: int) -> TinyGPT:
    """The job's TinyGPT, initialised from ``seed`` (version 0 of the global model)."""
    torch.manual_seed(seed)
    return TinyGPT(GPTConfig(**settings.model_dump(exclude={"eos_id"})))


def arrays_of(model: torch.nn.Module) -> Arrays:
    return {name: p.detach().cpu().numpy().astype(np.float32, copy=True)
            for name, p in model.named_parameters()}


def check_shapes(arrays: Mapping[str, np.ndarray], like: Mapping[str, np.ndarray], *, what: str) -> None:
    """Raise :class:`SchemaError` (one sentence) unless ``arrays`` has ``like``'s names and shapes."""
    if list(arrays) != list(like):
        missing = sorted(set(like) - set(arrays))
        extra = sorted(set(arrays) - set(like))
        raise SchemaError(f"{what} does not have the model's tensors"
                          + (f" (missing {missing[0]!r})" if missing else "")
                          + (f" (unknown {extra[0]!r})" if extra else "") + ".",
                          hint="The site and the coordinator must run the same [model] settings.")
    for name, array in arrays.items():
        if array.shape != like[name].shape:
            raise SchemaError(f"{what} has tensor {name!r} of shape {list(array.shape)}, the model's is "
                              f"{list(like[name].shape)}.",
                              hint="The site and the coordinator must run the same [model] settings.")


def load_arrays(model: torch.nn.Module, arrays: Mapping[str, np.ndarray]) -> None:
    check_shapes(arrays, arrays_of(model), what="The global model")
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(arrays[name], dtype=np.float32)))


def size_bytes(arrays: Mapping[str, np.ndarray]) -> int:
    return sum(int(a.nbytes) for a in arrays.values())
