from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ("protocol",)
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    protocol: int
    def __init__(self, protocol: _Optional[int] = ...) -> None: ...

class DescribeReply(_message.Message):
    __slots__ = ("protocol", "name", "version", "language", "specs_json")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    SPECS_JSON_FIELD_NUMBER: _ClassVar[int]
    protocol: int
    name: str
    version: str
    language: str
    specs_json: bytes
    def __init__(self, protocol: _Optional[int] = ..., name: _Optional[str] = ..., version: _Optional[str] = ..., language: _Optional[str] = ..., specs_json: _Optional[bytes] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("instance", "type", "name", "run", "params_json", "outputs_json")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    instance: str
    type: str
    name: str
    run: str
    params_json: bytes
    outputs_json: bytes
    def __init__(self, instance: _Optional[str] = ..., type: _Optional[str] = ..., name: _Optional[str] = ..., run: _Optional[str] = ..., params_json: _Optional[bytes] = ..., outputs_json: _Optional[bytes] = ...) -> None: ...

class CreateReply(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: str
    def __init__(self, instance: _Optional[str] = ...) -> None: ...

class CloseReply(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("status", "instances", "in_flight", "pid")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    status: str
    instances: int
    in_flight: int
    pid: int
    def __init__(self, status: _Optional[str] = ..., instances: _Optional[int] = ..., in_flight: _Optional[int] = ..., pid: _Optional[int] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("frames",)
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedCompositeFieldContainer[Frame]
    def __init__(self, frames: _Optional[_Iterable[_Union[Frame, _Mapping]]] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("kind", "id", "instance", "port", "data")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Frame.Kind]
        CALL: _ClassVar[Frame.Kind]
        CANCEL: _ClassVar[Frame.Kind]
        GENERATE: _ClassVar[Frame.Kind]
        RESULT: _ClassVar[Frame.Kind]
        ERROR: _ClassVar[Frame.Kind]
        SEND: _ClassVar[Frame.Kind]
        DEBUG: _ClassVar[Frame.Kind]
        STATUS: _ClassVar[Frame.Kind]
        LOG: _ClassVar[Frame.Kind]
    KIND_UNSPECIFIED: Frame.Kind
    CALL: Frame.Kind
    CANCEL: Frame.Kind
    GENERATE: Frame.Kind
    RESULT: Frame.Kind
    ERROR: Frame.Kind
    SEND: Frame.Kind
    DEBUG: Frame.Kind
    STATUS: Frame.Kind
    LOG: Frame.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    kind: Frame.Kind
    id: int
    instance: str
    port: str
    data: bytes
    def __init__(self, kind: _Optional[_Union[Frame.Kind, str]] = ..., id: _Optional[int] = ..., instance: _Optional[str] = ..., port: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
