"""The dense decode's warp-specialized Gluon split kernel from a CPU machine: where it applies, and its sm_90 build
(shared memory within the block limit, the TMA copies, warpgroup MMAs and register reallocation it is made of).
Its numerics run on the GPU lane (tests/kernels/test_dense_decode.py)."""

import pytest
import torch

from conftest import json_from_child
from wavemla import config
from wavemla.kernels import dense_decode_ws as ws

H100_SMEM_PER_BLOCK = 232_448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90 (227 KB)


def _supported(**over):
    q = torch.empty(2, 1, 64, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 1, 576, dtype=torch.bfloat16)
    args = dict(is_fp8=False, block_h=64, block_n=64, arch=90, q=q, kv=kv)
    args.update(over)
    return ws.supported(**args)


def test_applies_only_to_its_shapes():
    bf16 = torch.bfloat16
    assert _supported() == ws.HAVE_GLUON
    assert not _supported(arch=80) and not _supported(arch=120) and not _supported(arch=100)
    assert not _supported(is_fp8=True) and not _supported(block_h=16) and not _supported(block_n=32)
    assert not _supported(q=torch.empty(2, 1, 64, 512, dtype=bf16), kv=torch.empty(4, 64, 1, 512, dtype=bf16))
    assert not _supported(kv=torch.empty(4, 32, 1, 576, dtype=bf16)) and not _supported(kv=torch.empty(4, 61, 1, 576))
    assert not _supported(q=torch.empty(2, 1, 48, 576, dtype=bf16))
    assert not _supported(q=torch.empty(2, 1, 64, 576, dtype=torch.float32))
    assert not _supported(q=torch.empty(2, 1, 64, 640, dtype=bf16)[..., :576])
    if ws.HAVE_GLUON:
        assert _supported(kv=torch.empty(4, 128, 1, 576, dtype=bf16))
        assert _supported(q=torch.empty(2, 2, 64, 576, dtype=bf16))
        assert _supported(q=torch.empty(2, 1, 64, 576, dtype=torch.float16))
        with config.override(WAVEMLA_DENSE_WS="off"):
            assert not _supported()


# Built in a fresh process: the CPU lane's interpreter flag would turn the kernel into an interpreted function.
_BUILD = """
import json, sys, torch
from wavemla.kernels import dense_decode_ws as ws
out = {}
for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
    k = ws.compile_sm90(dtype, causal=True, num_rb=2)
    ptx = k.asm["ptx"]
    out[name] = dict(shared=k.metadata.shared, tma=ptx.count("cp.async.bulk.tensor"),
                     wgmma=ptx.count("wgmma.mma_async"), setmaxnreg="setmaxnreg" in ptx,
                     threads=".reqntid 384" in ptx)
print(json.dumps(out))
"""


@pytest.mark.skipif(not ws.HAVE_GLUON, reason="needs Gluon (Triton 3.5 or newer with its Hopper API)")
def test_sm90_build():
    for name, got in json_from_child(_BUILD).items():
        assert got["shared"] <= H100_SMEM_PER_BLOCK, name
        # q's and a tile's nine boxes loaded, a finished request's four boxes stored by each math warpgroup
        assert got["tma"] == 2 * ws.CHUNKS + 2 * 4, name
        # per math warpgroup: nine QKᵀ wgmma of K = 64 (4 instructions each) and four P·V (4 each)
        assert got["wgmma"] == 2 * (ws.CHUNKS * 4 + 4 * 4), name
        assert got["setmaxnreg"] and got["threads"], name


def test_triton_version_gate(monkeypatch):
    """The kernel is written against Gluon's API of Triton 3.6 and newer (3.5's warp_specialize takes its
    partitions in another form): older Tritons run the Triton kernel."""
    for version, ok in (("3.5.1", False), ("3.6.0", True), ("3.9.0", True), ("4.0.0", True), ("2.3.1", False)):
        monkeypatch.setattr(ws.triton, "__version__", version)
        assert ws._triton_at_least(3, 6) is ok, version
