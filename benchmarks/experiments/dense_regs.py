"""Offline compile of the dense split kernel (or a variant file): registers, stack, shared memory and a SASS census.

    PYTHONPATH=src python3 benchmarks/experiments/dense_regs.py [MODULE_FILE|src] BHxBNxWARPSxSTAGES [K=V ...]
        [--fp8] [--arch 90] [--sass OUT.sass]

Prints what decides speed on sm_90: REG/STACK from cuobjdump, Triton's dynamic shared memory, and the counts of the
SASS that show how the loop was built (HGMMA = wgmma, HMMA = mma.sync, LDGSTS = cp.async, UTMALDG = TMA loads,
LDL/STL = spills, BAR/SYNCS = the pipeline's barriers).
"""

import collections
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

from wavemla.resources import _dense_decode_spec, _res_usage, compile_for_target

args = sys.argv[1:]
sass_out = None
if "--sass" in args:
    i = args.index("--sass")
    sass_out = args[i + 1]
    del args[i : i + 2]
arch = 90
if "--arch" in args:
    i = args.index("--arch")
    arch = int(args[i + 1])
    del args[i : i + 2]
fp8 = "--fp8" in args
args = [a for a in args if a != "--fp8"]
path, cfg, extra = args[0], args[1], args[2:]
if path == "src":
    from wavemla.kernels import dense_decode as mod
else:
    spec_ = importlib.util.spec_from_file_location("variant", path)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
fn = mod._dense_mla_decode_kernel
bh, bn, nw, ns = (int(x) for x in cfg.split("x"))
spec = _dense_decode_spec(bh, bn, ns, fp8, "fp16" if fp8 else "bf16")
for kv in extra:
    k, v = kv.split("=")
    spec["constexprs"][k] = int(v)
c = compile_for_target(
    fn,
    arch=arch,
    num_warps=nw,
    num_stages=ns,
    pointers=spec["pointers"],
    ints=spec["ints"],
    constexprs=spec["constexprs"],
    fp32=("qk_scale",),
    unspecialized=spec["unspecialized"],
)
regs, stack, shared, local = _res_usage(c.asm["cubin"])
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
with tempfile.TemporaryDirectory() as tmp:
    p = os.path.join(tmp, "k.cubin")
    Path(p).write_bytes(c.asm["cubin"])
    sass = subprocess.run([tool, "-sass", p], capture_output=True, text=True).stdout
ops = collections.Counter()
for line in sass.splitlines():
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
    if m:
        ops[m.group(2).split(".")[0]] += 1
keys = (
    "HGMMA",
    "HMMA",
    "LDGSTS",
    "UTMALDG",
    "UBLKCP",
    "LDG",
    "LDS",
    "LDSM",
    "STS",
    "LDL",
    "STL",
    "BAR",
    "SYNCS",
    "WARPGROUP",
    "MUFU",
)
tag = " ".join(extra)
print(
    f"{os.path.basename(path)} {cfg} {tag} {'fp8' if fp8 else 'bf16'} sm_{arch} triton {triton.__version__}: "
    f"regs={regs} stack={stack} local={local} smem={c.metadata.shared} sass={sum(ops.values())}"
)
print("  " + " ".join(f"{k}:{ops[k]}" for k in keys))
if sass_out:
    Path(sass_out).write_text(sass)
    Path(sass_out + ".ttgir").write_text(c.asm["ttgir"])
    Path(sass_out + ".ptx").write_text(c.asm["ptx"])
