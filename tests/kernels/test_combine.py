"""The dense combine against an fp64 merge of hand-made pieces: many pieces a request (several groups), empty pieces
(lse -inf) before and after the first non-empty one, rows no piece saw, requests held by one part."""

import math

import pytest
import torch

from tests.conftest import DEVICE
from wavemla.kernels.combine import dense_decode_combine

D = 512


def _merge_ref(o_ws, lse_ws, req, b, m):
    """fp64 merge of slots ``r + first .. r + last`` per request: (out [b, m, D], natural lse [b, m])."""
    out = torch.zeros(b, m, D, dtype=torch.float64)
    lse = torch.full((b, m), math.inf, dtype=torch.float64)
    for r in range(b):
        first, last = int(req[r, 0]), int(req[r, 1])
        if last <= first:
            continue
        l2 = lse_ws[r + first : r + last + 1].double()  # [pieces, m], base 2
        o = o_ws[r + first : r + last + 1].double()  # [pieces, m, D]
        mx = l2.max(0).values
        seen = mx > -math.inf
        w = torch.exp2(l2 - torch.where(seen, mx, 0.0))
        s = w.sum(0)
        out[r] = torch.where(seen[:, None], (w[:, :, None] * o).sum(0) / torch.where(seen, s, 1.0)[:, None], 0.0)
        lse[r] = torch.where(seen, (torch.where(seen, mx, 0.0) + torch.log2(torch.where(seen, s, 1.0))) * math.log(2),
                             math.inf)  # fmt: skip
    return out, lse


@pytest.mark.parametrize("group", [16, 5, 1])
def test_dense_combine_matches_an_fp64_merge(group):
    torch.manual_seed(0)
    s_q, h = 2, 12
    m = s_q * h
    # request 0: 37 pieces (several groups), request 1: held by one part, request 2: 3 pieces, request 3: 20 pieces
    spans = [(0, 36), (36, 36), (36, 38), (38, 57)]
    b = len(spans)
    slots = b + 58
    req = torch.zeros(b, 4, dtype=torch.int32)
    for r, (first, last) in enumerate(spans):
        req[r, 0], req[r, 1] = first, last
    lse_ws = torch.randn(slots, m) * 20
    lse_ws[0:10, :5] = -math.inf  # request 0: rows 0-4 empty in the first group and more
    lse_ws[0:37, 5] = -math.inf  # request 0: row 5 seen by no piece
    lse_ws[20:30, 6] = -math.inf  # request 0: empty pieces after non-empty ones
    lse_ws[3 + 38 : 3 + 50, 7] = -math.inf  # request 3: empty first group for row 7
    o_ws = torch.randn(slots, m, D)
    out = torch.full((b, s_q, h, D), 7.0, dtype=torch.float16, device=DEVICE)  # the split kernel's, for whole
    lse = torch.full((b, s_q, h), 7.0, device=DEVICE)
    dense_decode_combine(out=out, lse=lse, o_ws=o_ws.to(DEVICE), lse_ws=lse_ws.to(DEVICE), req=req.to(DEVICE),
                         group=group)  # fmt: skip
    ref_o, ref_l = _merge_ref(o_ws, lse_ws, req, b, m)
    out, lse = out.cpu().view(b, m, D), lse.cpu().view(b, m)
    cut = [0, 2, 3]
    assert torch.allclose(out[cut].double(), ref_o[cut], atol=2e-3, rtol=2e-3)
    assert torch.allclose(lse[cut].double(), ref_l[cut], atol=1e-4, rtol=1e-5)  # +inf where no piece saw the row
    assert torch.isinf(lse[0, 5]) and (out[0, 5] == 0).all()
    assert (out[1] == 7.0).all() and (lse[1] == 7.0).all()  # a request held by one part is not touched


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"group": 0}, "group"),
        ({"group": 33}, "group"),
        ({"group": 4.0}, "group"),
        ({"block_d": 48}, "block_d"),
        ({"block_d": 0}, "block_d"),
        ({"block_d": -128}, "block_d"),
        ({"block_d": 1024}, "block_d"),
        ({"block_d": 128.0}, "block_d"),
        ({"block_m": 0}, "block_m"),
        ({"block_m": -16}, "block_m"),
        ({"block_m": 24}, "block_m"),
    ],
)
def test_dense_combine_rejects_bad_shapes(kw, name, monkeypatch):
    from wavemla.kernels import combine

    monkeypatch.setattr(combine.launch, "run", lambda fn, grid, **kw: None)  # a shape let through launches nothing
    z = torch.zeros(1, 1, 1, D, device=DEVICE)
    with pytest.raises(ValueError, match=f"^{name}: "):
        dense_decode_combine(out=z, lse=z[..., 0], o_ws=z, lse_ws=z, req=torch.zeros(1, 4, dtype=torch.int32), **kw)


@pytest.mark.parametrize(("s_q", "block_m"), [(8192, 32), (8191, 16), (32768, 128)])
def test_dense_combine_grid_fits_cuda(monkeypatch, s_q, block_m):
    """More query rows than 65,535 blocks of 16 (a request of many query tokens cut into parts, e.g. under
    WAVEMLA_TARGET_CTAS) take more rows a program: CUDA refuses a launch whose grid's second dimension passes 65,535."""
    from wavemla.kernels import combine

    launched = []
    monkeypatch.setattr(combine.launch, "run", lambda fn, grid, **kw: launched.append((grid, kw["BLOCK_M"])))
    h = 128
    out = torch.empty(1, s_q, h, D, dtype=torch.bfloat16, device="meta")
    lse = torch.empty(1, s_q, h, device="meta")
    o_ws = torch.empty(3, s_q * h, D, device="meta")
    dense_decode_combine(out=out, lse=lse, o_ws=o_ws, lse_ws=lse[0], req=torch.empty(1, 4, device="meta"))
    ((grid, got),) = launched
    assert got == block_m and grid[1] == -(-s_q * h // block_m) <= combine.MAX_GRID_YZ


_COMPILE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from wavemla.kernels.combine import _dense_mla_combine_kernel
from wavemla.resources import compile_for_target
pointers = {"p_out": "*bf16", "p_lse": "*fp32", "p_o_ws": "*fp32", "p_lse_ws": "*fp32", "p_req": "*i32"}
out = []
for arch in (80, 86, 89, 90, 100, 120):
    for group, block_d in json.loads(sys.argv[2]):
        c = compile_for_target(
            _dense_mla_combine_kernel, arch=arch, num_warps=4, num_stages=1, pointers=pointers, ints={},
            constexprs={"BLOCK_M": 16, "BLOCK_D": block_d, "D": 512, "GROUP": group},
            unspecialized=("H", "M", "stride_ob", "stride_os", "stride_oh"),
        )
        out.append([arch, group, block_d, c.metadata.shared])
print(json.dumps(out))
"""


def test_dense_combine_compiles_for_every_architecture():
    """Every (group, columns) the planner can choose builds for sm_80..sm_120 (no GPU needed; a clean environment, so
    the kernel is a JIT function, not the interpreter's)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import wavemla
    from wavemla.plan import dense_combine_shape

    shapes = sorted({dense_combine_shape(b, p) for b in (1, 4, 8, 32, 128) for p in (16, 66, 132, 264)})
    assert len(shapes) == 5
    src = str(Path(wavemla.__file__).resolve().parent.parent)
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILE, src, json.dumps(shapes)], capture_output=True, text=True, env={}, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(built) == 6 * len(shapes)
    assert all(shared <= 99 * 1024 for _, _, _, shared in built)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"block_d": 0}, "block_d"),
        ({"block_d": -128}, "block_d"),
        ({"block_d": 96}, "block_d"),
        ({"block_d": 1024}, "block_d"),
        ({"block_d": 128.0}, "block_d"),
        ({"block_h": 0}, "block_h"),
        ({"block_h": -4}, "block_h"),
        ({"block_h": 3}, "block_h"),
    ],
)
@pytest.mark.parametrize("n_tiles", [4, 36], ids=["loop", "all-pieces"])
def test_sparse_combine_rejects_bad_shapes(kw, name, n_tiles, monkeypatch):
    """``block_d`` and ``block_h`` are the extents of the kernel's blocks (``tl.arange``): a positive power of two,
    ``block_d`` dividing the head dim; refused naming the argument, not a division by zero or a grid of negative
    programs."""
    from wavemla.kernels import combine

    monkeypatch.setattr(combine.launch, "run", lambda fn, grid, **kw: None)
    out = torch.empty(2, 1, 4, D, dtype=torch.float16, device="meta")
    lse = torch.empty(2, 1, 4, device="meta")
    ws = torch.empty(2 + 2 * n_tiles, 4, D, device="meta")
    with pytest.raises(ValueError, match=f"^{name}: "):
        combine.sparse_decode_combine(out=out, lse=lse, o_ws=ws, lse_ws=ws[..., 0], attn_sink=None, n_tiles=n_tiles,
                                      units_per_part=1, pdl=False, **kw)  # fmt: skip


@pytest.mark.parametrize("program_units", [None, 15, 20])
def test_sparse_combine_skips_tokens_held_by_one_program(program_units):
    """Batch-invariant pieces of 5 tiles, 10-tile tokens: with ``program_units`` the combine leaves alone the tokens
    whose pieces all ran in one split program of that many units (merged there) and merges the others; without it,
    every token of two or more slots."""
    from wavemla.kernels.combine import sparse_decode_combine

    torch.manual_seed(1)
    b, h, n_tiles, piece = 6, 4, 10, 5
    slots = b + b * n_tiles // piece
    lse_ws = torch.randn(slots, h) * 4
    o_ws = torch.randn(slots, h, D).to(torch.float16)
    out = torch.full((b, 1, h, D), 7.0, dtype=torch.float16, device=DEVICE)
    lse = torch.full((b, 1, h), 7.0, device=DEVICE)
    sparse_decode_combine(out=out, lse=lse, o_ws=o_ws.to(DEVICE), lse_ws=lse_ws.to(DEVICE), attn_sink=None,
                          n_tiles=n_tiles, units_per_part=piece, program_units=program_units)  # fmt: skip
    out, lse = out.cpu(), lse.cpu()
    for t in range(b):
        held = program_units is not None and (t * n_tiles) // program_units == ((t + 1) * n_tiles - 1) // program_units
        first, last = t * n_tiles // piece, ((t + 1) * n_tiles - 1) // piece
        if held:
            assert (out[t] == 7.0).all() and (lse[t] == 7.0).all(), t
            continue
        l2 = lse_ws[t + first : t + last + 1].double()
        w = torch.exp2(l2 - l2.max(0).values)
        ref = (w[:, :, None] * o_ws[t + first : t + last + 1].double()).sum(0) / w.sum(0)[:, None]
        assert torch.allclose(out[t, 0].double(), ref, atol=2e-3, rtol=2e-3), t
        ref_lse = (l2.max(0).values + torch.log2(w.sum(0))) * math.log(2)
        assert torch.allclose(lse[t, 0].double(), ref_lse, atol=1e-4, rtol=1e-5), t
    if program_units == 20:  # two whole tokens a program: all held
        assert (out == 7.0).all()
    if program_units == 15:  # programs of units 0-14, 15-29, 30-44, 45-59: tokens 1 and 4 cut between two
        assert [t for t in range(b) if (out[t] == 7.0).all()] == [0, 2, 3, 5]


@pytest.mark.parametrize("n_tiles", [10, 36])
@pytest.mark.parametrize("block_d", [None, 128])
def test_sparse_all_pieces_merge_matches_an_fp64_merge(n_tiles, block_d):
    """Tokens cut into one-tile pieces (16 and 64 pieces rounded up: the all-pieces merge), over the columns a program
    it takes by default (:func:`wide_block_d`: all 512, 256 from 64 pieces) and over 128: the fp64 merge's answer."""
    from wavemla.kernels.combine import sparse_decode_combine, wide_block_d, wide_merge

    assert wide_merge(n_tiles, 1)
    assert (wide_block_d(16), wide_block_d(32), wide_block_d(64), wide_block_d(128)) == (512, 512, 256, 128)
    torch.manual_seed(2)
    b, h = 3, 4
    slots = b + b * n_tiles
    lse_ws = torch.randn(slots, h) * 4
    o_ws = torch.randn(slots, h, D).to(torch.float16)
    out = torch.zeros((b, 1, h, D), dtype=torch.float16, device=DEVICE)
    lse = torch.zeros((b, 1, h), device=DEVICE)
    sparse_decode_combine(out=out, lse=lse, o_ws=o_ws.to(DEVICE), lse_ws=lse_ws.to(DEVICE), attn_sink=None,
                          n_tiles=n_tiles, units_per_part=1, block_d=block_d)  # fmt: skip
    out, lse = out.cpu(), lse.cpu()
    for t in range(b):
        l2 = lse_ws[t + t * n_tiles : t + (t + 1) * n_tiles].double()
        w = torch.exp2(l2 - l2.max(0).values)
        ref = (w[:, :, None] * o_ws[t + t * n_tiles : t + (t + 1) * n_tiles].double()).sum(0) / w.sum(0)[:, None]
        assert torch.allclose(out[t, 0].double(), ref, atol=2e-3, rtol=2e-3), t
        ref_lse = (l2.max(0).values + torch.log2(w.sum(0))) * math.log(2)
        assert torch.allclose(lse[t, 0].double(), ref_lse, atol=1e-4, rtol=1e-5), t
