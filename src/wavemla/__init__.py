"""wavemla: DeepSeek-V4 sparse MLA decode kernels for every NVIDIA GPU Triton targets.

Public calls::

    wavemla.get_mla_metadata()            # FlashMLA-compatible metadata object
    wavemla.flash_mla_with_kvcache(...)   # FlashMLA-compatible sparse decode
    wavemla.sparse_mla_decode(...)        # the native keyword-argument call
"""

from wavemla.api import MLAMetadata, flash_mla_with_kvcache, get_mla_metadata, sparse_mla_decode

__version__ = "0.1.0"
__all__ = ["MLAMetadata", "__version__", "flash_mla_with_kvcache", "get_mla_metadata", "sparse_mla_decode"]
