"""The sparse decode's warp-specialized Gluon split kernel: where it applies and its sm_90 build (CPU), and on the GPU
lane its outputs against the fp64 reference and the Triton kernel, its bits run to run and under CUDA-graph replay."""

import pytest
import torch

from tests.conftest import DEVICE, capture_graph, json_from_child
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.kernels import sparse_decode_ws as ws
from wavemla.reference import sparse_decode_ref
from wavemla.testing import TOLERANCES, assert_close, make_sparse_decode_inputs

H100_SMEM_PER_BLOCK = 232_448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90 (227 KB)
TILES = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)
CSA = dict(topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048)
HCA = dict(topk=128, page=256, extra_topk=1024, extra_page=2)
MERGE_ON = {"WAVEMLA_SPARSE_WS_MERGE": "on"}


def _supported(**over):
    q = torch.empty(2, 1, 64, 512, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 1, 584, dtype=torch.uint8)
    args = dict(is_fp8=True, block_h=64, block_n=64, arch=90, q=q, kv=kv, extra_kv=None)
    args.update(over)
    return ws.supported(**args)


def test_applies_only_to_its_shapes():
    assert _supported() == ws.HAVE_GLUON
    assert not _supported(arch=80) and not _supported(arch=89) and not _supported(arch=100)
    assert not _supported(arch=120)
    assert not _supported(is_fp8=False) and not _supported(block_h=16) and not _supported(block_n=32)
    assert not _supported(q=torch.empty(2, 1, 48, 512, dtype=torch.bfloat16))
    assert not _supported(q=torch.empty(2, 1, 64, 1024, dtype=torch.bfloat16)[..., :512])  # head rows not packed
    assert not _supported(kv=torch.empty(4 * 64 * 584 + 8, dtype=torch.uint8)[8:].view(4, 64, 1, 584))
    if ws.HAVE_GLUON:
        assert _supported(q=torch.empty(3, 2, 128, 512, dtype=torch.float16))
        assert _supported(extra_kv=torch.empty(9, 2, 1, 584, dtype=torch.uint8))
        with config.override(WAVEMLA_SPARSE_WS="off"):
            assert not _supported()


def test_applies_only_where_query_tokens_start_16_byte_aligned():
    """The gather prefetches the next query token's rows by bulk copies, which take 16-byte aligned addresses: q whose
    token or batch stride is not a multiple of 16 bytes runs the Triton kernel (a stride over one token is not used)."""
    rows = 64 * 512
    pos_odd = torch.empty(2, 2, rows + 4, dtype=torch.bfloat16)[..., :rows].unflatten(-1, (64, 512))
    batch_odd = torch.empty(2, rows + 4, dtype=torch.bfloat16)[:, :rows].unflatten(-1, (1, 64, 512))
    assert pos_odd.data_ptr() % 16 == 0 and pos_odd.stride(1) == rows + 4 and batch_odd.stride(0) == rows + 4
    assert not _supported(q=pos_odd) and not _supported(q=batch_odd)
    one_token = torch.empty(rows + 8, dtype=torch.bfloat16).as_strided((1, 1, 64, 512), (rows + 4, 3, 512, 1))
    assert _supported(q=one_token) == ws.HAVE_GLUON
    if ws.HAVE_GLUON:
        padded = torch.empty(2, 2, rows + 8, dtype=torch.float16)[..., :rows].unflatten(-1, (64, 512))
        assert _supported(q=padded)


# Built in a fresh process: the CPU lane's interpreter flag would turn the kernel into an interpreted function.
_BUILD = """
import json
import re
from wavemla.kernels import sparse_decode_ws as ws


def instructions(ptx):
    body = ptx[: ptx.find(".section\\t.debug")] if ".section\\t.debug" in ptx else ptx
    lines = (ln.strip() for ln in body.splitlines())
    return sum(1 for ln in lines if ln and not ln.startswith((".", "//", "$", "{", "}", "(", ")")) and ln[-1] != ":")


out = {}
for name, kw in (("csa", dict(page=256, page_x=64)), ("swa", dict(has_extra=False, has_len=False, has_sink=False)),
                 ("csa-pieces", dict(page=256, page_x=64, pieces=True)),
                 ("csa-merge", dict(page=256, page_x=64, merge=True)),
                 ("csa-pieces-merge", dict(page=256, page_x=64, pieces=True, merge=True))):
    k = ws.compile_sm90(**kw)
    ptx = k.asm["ptx"]
    out[name] = dict(shared=k.metadata.shared, wgmma=ptx.count("wgmma.mma_async"), setmaxnreg="setmaxnreg" in ptx,
                     cvt=ptx.count("cvt.rn.f16x2.e4m3x2"), prefetch=ptx.count("cp.async.bulk.prefetch.L2"),
                     threads=".reqntid 384" in ptx, ex2=ptx.count("ex2.approx"), instructions=instructions(ptx),
                     atoms=ptx.count("atom.acq_rel.gpu.global.add.u32"), tma_stores=ptx.count("cp.async.bulk.tensor"),
                     bulk_done=ptx.count("fence.proxy.async.global"),
                     bar_red=sorted(set(re.findall("bar[.]red[.]or[.]pred[^,]*,[^0-9]*([0-9]+),[^0-9]*([0-9]+)", ptx))),
                     bar_ids=sorted({int(i) for i in re.findall("bar[.]sync[^0-9]*([0-9]+)", ptx)}))
print(json.dumps(out))
"""


@pytest.mark.skipif(not ws.HAVE_GLUON, reason="needs Gluon (Triton 3.6 or newer with its Hopper API)")
def test_sm90_build():
    builds = json_from_child(_BUILD)
    for name, got in builds.items():
        assert got["shared"] <= H100_SMEM_PER_BLOCK, name
        # per math warpgroup: eight QKᵀ wgmma of K = 64 (4 instructions each) and four P·V of K = 64 (4 each)
        assert got["wgmma"] == 2 * (ws.CHUNKS * 4 + 4 * 4), name
        # each gather thread decodes eight words (two rows of four) of each of the seven e4m3 boxes, two pairs a word
        assert got["cvt"] == 7 * 8 * 2, name
        assert got["prefetch"] >= 2 and got["setmaxnreg"] and got["threads"], name
    # a whole token's output leaves by TMA (four boxes a math warpgroup), and so does a cut token's partial except
    # with batch-invariant pieces (a further piece keeps q's shared memory: from registers); where the kernel merges
    # tokens cut between programs, the copies' writes complete before the count (the full wait and a proxy fence)
    assert builds["csa"]["tma_stores"] == builds["swa"]["tma_stores"] == builds["csa-merge"]["tma_stores"] == 2 * 2 * 4
    for name in ("csa-pieces", "csa-pieces-merge"):
        assert builds[name]["tma_stores"] == 2 * 4, name
    assert (
        builds["csa-merge"]["bulk_done"] > 0
        and builds["csa"]["bulk_done"] == builds["csa-pieces-merge"]["bulk_done"] == 0
    )
    # batch-invariant pieces compile the in-program merge in (its exp2 of the piece weights and the sink), the
    # default launch leaves it out
    assert builds["csa-pieces"]["ex2"] > builds["csa"]["ex2"]
    # ...as one loop: code run once per held token is fetched cold, and unrolled (1.58x the default build's PTX
    # instructions with Triton 3.6, against 1.21x as a loop: 2026-12-02-sparse-ws-ptx-size-triton36.txt) it cost a
    # held token about 5 µs on the H200 (docs/sparse-decode.md, "Instruction fetch")
    assert builds["csa-pieces"]["instructions"] <= 1.3 * builds["csa"]["instructions"]
    # the merge of tokens cut between programs: one count a math warpgroup, each learning its result on a named
    # barrier of its own (8 and 9) that the compiler's partitions do not use; one call site of the merge code
    assert builds["csa"]["atoms"] == builds["csa-pieces"]["atoms"] == 0 and builds["csa"]["bar_red"] == []
    for name in ("csa-merge", "csa-pieces-merge"):
        assert builds[name]["atoms"] == 2 and builds[name]["bar_red"] == [["8", "128"], ["9", "128"]], name
        assert max(builds[name]["bar_ids"]) < 8, name
        assert builds[name]["instructions"] <= 1.3 * builds["csa"]["instructions"], name


# --- GPU lane ----------------------------------------------------------------------------------------------------

GPU_CASES = [
    pytest.param(dict(batch=8, h_q=64, **CSA), {}, id="csa-b8"),
    pytest.param(dict(batch=4, h_q=64, topk=128, page=256, extra_topk=1024, extra_page=2), {}, id="hca-b4"),
    pytest.param(dict(batch=5, s_q=2, h_q=128, **CSA), {}, id="csa-s2-h128"),
    pytest.param(dict(batch=67, h_q=64, **dict(CSA, extra_pool=999)), {}, id="csa-b67"),
    pytest.param(dict(batch=8, h_q=64, invalid_fraction=0.3, **CSA), {}, id="invalid30"),
    pytest.param(dict(batch=8, h_q=64, sink=False, **CSA), {}, id="no-sink"),
    pytest.param(dict(batch=6, h_q=64, topk=128, page=64), {}, id="window-only"),
    pytest.param(dict(batch=8, h_q=64, **CSA), {"WAVEMLA_NUM_SPLITS": 3}, id="splits3"),
    pytest.param(dict(batch=3, h_q=64, **CSA), {"WAVEMLA_TARGET_CTAS": 7}, id="ctas7"),
    pytest.param(dict(batch=9, h_q=64, **CSA), {"WAVEMLA_BATCH_INVARIANT": True}, id="batch-invariant"),
    # batch-invariant pieces merged in their program (every token held by one), and both ways in one launch
    pytest.param(dict(batch=100, h_q=64, **CSA), {"WAVEMLA_BATCH_INVARIANT": True}, id="batch-invariant-held"),
    pytest.param(
        dict(batch=140, h_q=64, topk=128, page=256, extra_topk=1024, extra_page=2),
        {"WAVEMLA_BATCH_INVARIANT": True},
        id="hca-batch-invariant-mixed",
    ),
    # the same merges with two query tokens a request and with two head blocks (held and cut tokens in one launch)
    pytest.param(
        dict(batch=100, s_q=2, h_q=64, **CSA),
        {"WAVEMLA_BATCH_INVARIANT": True, "WAVEMLA_NUM_SPLITS": 2},
        id="s2-batch-invariant-mixed",
    ),
    pytest.param(
        dict(batch=100, h_q=128, **CSA),
        {"WAVEMLA_BATCH_INVARIANT": True, "WAVEMLA_NUM_SPLITS": 2},
        id="h128-batch-invariant-mixed",
    ),
    # tokens cut between programs merged in the kernel (the piece completing a token's count merges it): two pieces,
    # three, many (one tile a program), two query tokens and two head blocks, batch-invariant pieces cut between
    # programs, and the same through the combine kernel
    pytest.param(dict(batch=170, h_q=64, **CSA), MERGE_ON, id="merge-b170"),
    pytest.param(dict(batch=8, h_q=64, **CSA), {"WAVEMLA_NUM_SPLITS": 3, **MERGE_ON}, id="merge-splits3"),
    pytest.param(dict(batch=3, h_q=64, **CSA), {"WAVEMLA_TARGET_CTAS": 30, **MERGE_ON}, id="merge-one-tile-programs"),
    pytest.param(dict(batch=37, s_q=2, h_q=128, **CSA), {"WAVEMLA_NUM_SPLITS": 2, **MERGE_ON}, id="merge-s2-h128"),
    pytest.param(
        dict(batch=140, h_q=64, **HCA),
        {"WAVEMLA_BATCH_INVARIANT": True, **MERGE_ON},
        id="merge-hca-batch-invariant-mixed",
    ),
    pytest.param(dict(batch=170, h_q=64, **CSA), {"WAVEMLA_SPARSE_WS_MERGE": "off"}, id="combine-b170"),
    # padded tokens (Plan.token_units): 4 pieces of a 10-tile CSA token (3, 3, 3, 1), 5 of an 18-tile HCA one
    # (4, 4, 4, 4, 2), two query tokens and two head blocks, and the pieces merged in the kernel
    pytest.param(dict(batch=30, h_q=64, **CSA), {"WAVEMLA_NUM_SPLITS": 4}, id="padded-csa-b30"),
    pytest.param(dict(batch=20, h_q=64, **HCA), {"WAVEMLA_NUM_SPLITS": 5}, id="padded-hca-b20"),
    pytest.param(dict(batch=7, s_q=2, h_q=128, **CSA), {"WAVEMLA_NUM_SPLITS": 4}, id="padded-s2-h128"),
    pytest.param(dict(batch=30, h_q=64, **CSA), {"WAVEMLA_NUM_SPLITS": 4, **MERGE_ON}, id="merge-padded-csa"),
]


def _run(kwargs, knobs, ws_knob):
    with config.override(**TILES, **knobs, WAVEMLA_SPARSE_WS=ws_knob):
        meta, _ = get_mla_metadata()
        out, lse = sparse_mla_decode(**kwargs, metadata=meta)
    return out, lse, meta.split_kernel.name


def _check_both(kwargs, knobs):
    """The Gluon kernel (where the GPU runs it) and the Triton kernel, each against the reference and each other."""
    keys = ("topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length", "attn_sink")
    ref_out, ref_lse = sparse_decode_ref(kwargs["q"], kwargs["kv_cache"], kwargs["indices"],
                                         **{k: kwargs.get(k) for k in keys})  # fmt: skip
    out, lse, name = _run(kwargs, knobs, "on")
    out_t, lse_t, name_t = _run(kwargs, knobs, "off")
    from wavemla.device import device_arch

    assert ("_sparse_mla_decode_ws_kernel" in name) == (device_arch(DEVICE) == 90 and ws.HAVE_GLUON)
    assert "ws" not in name_t
    for o, l_ in ((out, lse), (out_t, lse_t)):
        assert_close("out", o, ref_out, TOLERANCES[("out", "gpu")])
        assert_close("lse", l_, ref_lse, TOLERANCES[("lse", "gpu")])
    # each rounds P to fp16 at its own point: close, not equal
    assert (out.float() - out_t.float()).abs().max().item() <= 1e-2 * ref_out.abs().max().item()
    assert torch.equal(torch.isinf(lse), torch.isinf(lse_t))


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "knobs"), GPU_CASES)
def test_gpu_matches_reference_and_triton_kernel(shape, knobs):
    inputs = make_sparse_decode_inputs(**shape, fp8=True, dtype=torch.bfloat16, device="cuda", seed=5)
    _check_both({k: v for k, v in inputs.items() if v is not None}, knobs)


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", [{}, {"WAVEMLA_NUM_SPLITS": 4}], ids=["planned", "padded"])
def test_gpu_list_lengths_zero_and_partial_tiles(knobs):
    """Per-request lengths on both lists, 0 included: tiles past a length are skipped by both partitions alike
    (also in pieces of padded tokens, whose last piece holds one tile and two empty units)."""
    inputs = make_sparse_decode_inputs(batch=8, h_q=64, **CSA, fp8=True, device="cuda", seed=6)
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    kwargs["topk_length"] = torch.tensor([0, 1, 63, 64, 65, 127, 128, 100], dtype=torch.int32, device="cuda")
    kwargs["extra_topk_length"] = torch.tensor([512, 0, 1, 300, 64, 511, 129, 2], dtype=torch.int32, device="cuda")
    _check_both(kwargs, knobs)
    if knobs:
        return
    kwargs["topk_length"] = torch.zeros(8, dtype=torch.int32, device="cuda")
    kwargs["extra_topk_length"] = torch.zeros(8, dtype=torch.int32, device="cuda")
    out, lse, _ = _run(kwargs, {}, "on")
    assert torch.all(out == 0) and torch.all(torch.isinf(lse) & (lse > 0))


@pytest.mark.gpu
def test_gpu_bits_repeat_and_survive_graph_replay():
    inputs = make_sparse_decode_inputs(batch=40, h_q=64, **CSA, fp8=True, device="cuda", seed=7)
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    with config.override(**TILES, WAVEMLA_SPARSE_WS="on", WAVEMLA_NUM_SPLITS=2):
        meta, _ = get_mla_metadata()
        first = sparse_mla_decode(**kwargs, metadata=meta)
        again = sparse_mla_decode(**kwargs, metadata=meta)
        graph, captured = capture_graph(lambda: sparse_mla_decode(**kwargs, metadata=meta))
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert torch.equal(captured[0], first[0]) and torch.equal(captured[1], first[1])


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("shape", "knobs"),
    [
        pytest.param(dict(batch=170, h_q=64, **CSA), {}, id="b170"),
        pytest.param(dict(batch=8, h_q=64, **CSA), {"WAVEMLA_NUM_SPLITS": 3}, id="splits3"),
        pytest.param(dict(batch=37, s_q=2, h_q=128, **CSA), {"WAVEMLA_NUM_SPLITS": 2}, id="s2-h128"),
        pytest.param(dict(batch=140, h_q=64, **HCA), {"WAVEMLA_BATCH_INVARIANT": True}, id="hca-batch-invariant"),
        pytest.param(dict(batch=20, h_q=64, **HCA), {"WAVEMLA_NUM_SPLITS": 5}, id="padded-hca"),
    ],
)
def test_gpu_merge_in_kernel_has_the_combine_bits(shape, knobs):
    """Cut tokens merged by the split kernel (the piece completing a token's count) and by the combine kernel: the
    same arithmetic in the same slot order, so the same bits; the counts are back to zero after each call, also
    under CUDA-graph replay (the next call's counting starts from them)."""
    from wavemla.device import device_arch

    if device_arch(DEVICE) != 90 or not ws.HAVE_GLUON:
        pytest.skip("the warp-specialized kernel runs on sm_90 with Gluon")
    inputs = make_sparse_decode_inputs(**shape, fp8=True, dtype=torch.bfloat16, device="cuda", seed=8)
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    got = {}
    for merge in ("on", "off"):
        with config.override(**TILES, **knobs, WAVEMLA_SPARSE_WS="on", WAVEMLA_SPARSE_WS_MERGE=merge):
            meta, _ = get_mla_metadata()
            first = sparse_mla_decode(**kwargs, metadata=meta)
            assert meta.plan.ws_merge == (merge == "on") and meta.plan.writes_partials
            assert "_sparse_mla_decode_ws_kernel" in meta.split_kernel.name
            assert meta.counts is not None and not torch.any(meta.counts)
            graph, captured = capture_graph(lambda meta=meta: sparse_mla_decode(**kwargs, metadata=meta))
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            assert not torch.any(meta.counts)
            assert torch.equal(captured[0], first[0]) and torch.equal(captured[1], first[1])
            got[merge] = first
    assert torch.equal(got["on"][0], got["off"][0]) and torch.equal(got["on"][1], got["off"][1])


@pytest.mark.skipif(not ws.HAVE_GLUON, reason="needs Gluon (Triton 3.6 or newer with its Hopper API)")
def test_launcher_rejects_counts_it_cannot_use():
    """The in-kernel merge's counters: int32, two for each token and head block; anything else is refused by name
    before a launch."""
    q = torch.zeros(3, 1, 128, 512, dtype=torch.bfloat16)
    kv = torch.zeros(4, 64, 1, 584, dtype=torch.uint8)
    args = dict(q=q, out=torch.empty_like(q), lse=torch.empty(3, 1, 128), o_ws=None, lse_ws=None, kv=kv,
                indices=torch.zeros(3, 1, 64, dtype=torch.int32), topk_length=None, extra_kv=None,
                extra_indices=None, extra_topk_length=None, attn_sink=None, softmax_scale=0.04, units_per_part=1,
                num_parts=3)  # fmt: skip
    with pytest.raises(ValueError, match=r"counts: expected int32 with at least 12 elements"):
        ws.sparse_decode_split_ws(**args, counts=torch.zeros(11, dtype=torch.int32))
    with pytest.raises(ValueError, match="counts: expected int32"):
        ws.sparse_decode_split_ws(**args, counts=torch.zeros(12, dtype=torch.int64))


@pytest.mark.skipif(not ws.HAVE_GLUON, reason="needs Gluon (Triton 3.6 or newer with its Hopper API)")
def test_launcher_rejects_outputs_wider_than_its_boxes():
    """The output's and the partials' rows leave by TMA through q's fp16 boxes of shared memory: fp32 ones would fill
    two boxes each, so they are refused by name before a launch."""
    q = torch.zeros(3, 1, 64, 512, dtype=torch.bfloat16)
    args = dict(q=q, out=torch.empty_like(q), lse=torch.empty(3, 1, 64), o_ws=None, lse_ws=torch.empty(6, 64),
                kv=torch.zeros(4, 64, 1, 584, dtype=torch.uint8), indices=torch.zeros(3, 1, 128, dtype=torch.int32),
                topk_length=None, extra_kv=None, extra_indices=None, extra_topk_length=None, attn_sink=None,
                softmax_scale=0.04, units_per_part=1, num_parts=6)  # fmt: skip
    with pytest.raises(ValueError, match=r"out: expected bf16 or fp16 .* got torch\.float32"):
        ws.sparse_decode_split_ws(**dict(args, out=torch.empty(3, 1, 64, 512)))
    with pytest.raises(ValueError, match=r"o_ws: expected a contiguous fp16 \[slots, 64, 512\] .* got torch\.float32"):
        ws.sparse_decode_split_ws(**dict(args, o_ws=torch.empty(6, 64, 512)))


def _poison_rope(kv_cache: torch.Tensor, slot: int) -> None:
    """A NaN in the first rope value (bf16, bytes 448-449 of the token's 576 in its page) of cache slot ``slot``."""
    page = kv_cache.shape[1]
    flat = torch.empty(0, dtype=torch.uint8, device=kv_cache.device).set_(kv_cache.untyped_storage())
    at = kv_cache.storage_offset() + (slot // page) * kv_cache.stride(0) + (slot % page) * 576 + 448
    flat[at : at + 2] = torch.tensor([0xC0, 0x7F], dtype=torch.uint8, device=kv_cache.device)  # 0x7FC0: NaN


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("batch", "knobs"),
    [
        pytest.param(140, {}, id="whole-tokens"),
        pytest.param(8, {"WAVEMLA_NUM_SPLITS": 3, "WAVEMLA_SPARSE_WS_MERGE": "off"}, id="combine"),
        pytest.param(8, {"WAVEMLA_NUM_SPLITS": 3, **MERGE_ON}, id="merged-in-kernel"),
    ],
)
@pytest.mark.parametrize("poison", ["row", "q"])
def test_gpu_nan_input_gives_nan_output_and_lse(batch, knobs, poison):
    """A NaN score (a NaN in q, or in a row a token attends) stays NaN in out and lse, as in the reference, on every
    path of the warp-specialized kernel: a whole token, pieces merged by the combine, pieces merged in the kernel."""
    from wavemla.device import device_arch

    if device_arch(DEVICE) != 90 or not ws.HAVE_GLUON:
        pytest.skip("the warp-specialized kernel runs on sm_90 with Gluon")
    inputs = make_sparse_decode_inputs(batch=batch, h_q=64, **CSA, fp8=True, dtype=torch.bfloat16, device="cuda",
                                       seed=9)  # fmt: skip
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    if poison == "q":
        kwargs["q"][0, 0, 3, 7] = float("nan")
    else:
        slot = int(kwargs["indices"][0, 0, 5])
        others = kwargs["indices"][1:]
        others[others == slot] = (slot + 1) % (kwargs["kv_cache"].shape[0] * kwargs["kv_cache"].shape[1])
        _poison_rope(kwargs["kv_cache"], slot)
    keys = ("topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length", "attn_sink")
    ref_out, ref_lse = sparse_decode_ref(kwargs["q"], kwargs["kv_cache"], kwargs["indices"],
                                         **{k: kwargs.get(k) for k in keys})  # fmt: skip
    nan_out = torch.isnan(ref_out.to(DEVICE))
    nan_lse = torch.isnan(ref_lse.to(DEVICE))
    assert bool(nan_lse.any()) and not bool(nan_lse.all())
    out, lse, name = _run(kwargs, knobs, "on")
    assert "_sparse_mla_decode_ws_kernel" in name
    assert torch.equal(torch.isnan(out), nan_out) and torch.equal(torch.isnan(lse), nan_lse)
    assert_close("out", out[~nan_out].double(), ref_out.to(DEVICE)[~nan_out], TOLERANCES[("out", "gpu")])
    assert_close("lse", lse[~nan_lse], ref_lse.to(DEVICE)[~nan_lse], TOLERANCES[("lse", "gpu")])
