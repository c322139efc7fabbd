"""The math of a federated round: FedAvg, FedProx's proximal term, the FedAdam server optimizer.

Everything here works on **flat float32 numpy vectors**: a model's parameters in the order of its
``state_dict()``, concatenated (:func:`flatten` and :func:`unflatten` convert, for the floating
tensors of a state dict; secure aggregation masks such a vector). An update is the site's
weights *delta* (local weights minus the global weights it started from), so that FedAvg and a
server optimizer read it the same way: ``new_global = global + mean_delta`` for FedAvg, and
``new_global = FedAdam.step(global, mean_delta)`` otherwise. Only :func:`proximal_term` touches
torch tensors, because it must be differentiable inside the site's training loop.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kafeed.errors import ConfigError, ResumeMismatch

if TYPE_CHECKING:
    import torch

__all__ = ["FedAdam", "FedAdamSettings", "fedavg", "flatten", "proximal_term", "unflatten"]

Vector = npt.NDArray[np.float32]

_STATE_VERSION = 1


def fedavg(updates: Sequence[npt.ArrayLike], weights: Sequence[int]) -> Vector:
    """The mean of ``updates`` weighted by ``weights`` (sample counts), McMahan et al. 2017.

    Computed in float64 and returned as float32. Refused: no update, lengths that differ, a
    weight that is not a positive count.
    """
    if not updates or len(updates) != len(weights):
        raise ConfigError(f"FedAvg needs one weight per update, got {len(updates)} updates and "
                          f"{len(weights)} weights.")
    arrays = [np.asarray(u, dtype=np.float64) for u in updates]
    shape = arrays[0].shape
    if len(shape) != 1 or any(a.shape != shape for a in arrays):
        raise ConfigError(f"FedAvg's updates must be flat vectors of one length, got "
                          f"{sorted({a.shape for a in arrays})}.")
    if any(isinstance(w, bool) or int(w) != w or w <= 0 for w in weights):
        raise ConfigError(f"FedAvg's weights are sample counts above 0, got {list(weights)}.")
    total = np.zeros(shape, dtype=np.float64)
    for array, weight in zip(arrays, weights, strict=True):
        total += float(weight) * array
    return (total / float(sum(int(w) for w in weights))).astype(np.float32)


def proximal_term(params: Iterable[torch.Tensor], global_params: Iterable[torch.Tensor],
                  mu: float) -> torch.Tensor:
    """FedProx's ``mu / 2 * ||w - w_global||²`` (Li et al. 2020), to add to a site's local loss.

    ``params`` are the trainable parameters (``model.parameters()``), ``global_params`` the same
    tensors of the global model the round started from (detached, same order).
    """
    import torch

    if mu < 0:
        raise ConfigError(f"FedProx's mu must be 0 or more, got {mu}.")
    terms = [torch.sum((p - g.detach()) ** 2) for p, g in zip(params, global_params, strict=True)]
    if not terms:
        raise ConfigError("FedProx's proximal term needs at least one parameter.")
    return 0.5 * mu * torch.stack(terms).sum()


def flatten(state: Mapping[str, Any]) -> Vector:
    """The floating tensors (or arrays) of a state dict, in its order, as one float32 vector."""
    parts = [_numpy(v).astype(np.float32).ravel() for v in state.values() if _is_float(v)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def unflatten(vector: npt.ArrayLike, like: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`flatten`'s inverse: a state dict shaped like ``like``, floats taken from ``vector``.

    Tensors come back as tensors (on ``like``'s device and dtype), arrays as arrays; entries that
    are not floating (step counters, integer buffers) are ``like``'s own.
    """
    flat = np.asarray(vector, dtype=np.float32)
    out: dict[str, Any] = {}
    offset = 0
    for name, value in like.items():
        if not _is_float(value):
            out[name] = value
            continue
        shape = tuple(value.shape)
        size = int(np.prod(shape, dtype=np.int64))
        if offset + size > flat.shape[0]:
            raise ConfigError(f"A vector of {flat.shape[0]} values is too short for the model "
                              f"(ran out at {name!r}).")
        part = flat[offset:offset + size].reshape(shape)
        offset += size
        if hasattr(value, "detach"):
            import torch

            out[name] = torch.from_numpy(part.copy()).to(device=value.device, dtype=value.dtype)
        else:
            out[name] = part.astype(value.dtype)
    if offset != flat.shape[0]:
        raise ConfigError(f"A vector of {flat.shape[0]} values does not fit the model's {offset}.")
    return out


@dataclass(frozen=True, kw_only=True)
class FedAdamSettings:
    """FedAdam's hyperparameters (Reddi et al. 2020, "Adaptive Federated Optimization")."""

    lr: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3


_SETTINGS = tuple(f.name for f in fields(FedAdamSettings))


class FedAdam:
    """The FedAdam server optimizer: Adam over the rounds' mean deltas (Reddi et al. 2020, Alg. 2).

    ``m = b1 m + (1 - b1) d``; ``v = b2 v + (1 - b2) d²``; ``x = x + lr * m / (sqrt(v) + tau)``,
    without bias correction, as in the paper. Its state (the step count and the two moment
    vectors) is what the coordinator checkpoints with each round: :meth:`state_bytes` /
    :meth:`load_state_bytes` (an ``.npz`` without pickles), or :meth:`state_dict`.
    """

    def __init__(self, *, settings: FedAdamSettings | None = None) -> None:
        self.settings = settings or FedAdamSettings()
        self.rounds = 0
        self._m: npt.NDArray[np.float64] | None = None
        self._v: npt.NDArray[np.float64] | None = None

    def step(self, weights: npt.ArrayLike, mean_delta: npt.ArrayLike) -> Vector:
        """The next global weights from the current ones and the round's weighted mean delta."""
        x = np.asarray(weights, dtype=np.float64)
        d = np.asarray(mean_delta, dtype=np.float64)
        if x.ndim != 1 or d.shape != x.shape:
            raise ConfigError(f"FedAdam needs a flat delta as long as the weights, got {d.shape} "
                              f"for {x.shape}.")
        if self._m is None or self._v is None:
            self._m, self._v = np.zeros_like(x), np.zeros_like(x)
        elif self._m.shape != x.shape:
            raise ResumeMismatch(f"FedAdam's state is for {self._m.shape[0]} weights, the model has "
                                 f"{x.shape[0]}.")
        s = self.settings
        self._m = s.beta1 * self._m + (1.0 - s.beta1) * d
        self._v = s.beta2 * self._v + (1.0 - s.beta2) * d * d
        self.rounds += 1
        return (x + s.lr * self._m / (np.sqrt(self._v) + s.tau)).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """``{"version", "rounds", "settings", "m", "v"}``; ``m``/``v`` float64 arrays or None."""
        return {"version": _STATE_VERSION, "rounds": self.rounds, "settings": asdict(self.settings),
                "m": None if self._m is None else self._m.copy(),
                "v": None if self._v is None else self._v.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; refuses another version or other settings."""
        if state.get("version") != _STATE_VERSION:
            raise ResumeMismatch(f"FedAdam state version {state.get('version')!r}, expected "
                                 f"{_STATE_VERSION}.")
        if dict(state["settings"]) != asdict(self.settings):
            raise ResumeMismatch(f"FedAdam's state was saved with {dict(state['settings'])}, the "
                                 f"settings are {asdict(self.settings)}.")
        m, v = state["m"], state["v"]
        if (m is None) != (v is None) or (m is not None and np.shape(m) != np.shape(v)):
            raise ResumeMismatch("FedAdam's state has moment vectors that do not match.")
        self.rounds = int(state["rounds"])
        self._m = None if m is None else np.asarray(m, dtype=np.float64).copy()
        self._v = None if v is None else np.asarray(v, dtype=np.float64).copy()

    def state_bytes(self) -> bytes:
        """:meth:`state_dict` as bytes for a Kafka record (an ``.npz``, no pickles)."""
        state = self.state_dict()
        buffer = io.BytesIO()
        arrays: dict[str, npt.NDArray[Any]] = {
            "version": np.array(state["version"]), "rounds": np.array(state["rounds"]),
            "settings": np.array([state["settings"][k] for k in _SETTINGS], dtype=np.float64)}
        if state["m"] is not None:
            arrays["m"], arrays["v"] = state["m"], state["v"]
        np.savez(buffer, allow_pickle=False, **arrays)
        return buffer.getvalue()

    def load_state_bytes(self, data: bytes) -> None:
        """Restore :meth:`state_bytes`."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except (OSError, ValueError) as exc:
            raise ResumeMismatch(f"FedAdam's saved state could not be read: {exc}.") from exc
        if not {"version", "rounds", "settings"} <= arrays.keys():
            raise ResumeMismatch(f"FedAdam's saved state lacks keys: it has {sorted(arrays)}.")
        self.load_state_dict({
            "version": int(arrays["version"]), "rounds": int(arrays["rounds"]),
            "settings": dict(zip(_SETTINGS, (float(x) for x in arrays["settings"]), strict=True)),
            "m": arrays.get("m"), "v": arrays.get("v")})


def _is_float(value: Any) -> bool:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    is_floating = getattr(value, "is_floating_point", None)
    if callable(is_floating):
        return bool(is_floating())
    return bool(np.issubdtype(dtype, np.floating))


def _numpy(value: Any) -> npt.NDArray[Any]:
    if hasattr(value, "detach"):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)

