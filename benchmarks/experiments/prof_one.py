"""One CSA h=64 FP8 decode call of a variant, for ncu: prof_one.py MODULE.py B BHxBNxWARPSxSTAGES key=val ..."""

import functools
import importlib.util
import sys

import torch

import wavemla
import wavemla.kernels.sparse_decode as main_mod
from wavemla import config
from wavemla.testing import make_sparse_decode_inputs

spec = importlib.util.spec_from_file_location("variant", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
b = int(sys.argv[2])
bh, bn, nw, ns = (int(x) for x in sys.argv[3].split("x"))
kwargs = {k: int(v) for k, v in (a.split("=") for a in sys.argv[4:])}
main_mod.sparse_decode_split = functools.partial(mod.sparse_decode_split, **kwargs)
inputs = make_sparse_decode_inputs(
    batch=b, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048, fp8=True, device="cuda"
)
kw = {k: v for k, v in inputs.items() if v is not None}
with config.override(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw, WAVEMLA_NUM_STAGES=ns):
    meta, _ = wavemla.get_mla_metadata()
    for _ in range(3):
        wavemla.sparse_mla_decode(**kw, metadata=meta)
torch.cuda.synchronize()
