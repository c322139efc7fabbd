"""Run a stage as a group of worker processes whose size follows the backlog."""

from kafeed.scale.policy import Decision, ScalePolicy, ScaleSettings
from kafeed.scale.supervisor import Supervisor

__all__ = ["Decision", "ScalePolicy", "ScaleSettings", "Supervisor"]
