"""The dense decode's warp-specialized Gluon split kernel from a CPU machine: where it applies, and its sm_90 build
(shared memory within the block limit, the TMA copies, warpgroup MMAs and register reallocation it is made of).
Its numerics run on the GPU lane (tests/kernels/test_dense_decode.py)."""

import pytest
import torch

from tests.conftest import json_from_child
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


def test_empty_tensors_run_the_triton_kernel():
    """A cache of no blocks is legal (every block id is then outside it: out 0, lse +inf), as is an empty batch; a
    TMA descriptor cannot describe zero rows, so neither may select the Gluon kernel."""
    bf16 = torch.bfloat16
    assert not _supported(kv=torch.empty(0, 64, 1, 576, dtype=bf16))
    assert not _supported(q=torch.empty(0, 1, 64, 576, dtype=bf16))
    if ws.HAVE_GLUON:
        kv = torch.empty(0, 64, 1, 576, dtype=bf16).view(0, 576)
        with pytest.raises(AssertionError, match="shape must be positive"):
            ws.TensorDescriptor(kv, list(kv.shape), list(kv.stride()), [ws.BLOCK, ws.BLOCK], ws.smem_layout())


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
        # q's and a tile's nine boxes loaded; by each math warpgroup, four boxes stored for a finished request's
        # output and four for a cut request's partial
        assert got["tma"] == 2 * ws.CHUNKS + 2 * 2 * 4, name
        # per math warpgroup: nine QKᵀ wgmma of K = 64 (4 instructions each) and four P·V (4 each)
        assert got["wgmma"] == 2 * (ws.CHUNKS * 4 + 4 * 4), name
        assert got["setmaxnreg"] and got["threads"], name


@pytest.mark.skipif(not ws.HAVE_GLUON, reason="needs Gluon (Triton 3.5 or newer with its Hopper API)")
def test_partials_are_of_q_dtype():
    """Cut requests' partials leave by TMA in q's dtype: any other workspace is refused, naming o_ws, before a
    launch."""
    b, parts, m = 2, 3, 64
    q = torch.empty(b, 1, m, 576, dtype=torch.bfloat16)
    args = dict(q=q, out=torch.empty(b, 1, m, 512, dtype=torch.bfloat16), lse=torch.empty(b, 1, m),
                lse_ws=torch.empty(b + parts, m), kv=torch.empty(4, 64, 1, 576, dtype=torch.bfloat16),
                block_table=torch.zeros(b, 2, dtype=torch.int32), cache_seqlens=torch.zeros(b, dtype=torch.int32),
                sched=torch.zeros(parts, 4, dtype=torch.int32), causal=False, softmax_scale=0.1,
                num_parts=parts)  # fmt: skip
    wrong = (
        torch.empty(b + parts, m, 512),  # fp32
        torch.empty(b + parts, m, 512, dtype=torch.float16),  # not q's dtype
        torch.empty(b + parts - 1, m, 512, dtype=torch.bfloat16),  # a slot short
        torch.empty(b + parts, m, 1024, dtype=torch.bfloat16)[..., :512],  # not contiguous
        torch.empty(b + parts, m * 512, dtype=torch.bfloat16),  # not [slots, rows, 512]
    )
    for o_ws in wrong:
        with pytest.raises(ValueError, match="o_ws"):
            ws.dense_decode_split_ws(o_ws=o_ws, **args)


def test_triton_version_gate(monkeypatch):
    """The kernel is written against Gluon's API of Triton 3.6 and newer (3.5's warp_specialize takes its
    partitions in another form): older Tritons run the Triton kernel."""
    for version, ok in (("3.5.1", False), ("3.6.0", True), ("3.9.0", True), ("4.0.0", True), ("2.3.1", False)):
        monkeypatch.setattr(ws.triton, "__version__", version)
        assert ws._triton_at_least(3, 6) is ok, version


@pytest.mark.gpu
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
@pytest.mark.parametrize("poison", ["row", "q"])
def test_gpu_nan_input_gives_nan_output_and_lse(poison, cut):
    """A NaN score (a NaN in q, or in a key a request reads) stays NaN in out and lse, as in the reference, in the
    warp-specialized kernel's finished requests and in its cut requests' partials merged by the combine."""
    from wavemla import dense_mla_decode, get_mla_metadata
    from wavemla.device import device_arch
    from wavemla.reference import dense_decode_ref
    from wavemla.testing import TOLERANCES, assert_close, dense_out_tolerance, make_dense_decode_inputs

    if not torch.cuda.is_available() or device_arch("cuda") != 90 or not ws.HAVE_GLUON:
        pytest.skip("the warp-specialized kernel runs on sm_90 with Gluon")
    inputs = make_dense_decode_inputs(lengths=[700, 333, 64], h_q=64, page=64, device="cuda", seed=34)
    if poison == "q":
        inputs["q"][0, 0, 3, 7] = float("nan")
    else:
        inputs["k_cache"][int(inputs["block_table"][0, 2]), 5, 0, 100] = float("nan")  # key 133 of request 0
    ref_out, ref_lse = dense_decode_ref(**inputs)
    nan_out, nan_lse = torch.isnan(ref_out).cuda(), torch.isnan(ref_lse).cuda()
    assert bool(nan_lse.any()) and not bool(nan_lse.all())
    meta, _ = get_mla_metadata()
    tiles = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_DENSE_ALIGN="off")
    with config.override(**tiles, WAVEMLA_TARGET_CTAS=24 if cut else 1):
        out, lse = dense_mla_decode(**inputs, metadata=meta)
    assert "_dense_mla_decode_ws_kernel" in meta.split_kernel.name
    assert meta.req is not None and (int(meta.req[0, 1]) > int(meta.req[0, 0])) == cut, meta.req
    assert torch.equal(torch.isnan(out), nan_out) and torch.equal(torch.isnan(lse), nan_lse)
    tol = dense_out_tolerance(inputs["k_cache"], "gpu")
    assert_close("out", out[~nan_out].double(), ref_out.cuda()[~nan_out], tol)
    assert_close("lse", lse[~nan_lse], ref_lse.cuda()[~nan_lse], TOLERANCES[("lse", "gpu")])
