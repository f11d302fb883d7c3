"""Checks of the warp-specialized sm_90 kernels' synchronization beside compute-sanitizer racecheck.

    compute-sanitizer --tool racecheck --racecheck-report hazard \
        python3 benchmarks/experiments/ws_sanitizer_probe.py control
        Three Gluon controls built like the kernels around ``gl.warp_specialize``, four programs each: a default
        partition and one worker storing to their own global words; the same with two 4-warp workers and the
        kernels' register reallocation; and that with one worker reading a shared-memory buffer the default
        partition wrote, after an mbarrier as the kernels' handoffs. Any hazard racecheck reports over them comes
        from the code Triton generates around ``warp_specialize`` (the partition state words). Prints each
        control's outputs check.

    TRITON_INSTRUMENTATION_MODE=consan CUDA_LAUNCH_BLOCKING=1 \
        python3 benchmarks/experiments/ws_sanitizer_probe.py consan {sparse,pieces,dense,racy}
        The kernel under Triton's concurrency sanitizer (ConSan), which instruments the kernel's shared-memory
        buffers, mbarriers, TMA copies and wgmma operands and stops the kernel (a device-side assertion) on an
        access not ordered by them. ``sparse``: the sparse kernel's default launch at CSA h=64 b=8 (2-tile programs,
        tokens cut between programs) and b=133 (11-tile programs); ``pieces``: its batch-invariant launches at b=9
        (pieces cut between programs) and b=100 (every token held and merged in its program); ``dense``: the dense
        kernel at h=64, bf16 rows, page 64, one request cut over programs; ``racy``: the negative control, the
        mbarrier handoff with the reader not waiting, which ConSan must stop (``racy`` alone, without ConSan, runs it
        plainly: it completes). Each kernel result is checked against
        the fp64 reference. Prints ``consan: <case> clean`` per case and ``result: PASS`` at the end; a ConSan report
        aborts the process.
"""

from __future__ import annotations

import os
import sys

import torch
import triton

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier

    from wavemla.kernels.dense_decode_ws import _warps_barrier

    @gluon.jit
    def _handoff_writer(p_out, buf, bar, N: gl.constexpr):
        """Stores 1..N to ``buf`` (and to the output's first N words), then arrives on ``bar``."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        buf.store(offs + 1)
        gl.store(p_out + offs, offs + 1)
        _warps_barrier()
        mbarrier.arrive(bar, count=1)

    @gluon.jit
    def _handoff_reader(p_out, buf, bar, N: gl.constexpr, WAIT: gl.constexpr):
        """Reads ``buf`` after ``bar`` completes (``WAIT``; without it, a race) and stores 2x - 1 of it to the
        output's second N words."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        if WAIT:
            mbarrier.wait(bar, 0)
        gl.store(p_out + N + offs, 2 * buf.load(layout) - 1)

    @gluon.jit
    def _racy_kernel(p_out, N: gl.constexpr):
        buf = gl.allocate_shared_memory(gl.int32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        gl.warp_specialize([(_handoff_writer, (p_out, buf, bar, N)), (_handoff_reader, (p_out, buf, bar, N, False))],
                           [4], [24])  # fmt: skip
        mbarrier.invalidate(bar)
except ImportError:  # pragma: no cover - a Triton without Gluon
    pass


def control() -> int:
    @gluon.jit
    def _default_part(p_out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        gl.store(p_out + offs, offs + 1)

    @gluon.jit
    def _worker_part(p_out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        gl.store(p_out + N + offs, 2 * offs + 1)

    @gluon.jit
    def _worker2_part(p_out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        gl.store(p_out + 2 * N + offs, 3 * offs + 1)

    @gluon.jit
    def _control_kernel(p_out, N: gl.constexpr):
        gl.warp_specialize([(_default_part, (p_out, N)), (_worker_part, (p_out, N))], [4], [24])

    @gluon.jit
    def _control2_kernel(p_out, N: gl.constexpr):
        # the sparse kernel's shape: two 4-warp workers beside the default warpgroup, registers reallocated
        gl.warp_specialize([(_default_part, (p_out, N)), (_worker_part, (p_out, N)), (_worker2_part, (p_out, N))],
                           [4, 4], [192, 112])  # fmt: skip

    @gluon.jit
    def _control3_kernel(p_out, N: gl.constexpr):
        # a shared-memory handoff between the partitions under an mbarrier, as the kernels' own
        buf = gl.allocate_shared_memory(gl.int32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        gl.warp_specialize([(_handoff_writer, (p_out, buf, bar, N)), (_handoff_reader, (p_out, buf, bar, N, True)),
                            (_worker2_part, (p_out, N))], [4, 4], [192, 112])  # fmt: skip
        mbarrier.invalidate(bar)

    n, bad = 128, 0
    ar = torch.arange(n, dtype=torch.int32, device="cuda")
    controls = (
        ("one worker", _control_kernel, 2, {}),
        ("two workers, 168 registers", _control2_kernel, 3, {"maxnreg": 168}),
        ("two workers, an mbarrier handoff", _control3_kernel, 3, {"maxnreg": 168}),
    )
    for name, kernel, parts, extra in controls:
        out = torch.zeros(parts * n, dtype=torch.int32, device="cuda")
        kernel[(4,)](out, n, num_warps=4, **extra)
        torch.cuda.synchronize()
        ok = all(torch.equal(out[i * n : (i + 1) * n], (i + 1) * ar + 1) for i in range(parts))
        print(f"control ({name}): warp_specialize, 4 programs: {'ok' if ok else 'WRONG OUTPUT'}")
        bad += not ok
    return 1 if bad else 0


def _sparse_cases(pieces: bool) -> list[tuple[str, int, bool]]:
    return [("csa b=9 pieces cut", 9, True), ("csa b=100 pieces held", 100, True)] if pieces else [
        ("csa b=8", 8, False), ("csa b=133", 133, False)]  # fmt: skip


def consan(what: str) -> int:
    if os.environ.get("TRITON_INSTRUMENTATION_MODE") != "consan":
        sys.exit("consan: set TRITON_INSTRUMENTATION_MODE=consan (and CUDA_LAUNCH_BLOCKING=1) before running")
    # ConSan keeps its records in global scratch memory, which Triton asks the allocator for at launch
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sys.path.insert(0, os.path.dirname(__file__))
    from wavemla import config
    from wavemla.testing import TOLERANCES, check_close

    bad = 0
    if what in ("sparse", "pieces"):
        from merge_ab import decode_point

        from wavemla import get_mla_metadata, sparse_mla_decode
        from wavemla.reference import sparse_decode_ref

        for name, b, bi in _sparse_cases(what == "pieces"):
            kw, knobs = decode_point("csa", b, 2 if bi else None, seed=0)
            rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices", "batch_invariant")}
            with config.override(WAVEMLA_SPARSE_WS="on", **knobs):
                meta, _ = get_mla_metadata()
                out, lse = sparse_mla_decode(**kw, metadata=meta)
                torch.cuda.synchronize()
            ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
            why = [m for m in (check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]),
                               check_close("lse", lse, ref_l, TOLERANCES[("lse", "gpu")])) if m]  # fmt: skip
            p = meta.plan
            kernel = getattr(meta.split_kernel, "name", "?")
            # ConSan keeps its records in global scratch: a build without them was not instrumented
            kernel += f", {getattr(meta.split_kernel.metadata, 'global_scratch_size', 0)} B of scratch a program"
            print(f"consan: sparse {name} [{kernel}] ({p.config}, {p.units_per_part} tiles a program, pieces "
                  f"{p.pieces_tiles}): {'clean' if not why else 'MISMATCH ' + ' '.join(why)}", flush=True)  # fmt: skip
            bad += bool(why)
    elif what == "racy":
        # the negative control: the reader does not wait for the writer's mbarrier; ConSan must stop this kernel
        n = 128
        out = torch.zeros(2 * n, dtype=torch.int32, device="cuda")
        _racy_kernel[(1,)](out, n, num_warps=4)
        torch.cuda.synchronize()
        print("consan: racy control ran to the end: ConSan did NOT report the unsynchronized read")
        bad += 1
    elif what == "dense":
        import wavemla
        from wavemla.reference.dense_decode import dense_decode_ref
        from wavemla.testing import dense_out_tolerance, make_dense_decode_inputs

        inputs = make_dense_decode_inputs(lengths=[700, 90, 0, 1500], s_q=1, h_q=64, fp8=False, dtype=torch.bfloat16,
                                          device="cuda")  # fmt: skip
        with config.override(WAVEMLA_DENSE_WS="on"):
            out, lse = wavemla.dense_mla_decode(**inputs, causal=False)
            torch.cuda.synchronize()
        ref_o, ref_l = dense_decode_ref(**{k: v.cpu() for k, v in inputs.items()}, causal=False)
        why = [m for m in (check_close("out", out.cpu(), ref_o, dense_out_tolerance(inputs["k_cache"], "gpu")),
                           check_close("lse", lse.cpu(), ref_l, TOLERANCES[("lse", "gpu")])) if m]  # fmt: skip
        print(f"consan: dense h=64 bf16 lengths 700/90/0/1500: {'clean' if not why else 'MISMATCH ' + ' '.join(why)}")
        bad += bool(why)
    else:
        sys.exit(f"consan: expected sparse, pieces, dense or racy, got {what!r}")
    print("result:", "PASS" if not bad else f"FAIL ({bad})")
    return 1 if bad else 0


def racy_plain() -> int:
    """The negative control without ConSan: it runs to the end (what it reads is unordered, not invalid)."""
    n = 128
    out = torch.zeros(2 * n, dtype=torch.int32, device="cuda")
    _racy_kernel[(1,)](out, n, num_warps=4)
    torch.cuda.synchronize()
    print("racy control, not instrumented: ran to the end")
    return 0


if __name__ == "__main__":
    if "gluon" not in globals():
        sys.exit("this Triton has no Gluon: nothing to check")
    if sys.argv[1:2] == ["control"]:
        sys.exit(control())
    if sys.argv[1:2] == ["racy"]:
        sys.exit(racy_plain())
    if sys.argv[1:2] == ["consan"] and len(sys.argv) == 3:
        sys.exit(consan(sys.argv[2]))
    sys.exit(__doc__)
