"""Time experimental split-kernel variants behind the public API (CUDA-graph replay, L2 flushed, median).

    PYTHONPATH=src python3 benchmarks/experiments/vtime.py MODULE.py B[,B...] \
        NAME:BHxBNxWARPSxSTAGES:key=val;key=val ...

Every variant is checked against the shipped kernel's output first (assert_close, GPU bf16 tolerances).
"""

import functools
import importlib.util
import sys
import time

import torch

import wavemla
import wavemla.kernels.sparse_decode as main_mod
import wavemla.plan
from wavemla import config
from wavemla.reference.sparse_decode import sparse_decode_ref
from wavemla.testing import TOLERANCES, assert_close, make_sparse_decode_inputs
from wavemla.tools.bench import timings_us

spec = importlib.util.spec_from_file_location("variant", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
orig = main_mod.sparse_decode_split
batches = [int(b) for b in sys.argv[2].split(",")]
if "--split-only" in sys.argv:  # time the split kernel alone: the combine becomes a no-op (outputs are then wrong)
    import wavemla.kernels.combine as comb

    comb.sparse_decode_combine = lambda **kw: None
mode = "csa"
for b in batches:
    for shape in ("csa", "hca"):
        if shape == "hca" and "--hca" not in sys.argv:
            continue
        ex = (
            dict(extra_topk=512, extra_page=64, extra_pool=2048)
            if shape == "csa"
            else dict(extra_topk=1024, extra_page=2, extra_pool=1024)
        )
        inputs = make_sparse_decode_inputs(batch=b, h_q=64, topk=128, page=256, fp8=True, device="cuda", **ex)
        kw = {k: v for k, v in inputs.items() if v is not None}
        ref_out, ref_lse = sparse_decode_ref(
            kw["q"],
            kw["kv_cache"],
            kw["indices"],
            **{k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")},
        )
        print(f"== {shape} b={b} h=64 fp8", flush=True)
        for arg in sys.argv[3:]:
            if arg.startswith("--"):
                continue
            name, cfg, *opt = arg.split(":")
            kwargs = {}
            for kv in opt[0].split(";") if opt and opt[0] else []:
                k, v = kv.split("=")
                kwargs[k] = int(v)
            bh, bn, nw, ns = (int(x) for x in cfg.split("x"))
            key = (bh, bn, nw, ns, True)
            if key not in wavemla.plan._SM90_TABLE:  # an untried shape: one program per SM, tile time guessed
                wavemla.plan._SM90_TABLE[key] = wavemla.plan.Resources(180000, 255, "table", tile_us=9.0)
                wavemla.plan._static_resources.cache_clear()
                wavemla.plan._plan_cached.cache_clear()
            main_mod.sparse_decode_split = (
                functools.partial(mod.sparse_decode_split, **kwargs) if name != "src" else orig
            )
            try:
                with config.override(
                    WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw, WAVEMLA_NUM_STAGES=ns
                ):
                    meta, _ = wavemla.get_mla_metadata()
                    t0 = time.time()
                    out, lse = wavemla.sparse_mla_decode(**kw, metadata=meta)
                    torch.cuda.synchronize()
                    ct = time.time() - t0
                    ok = "ok"
                    try:
                        assert_close("out", out, ref_out, TOLERANCES[("out", "gpu")])
                        assert_close("lse", lse, ref_lse, TOLERANCES[("lse", "gpu")])
                    except AssertionError as err:
                        why = "split only" if "--split-only" in sys.argv else str(err).splitlines()[0][:80]
                        ok = "MISMATCH " + why
                    k = meta.split_kernel
                    res = (
                        f"regs={getattr(k, 'n_regs', None)} spills={getattr(k, 'n_spills', None)} "
                        f"smem={k.metadata.shared}"
                    )
                    med = timings_us(
                        lambda kw=kw, meta=meta: wavemla.sparse_mla_decode(**kw, metadata=meta), reps=20, graph=True
                    )[1]
                p = meta.plan
                print(
                    f"{name:10s} {cfg:10s} {res:34s} upp={p.units_per_part:<3d} progs={p.programs:<4d} {med:8.1f} us "
                    f"{ok} (compile {ct:.1f}s)",
                    flush=True,
                )
            except Exception as e:
                print(name, cfg, "ERROR", str(e).splitlines()[-1][:200], flush=True)
            finally:
                main_mod.sparse_decode_split = orig
