"""ODF 0.39 data schemas (RFC-016): ``DataSchema``, ``DataField``, the ``DataType`` variants, and
the extra attributes any of them may carry.

Field order is schema order (``opendatafabric.fbs``); it fixes the FlatBuffers bytes and so
the block hash. Names follow RFC-013: PascalCase ``kind:`` tags and enum names, read in any
case it allows (``RFC013_NAMES``).
"""
from __future__ import annotations

import base64
import binascii
import enum
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from ..objects import default_scalar, odf
from ..shape import I32, U32, U64, Scalar

RFC013_NAMES = True


class TimeUnit(enum.Enum):
    SECOND = ("Second", 0)
    MILLISECOND = ("Millisecond", 1)
    MICROSECOND = ("Microsecond", 2)
    NANOSECOND = ("Nanosecond", 3)


TimeUnit16 = Annotated[TimeUnit, Scalar("h")]  # an int16 enum in the schema


@dataclass(frozen=True)
class ExtraAttributes:
    """Free-form attributes keyed by a namespaced name (``opendatafabric.org/description``).

    Held as their canonical JSON text (compact, keys sorted, as the reference's ``serde_json``
    writes a ``BTreeMap``), which is what FlatBuffers stores; equal attributes are equal text.
    """

    text: str

    @staticmethod
    def from_json(entries: dict[str, Any]) -> ExtraAttributes:
        return ExtraAttributes(json.dumps(entries, sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=False))

    def to_json(self) -> str:
        return self.text

    def to_json_value(self) -> dict[str, Any]:
        return json.loads(self.text)


@dataclass(frozen=True)
class Base64Bytes:
    """Opaque bytes written as base64 in YAML (a legacy raw Arrow schema)."""

    data: bytes

    @staticmethod
    def from_bytes(buf: bytes) -> Base64Bytes:
        return Base64Bytes(bytes(buf))

    def to_bytes(self) -> bytes:
        return self.data

    @staticmethod
    def parse(text: str) -> Base64Bytes:
        try:
            return Base64Bytes(base64.b64decode(text, validate=True))
        except binascii.Error as e:
            raise ValueError(f"not base64: {e}") from None  # the YAML codec names the place

    def __str__(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@odf
class DataTypeBinary:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Binary"
    fixed_length: U64 | None = None


@odf
class DataTypeBool:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Bool"


@odf
class DataTypeDate:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Date"


@odf
class DataTypeDecimal:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Decimal"
    precision: U32 = field(metadata=default_scalar(0))
    scale: I32 = field(metadata=default_scalar(0))


@odf
class DataTypeDuration:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Duration"
    unit: TimeUnit16 | None = None


@odf
class DataTypeFloat16:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Float16"


@odf
class DataTypeFloat32:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Float32"


@odf
class DataTypeFloat64:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Float64"


@odf
class DataTypeInt8:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Int8"


@odf
class DataTypeInt16:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Int16"


@odf
class DataTypeInt32:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Int32"


@odf
class DataTypeInt64:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Int64"


@odf
class DataTypeUInt8:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "UInt8"


@odf
class DataTypeUInt16:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "UInt16"


@odf
class DataTypeUInt32:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "UInt32"


@odf
class DataTypeUInt64:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "UInt64"


@odf
class DataTypeList:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "List"
    item_type: DataType
    fixed_length: U64 | None = None


@odf
class DataTypeMap:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Map"
    key_type: DataType
    value_type: DataType
    keys_sorted: bool | None = None


@odf
class DataTypeNull:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Null"


@odf
class DataTypeOption:
    """A nullable value of ``inner`` (a field without it is required)."""

    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Option"
    inner: DataType


@odf
class DataTypeStruct:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Struct"
    fields: list[DataField]


@odf
class DataTypeTime:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Time"
    unit: TimeUnit16 | None = None


@odf
class DataTypeTimestamp:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "Timestamp"
    unit: TimeUnit16 | None = None
    timezone: str | None = None


@odf
class DataTypeString:
    UNION: ClassVar[str] = "DataType"
    KIND: ClassVar[str] = "String"


DataType = (
    DataTypeBinary | DataTypeBool | DataTypeDate | DataTypeDecimal | DataTypeDuration
    | DataTypeFloat16 | DataTypeFloat32 | DataTypeFloat64 | DataTypeInt8 | DataTypeInt16
    | DataTypeInt32 | DataTypeInt64 | DataTypeUInt8 | DataTypeUInt16 | DataTypeUInt32
    | DataTypeUInt64 | DataTypeList | DataTypeMap | DataTypeNull | DataTypeOption
    | DataTypeStruct | DataTypeTime | DataTypeTimestamp | DataTypeString
)


@odf
class DataField:
    name: str
    type: DataType
    extra: ExtraAttributes | None = None


@odf
class DataSchema:
    fields: list[DataField]
    extra: ExtraAttributes | None = None


UNIONS = {
    "DataType": (
        DataTypeBinary, DataTypeBool, DataTypeDate, DataTypeDecimal, DataTypeDuration,
        DataTypeFloat16, DataTypeFloat32, DataTypeFloat64, DataTypeInt8, DataTypeInt16,
        DataTypeInt32, DataTypeInt64, DataTypeUInt8, DataTypeUInt16, DataTypeUInt32,
        DataTypeUInt64, DataTypeList, DataTypeMap, DataTypeNull, DataTypeOption,
        DataTypeStruct, DataTypeTime, DataTypeTimestamp, DataTypeString,
    ),
}
