"""Record schema (Protobuf) and codecs."""

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
    "UINT16",
    "UINT32",
    "TokenDtype",
    "TokenizedDocument",
    "TrainingSample",
    "decode_document",
    "decode_sample",
    "make_document",
    "make_sample",
    "pack_tokens",
    "token_dtype_for",
    "unpack_tokens",
]
