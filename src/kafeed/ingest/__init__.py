"""Ingest: files, SQL and stdin → ``TrainingSample`` records in a Kafka topic, exactly once."""

from kafeed.choices import StdinFormat, TextMode
from kafeed.ingest.mapping import content_id
from kafeed.ingest.options import IngestOptions, IngestProgress, IngestSummary
from kafeed.ingest.progress import PROGRESS_TOPIC, JobProgress, job_id_for, read_latest
from kafeed.ingest.run import ingest
from kafeed.ingest.sources import Source, discover

__all__ = [
    "PROGRESS_TOPIC",
    "IngestOptions",
    "IngestProgress",
    "IngestSummary",
    "JobProgress",
    "Source",
    "StdinFormat",
    "TextMode",
    "content_id",
    "discover",
    "ingest",
    "job_id_for",
    "read_latest",
]
