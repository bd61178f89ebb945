"""Element sizes in bytes of the dtype names PyTorch, c10 and NCCL write into traces and logs."""

from __future__ import annotations

_SIZES = {
    # c10 / PyTorch names as they appear in record_param_comms `dtype` and `Input type`
    "float": 4, "float32": 4, "c10::float": 4, "double": 8, "float64": 8,
    "half": 2, "float16": 2, "c10::half": 2, "bfloat16": 2, "c10::bfloat16": 2,
    "long": 8, "long int": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2,
    "char": 1, "signed char": 1, "int8": 1, "byte": 1, "unsigned char": 1, "uint8": 1,
    "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1, "unsigned int": 4, "uint32": 4, "unsigned long": 8, "uint64": 8,
    # NCCL names (ncclDataType_t, kernel-name suffixes)
    "ncclint8": 1, "ncclchar": 1, "nccluint8": 1, "ncclint32": 4, "ncclint": 4,
    "nccluint32": 4, "ncclint64": 8, "nccluint64": 8, "ncclfloat16": 2, "ncclhalf": 2,
    "ncclfloat32": 4, "ncclfloat": 4, "ncclfloat64": 8, "nccldouble": 8, "ncclbfloat16": 2,
    "ncclfloat8e4m3": 1, "ncclfloat8e5m2": 1,
    "i8": 1, "u8": 1, "i32": 4, "u32": 4, "i64": 8, "u64": 8, "f16": 2, "f32": 4,
    "f64": 8, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1, "fp8": 1, "fp16": 2, "fp32": 4, "bf16_t": 2,
}  # fmt: skip


def dtype_size(name: str | None) -> int | None:
    """Bytes per element of a dtype name, or None when unknown."""
    if not name:
        return None
    return _SIZES.get(name.strip().lower())
