"""Value formats: how the records of any producer's topic become samples, one registry for every stage.

:mod:`~kafeed.formats.settings` declares each input topic's format once (the ``[formats]``
table, flags for one-off runs); :mod:`~kafeed.formats.registry` holds the formats and the
:class:`Decoders` every stage that reads raw records calls (prepare, route, infer, archive,
the samples loader); :mod:`~kafeed.formats.mapping` maps decoded objects onto samples with
the field rules of ``kafeed ingest``. docs/formats.md has an example per producer.
"""

from kafeed.formats.mapping import FieldMapping, Rejected, parse_labels
from kafeed.formats.registry import FORMATS, Decoded, Decoders, ValueFormat, record_id
from kafeed.formats.settings import FormatOverride, FormatSettings, TopicFormat, ValueFormatName, load_formats

__all__ = [
    "FORMATS",
    "Decoded",
    "Decoders",
    "FieldMapping",
    "FormatOverride",
    "FormatSettings",
    "Rejected",
    "TopicFormat",
    "ValueFormat",
    "ValueFormatName",
    "load_formats",
    "parse_labels",
    "record_id",
]
