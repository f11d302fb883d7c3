"""CSA h=64 FP8 decode calls for ncu, default plan or batch-invariant: prof_bi.py B {default,bi}."""

import sys

import torch

import wavemla
from wavemla.testing import make_sparse_decode_inputs

b, mode = int(sys.argv[1]), sys.argv[2]
inputs = make_sparse_decode_inputs(
    batch=b, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048, fp8=True, device="cuda"
)
kw = {k: v for k, v in inputs.items() if v is not None}
meta, _ = wavemla.get_mla_metadata()
for _ in range(3):
    wavemla.sparse_mla_decode(**kw, metadata=meta, batch_invariant=mode == "bi")
torch.cuda.synchronize()
print(meta.plan)
