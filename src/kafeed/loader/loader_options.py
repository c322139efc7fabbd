"""StreamLoader's own arguments, validated once before any worker starts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator


class LoaderOptions(BaseModel):
    """StreamLoader's own arguments, checked before any worker starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_size: StrictInt = Field(ge=1, le=1_000_000)
    num_workers: StrictInt = Field(ge=0, le=256)
    pin_memory: StrictBool = False
    prefetch_factor: StrictInt | None = Field(default=None, ge=1, le=1024)
    sync_ranks: StrictBool | None = None
    multiprocessing_context: Literal["fork", "spawn", "forkserver"] | None = None
    timeout: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    device: str | None = None

    @model_validator(mode="after")
    def _check(self) -> LoaderOptions:
        if self.prefetch_factor is not None and self.num_workers == 0:
            # DataLoader refuses it too: with no workers nothing is fetched ahead.
            raise ValueError("prefetch_factor needs num_workers > 0 (without workers nothing is "
                             "fetched ahead)")
        return self
