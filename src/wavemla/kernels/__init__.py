"""Triton kernels. Host code calls them through the launchers in each module, never directly.

Naming inside every kernel file (shape letters match the docstrings: B batch, S query tokens per request, H query
heads, D latent width 512, N KV rows of a tile, T flattened query tokens ``B*S``):

- ``i_*``  program ids and loop indices
- ``o_*``  offsets (element or byte offsets)
- ``m_*``  masks
- ``p_*``  pointers
- ``b_*``  register tiles
- ``BLOCK_*`` constexpr tile sizes; other ALL_CAPS arguments are constexpr flags
"""

from wavemla import config
from wavemla.kernels.interpret import fix_scalar_index

# Read from the environment, as Triton reads it: importing Triton here would fix its mode before a CPU tool could
# choose the interpreter (config.use_triton_interpreter, which applies the same fix when it does).
if config.interpreter_requested():
    fix_scalar_index()
