"""Offline compile of the sparse or dense split kernel (the package's, or a variant file): registers, stack, shared
memory and a SASS opcode census.

    PYTHONPATH=src python3 benchmarks/experiments/regs.py MODULE BHxBNxWARPS[xSTAGES] [K=V ...] [--sass OUT.sass]

MODULE is ``sparse`` or ``dense`` (the package's kernels) or a file defining ``_sparse_mla_decode_kernel`` or
``_dense_mla_decode_kernel``. K=V sets a constexpr (names an older kernel lacks are ignored). Environment: ARCH
(default 90), FP8 (1 or 0, default 1), QDT (the sparse kernel's q dtype, default fp16 with FP8 rows). The launch is
the one the compiled resource tables use (``wavemla.resources``). Prints REG/STACK from cuobjdump, Triton's dynamic
shared memory, the counts of the SASS that show how the loop was built (HGMMA = wgmma, HMMA = mma.sync, LDGSTS =
cp.async, UTMALDG = TMA loads, LDL/STL = spills, BAR/SYNCS = barriers) and the most common opcodes; ``--sass``
also writes the ttgir and PTX beside the SASS; ``--loops`` lists every loop (a branch back to an earlier address) with
its instructions and the counts above inside it (a tile loop is one that holds the dots' HMMA/HGMMA).
"""

import collections
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

from wavemla.resources import _dense_decode_spec, _res_usage, _sparse_decode_spec, compile_for_target

KEYS = ("HGMMA", "HMMA", "LDGSTS", "UTMALDG", "LDG", "LDS", "LDSM", "STS", "LDL", "STL", "BAR", "SYNCS", "MUFU")

args = sys.argv[1:]
sass_out = None
loops = "--loops" in args
if loops:
    args.remove("--loops")
if "--sass" in args:
    i = args.index("--sass")
    sass_out = args[i + 1]
    del args[i : i + 2]
path, cfg, extra = args[0], args[1], [a for a in args[2:] if "=" in a]
if path in ("sparse", "dense"):
    mod = importlib.import_module(f"wavemla.kernels.{path}_decode")
else:
    spec_ = importlib.util.spec_from_file_location("variant", path)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
dense = hasattr(mod, "_dense_mla_decode_kernel")
fn = mod._dense_mla_decode_kernel if dense else mod._sparse_mla_decode_kernel
arch = int(os.environ.get("ARCH", "90"))
fp8 = os.environ.get("FP8", "1") == "1"
parts = [int(x) for x in cfg.split("x")]
bh, bn, nw = parts[:3]
ns = parts[3] if len(parts) > 3 else 1
if dense:
    spec = _dense_decode_spec(bh, bn, ns, fp8, "fp16" if fp8 else "bf16", arch)
else:
    spec = _sparse_decode_spec(bh, bn, ns, fp8, os.environ.get("QDT", "fp16" if fp8 else "bf16"), arch)
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
    cubin = Path(tmp) / "k.cubin"
    cubin.write_bytes(c.asm["cubin"])
    sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True).stdout
ops: collections.Counter[str] = collections.Counter()
for line in sass.splitlines():
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
    if m:
        ops[m.group(2).split(".")[0]] += 1
print(
    f"{os.path.basename(path)} {cfg} {' '.join(extra)} {'fp8' if fp8 else 'rows'} sm_{arch} triton "
    f"{triton.__version__}: regs={regs} stack={stack} local={local} smem={c.metadata.shared} sass={sum(ops.values())}"
)
print("  " + " ".join(f"{k}:{ops[k]}" for k in KEYS))
print("  " + " ".join(f"{k}:{v}" for k, v in ops.most_common(28)))
if loops:
    ins = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(3).split(".")[0], m.group(4)))
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    for i, (a, op, rest) in enumerate(ins):
        t = re.search(r"(0x[0-9a-f]+)\s*$", rest.split("&")[0].split("?")[0].strip())
        if op == "BRA" and t and int(t.group(1), 16) < a and int(t.group(1), 16) in at:
            j = at[int(t.group(1), 16)]
            inside = collections.Counter(o for _, o, _ in ins[j : i + 1])
            print(
                f"  loop {hex(ins[j][0])}..{hex(a)}: {i - j + 1} instructions, "
                + " ".join(f"{k}:{inside[k]}" for k in KEYS if inside[k])
            )
if sass_out:
    Path(sass_out).write_text(sass)
    Path(sass_out + ".ttgir").write_text(c.asm["ttgir"])
    Path(sass_out + ".ptx").write_text(c.asm["ptx"])
