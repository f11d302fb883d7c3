"""pytest plugin (``-p ws_split_on`` with this directory on PYTHONPATH): runs the dense decode's warp-specialized
kernel with QKᵀ split between its math warpgroups (``dense_decode_ws.SPLIT_S``) in every test process."""

from wavemla.kernels import dense_decode_ws

dense_decode_ws.SPLIT_S = True
