"""One dense decode call, for ncu: prof_dense.py FORMAT:H:B:S_K L2_AHEAD (the planner's pick, page 64)."""

import functools
import sys

import torch

import wavemla.kernels.dense_decode as dd
from wavemla import dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs

fmt, h, b, s_k = sys.argv[1].split(":")
dd.dense_decode_split = functools.partial(dd.dense_decode_split, l2_ahead=int(sys.argv[2]))
inputs = make_dense_decode_inputs(lengths=[int(s_k)] * int(b), h_q=int(h), page=64, fp8=fmt == "fp8", device="cuda")
meta = get_mla_metadata()[0]
for _ in range(3):
    dense_mla_decode(**inputs, metadata=meta)
torch.cuda.synchronize()
print(meta.dense_plan)
