"""A warp-specialized kernel (the dense decode's ``kernels/dense_decode_ws.py``, or with ``--sparse`` the sparse
decode's ``kernels/sparse_decode_ws.py``) built for sm_90 without a GPU, at any committed revision of that file:
shared memory, ptxas spills, where its warps read their partition state (the one-byte shared load compute-sanitizer
racecheck reports, and the default partition's stores of those words), and a digest of its PTX code (the code
before the debug sections), so that two revisions can be shown to compile to the same kernel. ``--pieces``
(sparse): the same for the batch-invariant pieces' build (``compile_sm90(pieces=True)``).

    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_build_probe.py HEAD fe74608:PIPELINE=1 d8f86cc
    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_build_probe.py --sparse HEAD
    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_build_probe.py --sparse --pieces 66e816a b6fe556
    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_build_probe.py --sparse --digests HEAD e655edc bc1850b

A revision is ``REV`` or ``REV:NAME=VALUE,...`` (module constants set before compiling, ints; ``.`` is the working
tree's file). Each is compiled with ``compile_sm90()`` of that revision (its defaults: dense bf16, page 64, not causal,
one row block; sparse pages of 64 rows with the extra cache, list lengths and sink) by the installed Triton, and ptxas
is the one Triton ships. Interpreter off. ``--digests`` (sparse): only the PTX code digest of each revision's
``compile_sm90()`` in three variants (its defaults; no extra cache, list lengths or sink; two head blocks), and with
``pieces=True`` (the batch-invariant pieces' build) where that revision has it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

PATHS = {"dense": "src/wavemla/kernels/dense_decode_ws.py", "sparse": "src/wavemla/kernels/sparse_decode_ws.py"}
PATH = PATHS["dense"]
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
NVDISASM = PTXAS.parent / "nvdisasm"


def load(rev: str, consts: dict[str, int]):
    """The module as committed at ``rev`` (``.``: the working tree's file), with ``consts`` set."""
    if rev == ".":
        text = Path(PATH).read_text()
    else:
        text = subprocess.run(["git", "show", f"{rev}:{PATH}"], capture_output=True, text=True, check=True).stdout
    tmp = Path(tempfile.mkdtemp()) / f"{Path(PATH).stem}_{rev.replace('/', '_').replace('.', 'worktree')}.py"
    tmp.write_text(text)
    spec = importlib.util.spec_from_file_location(tmp.stem, tmp)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in consts.items():
        setattr(mod, k, v)
    return mod


def code_digest(ptx: str) -> str:
    """sha256 (12 hex) of the PTX instructions: line markers, comments, labels of line tables and the debug
    sections dropped."""
    body = ptx[: ptx.find(".section\t.debug")] if ".section\t.debug" in ptx else ptx
    lines = [ln.strip() for ln in body.splitlines()]
    keep = [ln for ln in lines if ln and not ln.startswith((".loc", "//", ".file", "$L__tmp"))]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:12]


def ptx_instructions(ptx: str) -> int:
    """PTX instructions before the debug sections: lines that are not directives, comments, labels or braces (the
    rule of ``tests/kernels/test_sparse_decode_ws.py``'s size bound)."""
    body = ptx[: ptx.find(".section\t.debug")] if ".section\t.debug" in ptx else ptx
    lines = (ln.strip() for ln in body.splitlines())
    return sum(1 for ln in lines if ln and not ln.startswith((".", "//", "$", "{", "}", "(", ")")) and ln[-1] != ":")


def assemble(ptx: str) -> tuple[str, str]:
    """``ptx`` assembled for sm_90a by Triton's ptxas: (ptxas's ``-v`` report, the cubin's SASS by nvdisasm)."""
    with tempfile.TemporaryDirectory() as d:
        src, obj = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        info = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(src), "-o", str(obj)], capture_output=True,
                              text=True, check=True).stderr  # fmt: skip
        sass = subprocess.run([str(NVDISASM), "-c", str(obj)], capture_output=True, text=True, check=True).stdout
    return info, sass


def probe(item: str, pieces: bool = False) -> None:
    rev, _, rest = item.partition(":")
    consts = {k: int(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)}
    mod = load(rev, consts)
    k = mod.compile_sm90(pieces=True) if pieces else mod.compile_sm90()
    ptx = k.asm["ptx"]
    info, sass = assemble(ptx)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    regs = re.findall(r"Used (\d+) registers", info)
    state_loads = re.findall(r"/\*([0-9a-f]+)\*/\s+LDS\.U8 (R\d+), \[(R\d+)\+(0x[0-9a-f]+)\]", sass)
    state_stores = re.findall(r"st\.shared\.v2\.b32 \t\[global_smem\+(\d+)\], \{([^}]*)\}", ptx)
    print(f"{item}: shared {k.metadata.shared} B, registers {regs}, spill stores/loads {spills}, "
          f"wgmma {ptx.count('wgmma.mma_async')}, PTX instructions {ptx_instructions(ptx)}, "
          f"PTX code {code_digest(ptx)}")  # fmt: skip
    for off, dst, base, disp in state_loads[:2]:
        print(f"  SASS {off}: LDS.U8 {dst}, [{base}+{disp}]  (shared byte {int(disp, 16)})")
    for where, values in state_stores:
        print(f"  PTX st.shared.v2.b32 [global_smem+{where}], {{{values}}}")


def digests(rev: str) -> None:
    """The sparse kernel's PTX code digests at ``rev``: default launches, then batch-invariant ones."""
    mod = load(rev, {})
    variants = ({}, {"has_extra": False, "has_len": False, "has_sink": False}, {"num_hb": 2})
    line = " / ".join(code_digest(mod.compile_sm90(**kw).asm["ptx"]) for kw in variants)
    if "pieces" in inspect.signature(mod.compile_sm90).parameters:
        pieces = (code_digest(mod.compile_sm90(pieces=True, **kw).asm["ptx"]) for kw in variants)
        line += "; pieces: " + " / ".join(pieces)
    print(f"{rev} (Triton {triton.__version__}): {line}")


def main() -> None:
    global PATH
    args = sys.argv[1:]
    if args[:1] == ["--sparse"]:
        PATH, args = PATHS["sparse"], args[1:]
    if args[:1] == ["--digests"]:
        for rev in args[1:] or ["HEAD"]:
            digests(rev)
        return
    pieces = args[:1] == ["--pieces"]  # sparse: the batch-invariant pieces' build
    if pieces:
        args = args[1:]
    for item in args or ["HEAD"]:
        probe(item, pieces)


if __name__ == "__main__":
    main()
