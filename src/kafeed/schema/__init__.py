"""Record schema (Protobuf) and codecs."""

from kafeed.choices import RawFormat
from kafeed.schema.avro import (
    FORMAT_HEADER,
    TRAINING_SAMPLE_AVRO,
    decode_avro,
    decode_raw,
    encode_avro,
    encode_raw,
    format_headers,
    raw_format_of,
)
from kafeed.schema.codec import (
    UINT16,
    UINT32,
    decode_document,
    decode_sample,
    make_document,
    make_sample,
    pack_tokens,
    token_dtype_for,
    unpack_tokens,
)
from kafeed.schema.records_pb2 import TokenDtype, TokenizedDocument, TrainingSample

__all__ = [
    "FORMAT_HEADER",
    "TRAINING_SAMPLE_AVRO",
    "UINT16",
    "UINT32",
    "RawFormat",
    "TokenDtype",
    "TokenizedDocument",
    "TrainingSample",
    "decode_avro",
    "decode_document",
    "decode_raw",
    "decode_sample",
    "encode_avro",
    "encode_raw",
    "format_headers",
    "make_document",
    "make_sample",
    "pack_tokens",
    "raw_format_of",
    "token_dtype_for",
    "unpack_tokens",
]
