"""`kafeed prepare`: raw TrainingSample records → normalized, filtered, deduplicated, tokenized documents.

A stage on :mod:`kafeed.stream`, the exactly-once core; see :mod:`kafeed.prepare.processor`.
"""

from kafeed.prepare.dedup import DedupState, content_hash
from kafeed.prepare.filters import FILTER_NAMES, first_failed_filter
from kafeed.prepare.inputs import resolve_inputs, resolve_on_cluster
from kafeed.prepare.normalize import normalize_text
from kafeed.prepare.pipeline import BatchPipeline, BatchResult
from kafeed.prepare.processor import PrepareProcessor, PrepareStage, run_prepare
from kafeed.prepare.settings import (
    DedupSettings,
    FilterSettings,
    NormalizeSettings,
    PrepareSettings,
    TokenizerSettings,
    load_prepare_settings,
)
from kafeed.prepare.stats import PrepareStats
from kafeed.prepare.tokenize import BatchTokenizer, ByteTokenizer, TokenBatch, load_tokenizer
from kafeed.stream import KafkaTuning

__all__ = [
    "FILTER_NAMES",
    "BatchPipeline",
    "BatchResult",
    "BatchTokenizer",
    "ByteTokenizer",
    "DedupSettings",
    "DedupState",
    "FilterSettings",
    "KafkaTuning",
    "NormalizeSettings",
    "PrepareProcessor",
    "PrepareSettings",
    "PrepareStage",
    "PrepareStats",
    "TokenBatch",
    "TokenizerSettings",
    "content_hash",
    "first_failed_filter",
    "load_prepare_settings",
    "load_tokenizer",
    "normalize_text",
    "resolve_inputs",
    "resolve_on_cluster",
    "run_prepare",
]
