"""wavemla: DeepSeek MLA decode kernels (V4 sparse, V3 paged dense) and the V4/V3.2 sparse prefill for every NVIDIA GPU
Triton targets.

Public calls::

    wavemla.get_mla_metadata()            # FlashMLA-compatible metadata object
    wavemla.flash_mla_with_kvcache(...)   # FlashMLA-compatible decode: sparse with indices, dense without
    wavemla.sparse_mla_decode(...)        # the native sparse call (keyword arguments)
    wavemla.dense_mla_decode(...)         # the native paged dense call (keyword arguments)
    wavemla.sparse_mla_prefill(...)       # sparse prefill: FlashMLA's flash_mla_sparse_fwd
    wavemla.flash_mla.install()           # stand in for `import flash_mla` in an engine's process
    wavemla.hf_attention.register()       # attn_implementation="wavemla" for transformers' DeepSeek-V4
"""

from wavemla.api import (
    MLAMetadata,
    dense_mla_decode,
    flash_mla_with_kvcache,
    get_mla_metadata,
    sparse_mla_decode,
    sparse_mla_prefill,
)

__version__ = "0.1.0"
__all__ = [
    "MLAMetadata",
    "__version__",
    "dense_mla_decode",
    "flash_mla_with_kvcache",
    "get_mla_metadata",
    "sparse_mla_decode",
    "sparse_mla_prefill",
]
