"""Offline sm_90 compile of a split-kernel module: registers, stack, shared memory and a SASS opcode census.

    python3 benchmarks/experiments/regs.py MODULE_FILE BHxBNxWARPS[xSTAGES] [--sass OUT.sass]
"""
import importlib.util, os, re, subprocess, sys, tempfile, collections
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from wavemla.resources import _sparse_decode_spec, _res_usage

path, cfg = sys.argv[1], sys.argv[2]
arch = int(os.environ.get("ARCH", "90"))
spec_ = importlib.util.spec_from_file_location("variant", path)
mod = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(mod)
fn = mod._sparse_mla_decode_kernel
parts = [int(x) for x in cfg.split("x")]
bh, bn, nw = parts[:3]; ns = parts[3] if len(parts) > 3 else 1
fp8 = os.environ.get("FP8", "1") == "1"
spec = _sparse_decode_spec(bh, bn, ns, fp8, os.environ.get("QDT", "fp16" if fp8 else "bf16"), arch)
extra = {k.split("=")[0]: k.split("=")[1] for k in sys.argv[3:] if "=" in k}
for k, v in extra.items():
    spec["constexprs"][k] = int(v)
signature, attrs = {}, {}
for i, name in enumerate(fn.arg_names):
    if name in spec["pointers"]:
        signature[name] = spec["pointers"][name]; attrs[(i,)] = [["tt.divisibility", 16]]
    elif name == "qk_scale":
        signature[name] = "fp32"
    elif name in spec["ints"]:
        signature[name] = "i32"
        if spec["ints"][name] % 16 == 0:
            attrs[(i,)] = [["tt.divisibility", 16]]
    elif name in spec["unspecialized"]:
        signature[name] = "i32"
    else:
        signature[name] = "constexpr"
        if name not in spec["constexprs"]:
            raise SystemExit(f"constexpr {name} needs a value: pass {name}=V")
consts = {k: v for k, v in spec["constexprs"].items() if k in fn.arg_names}  # older kernels lack newer flags
src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
c = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": nw, "num_stages": ns})
regs, stack, shared, local = _res_usage(c.asm["cubin"])
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
with tempfile.TemporaryDirectory() as tmp:
    p = os.path.join(tmp, "k.cubin"); open(p, "wb").write(c.asm["cubin"])
    sass = subprocess.run([tool, "-sass", p], capture_output=True, text=True).stdout
ops = collections.Counter()
for line in sass.splitlines():
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
    if m:
        ops[m.group(2).split(".")[0]] += 1
total = sum(ops.values())
print(f"{os.path.basename(path)} {cfg} sm_{arch}: regs={regs} stack={stack} smem={c.metadata.shared} sass={total}")
print("  " + " ".join(f"{k}:{v}" for k, v in ops.most_common(28)))
if "--sass" in sys.argv:
    open(sys.argv[sys.argv.index("--sass") + 1], "w").write(sass)
