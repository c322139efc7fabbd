from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TokenDtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_DTYPE_UNSPECIFIED: _ClassVar[TokenDtype]
    TOKEN_DTYPE_UINT16: _ClassVar[TokenDtype]
    TOKEN_DTYPE_UINT32: _ClassVar[TokenDtype]
TOKEN_DTYPE_UNSPECIFIED: TokenDtype
TOKEN_DTYPE_UINT16: TokenDtype
TOKEN_DTYPE_UINT32: TokenDtype

class TrainingSample(_message.Message):
    __slots__ = ("input_data", "target_values", "metadata", "timestamp", "id", "source")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INPUT_DATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_VALUES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    input_data: bytes
    target_values: _containers.RepeatedScalarFieldContainer[float]
    metadata: _containers.ScalarMap[str, str]
    timestamp: int
    id: str
    source: str
    def __init__(self, input_data: _Optional[bytes] = ..., target_values: _Optional[_Iterable[float]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., timestamp: _Optional[int] = ..., id: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class TokenizedDocument(_message.Message):
    __slots__ = ("id", "source", "tokens", "dtype", "num_tokens", "tokenizer", "input_topic", "input_partition", "input_offset", "timestamp", "target_values", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOPIC_FIELD_NUMBER: _ClassVar[int]
    INPUT_PARTITION_FIELD_NUMBER: _ClassVar[int]
    INPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TARGET_VALUES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    source: str
    tokens: bytes
    dtype: TokenDtype
    num_tokens: int
    tokenizer: str
    input_topic: str
    input_partition: int
    input_offset: int
    timestamp: int
    target_values: _containers.RepeatedScalarFieldContainer[float]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., source: _Optional[str] = ..., tokens: _Optional[bytes] = ..., dtype: _Optional[_Union[TokenDtype, str]] = ..., num_tokens: _Optional[int] = ..., tokenizer: _Optional[str] = ..., input_topic: _Optional[str] = ..., input_partition: _Optional[int] = ..., input_offset: _Optional[int] = ..., timestamp: _Optional[int] = ..., target_values: _Optional[_Iterable[float]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
