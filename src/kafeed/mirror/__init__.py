"""Site clusters mirrored into the training cluster with MirrorMaker 2 (``kafeed mirror``).

:mod:`~kafeed.mirror.config` reads the TOML file, :mod:`~kafeed.mirror.checks` refuses a
bad one before anything is written, :mod:`~kafeed.mirror.render` writes MirrorMaker's
dedicated-mode properties, :mod:`~kafeed.mirror.process` runs its JVM,
:mod:`~kafeed.mirror.progress` tells how far each site has got, and
:mod:`~kafeed.mirror.run` ties them together (run until stopped, or drain).
"""

from kafeed.mirror.config import ClusterSettings, MirrorSettings, SiteSettings, load_mirror_settings
from kafeed.mirror.progress import PartitionProgress, SiteProgress, site_progress
from kafeed.mirror.run import MirrorRun, run_mirror

__all__ = [
    "ClusterSettings",
    "MirrorRun",
    "MirrorSettings",
    "PartitionProgress",
    "SiteProgress",
    "SiteSettings",
    "load_mirror_settings",
    "run_mirror",
    "site_progress",
]
