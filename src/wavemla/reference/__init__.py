"""Pure-PyTorch references (fp32/fp64). No Triton here: these define what the kernels must compute."""

from wavemla.reference.dense_decode import dense_decode_ref
from wavemla.reference.fp8 import dequantize_model1, empty_model1, model1_page_bytes, quantize_model1
from wavemla.reference.fp8_rows import dequantize_fp8_rows, quantize_fp8_rows
from wavemla.reference.fp8_v32 import dequantize_v32, quantize_v32
from wavemla.reference.sparse_decode import sparse_decode_ref

__all__ = [
    "dense_decode_ref",
    "dequantize_fp8_rows",
    "dequantize_model1",
    "dequantize_v32",
    "empty_model1",
    "model1_page_bytes",
    "quantize_fp8_rows",
    "quantize_model1",
    "quantize_v32",
    "sparse_decode_ref",
]
