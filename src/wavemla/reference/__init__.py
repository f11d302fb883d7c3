"""Pure-PyTorch references (fp64/fp32). No Triton here: these define what the kernels must compute."""

from wavemla.reference.fp8 import dequantize_model1, empty_model1, model1_page_bytes, quantize_model1
from wavemla.reference.sparse_decode import sparse_decode_ref

__all__ = ["dequantize_model1", "empty_model1", "model1_page_bytes", "quantize_model1", "sparse_decode_ref"]
