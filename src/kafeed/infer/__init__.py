"""`kafeed infer`: a trained classifier as an exactly-once consumer of a topic."""

from kafeed.infer.model import ServedModel, check_checkpoint, load_served_model
from kafeed.infer.predict import PredictionBatch, predict_batch
from kafeed.infer.stage import InferSettings, InferStage, InferStats, infer_settings, run_infer

__all__ = [
    "InferSettings",
    "InferStage",
    "InferStats",
    "PredictionBatch",
    "ServedModel",
    "check_checkpoint",
    "infer_settings",
    "load_served_model",
    "predict_batch",
    "run_infer",
]
