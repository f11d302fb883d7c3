"""Profiler traces of a serving engine we did not write: ``transformers serve --continuous-batching`` (Hugging Face
transformers' OpenAI-compatible server: paged attention, its own CUDA graphs and batching choices) serving a
DeepSeek-V3-architecture model (MLA, shared and routed experts; random weights), one trace per concurrency, for
``wavemla trace``.

The server's HTTP side runs in a thread of this process and its model in a process of its own (transformers
spawns it); ``torch.profiler`` runs in the model process, started and stopped through files by
``hf_serve_profiler/sitecustomize.py``, and records the GPU kernels (CUPTI sees every thread of that process; the
host operators of the model's threads are not recorded). Clients in threads stream chat completions to the server
over HTTP. Per concurrency ``C``: ``C`` requests with prompts of equal length and the same
``max_tokens`` are sent at once; when every stream has returned ``--warm`` tokens the profiler starts, and it stops
when every stream has returned ``--window`` more. The measured step time is the profiled wall time over the mean
tokens a stream received in it (one token a request a decode step). Writes ``OUT/hf-serve-dsv3-bsC.json.gz``,
``OUT/hf-serve-dsv3.json`` (the engine's settings, the measured step times, each trace's kernel counts), and runs
``wavemla trace`` over the traces into ``OUT/hf-serve-dsv3-slope.json``; each trace cut to ``--fixture-steps`` steps
by the per-step kernel goes to ``OUT/fixtures/`` (trim_trace.py), for the tests.

DeepSeek-V4 is not used: transformers' continuous batching has no cache for its compressed layers
(``ValueError: Invalid layer type: compressed_sparse_attention``).

    PYTHONPATH=src:. python3 benchmarks/experiments/hf_serve_trace.py OUT --batch 1 8 16 32 64
    PYTHONPATH=src:. python3 benchmarks/experiments/hf_serve_trace.py OUT --tiny --batch 1 2   # a CPU smoke run
"""

from __future__ import annotations

import argparse
import collections
import gzip
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def build_model(out_dir: Path, tiny: bool, layers: int, experts: int) -> dict[str, Any]:
    """Save a DeepSeek-V3-architecture model with random bf16 weights and the tests' word-level tokenizer to
    ``out_dir``; returns the config's sizes. Not tiny: DeepSeek-V3's attention sizes (MLA: q rank 1536, kv rank
    512, 128 + 64 query/key dims, 128 value dims) at 16 heads and hidden 2048, one dense layer then MoE layers of
    ``experts`` routed experts (6 a token) and one shared."""
    import torch
    import transformers

    sys.path[:0] = [str(ROOT)]
    from tests.tools.tiny_transformers_server import save_tokenizer

    vocab = save_tokenizer(out_dir)
    if tiny:
        sizes = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=4, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
                     v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2)  # fmt: skip
    else:
        sizes = dict(hidden_size=2048, intermediate_size=8192, moe_intermediate_size=512, num_hidden_layers=layers,
                     num_attention_heads=16, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64,
                     qk_nope_head_dim=128, v_head_dim=128, n_routed_experts=experts, num_experts_per_tok=6)  # fmt: skip
    cfg = transformers.DeepseekV3Config(
        vocab_size=vocab, num_key_value_heads=sizes["num_attention_heads"], n_shared_experts=1,
        first_k_dense_replace=1, n_group=1, topk_group=1, max_position_embeddings=4096, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, **sizes,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):  # initialized where it is fast
        transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out_dir)
    # Special tokens never come out, so every request streams exactly max_tokens words.
    transformers.GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                  suppress_tokens=[0, 1, 2]).save_pretrained(out_dir)  # fmt: skip
    return {"vocab_size": vocab, **sizes}


def start_server(model_dir: Path, port: int, device: str) -> threading.Thread:
    """``transformers serve MODEL --continuous-batching`` on 127.0.0.1:``port`` in a daemon thread of this
    process; returns once ``/health`` answers."""
    from transformers.cli.serve import Serve

    def run() -> None:
        Serve(force_model=str(model_dir), continuous_batching=True, device=device, host="127.0.0.1", port=port,
              log_level="info")  # fmt: skip

    thread = threading.Thread(target=run, name="transformers-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError("transformers serve stopped while starting (see its log above)")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if json.loads(conn.getresponse().read()).get("status") == "ok":
                return thread
        except (OSError, ValueError):
            time.sleep(0.5)
    raise RuntimeError("transformers serve not healthy after 600 s")


class Stream(threading.Thread):
    """One client: a streamed chat completion; ``tokens`` counts the content chunks received so far."""

    def __init__(self, port: int, model: str, prompt: str, max_tokens: int) -> None:
        super().__init__(daemon=True)
        self.port, self.tokens, self.error = port, 0, ""
        self.body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                                "max_tokens": max_tokens, "temperature": 0, "stream": True})  # fmt: skip

    def run(self) -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            conn.request("POST", "/v1/chat/completions", self.body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                self.error = f"HTTP {resp.status}: {resp.read()[:300]!r}"
                return
            for raw in resp:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[5:]).get("choices", []):
                    if choice.get("delta", {}).get("content"):
                        self.tokens += 1
        except Exception as e:  # reported by the caller
            self.error = repr(e)


def wait_until(streams: list[Stream], least: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while min(s.tokens for s in streams) < least:
        errors = [s.error for s in streams if s.error]
        if errors:
            raise RuntimeError(f"a stream failed: {errors[0]}")
        if all(not s.is_alive() for s in streams) or time.monotonic() > deadline:
            raise RuntimeError(f"streams stopped short of {least} tokens: {sorted(s.tokens for s in streams)}")
        time.sleep(0.002)


def kernel_counts(path: Path) -> dict[str, int]:
    """Kernel launches in a trace by name (GPU kernels: ``cat`` kernel)."""
    with gzip.open(path, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    return dict(collections.Counter(e["name"] for e in events if e.get("cat") == "kernel").most_common())


def _signal(ctl: Path, name: str, text: str = "") -> None:
    tmp = ctl / (name + ".tmp")
    tmp.write_text(text)
    tmp.rename(ctl / name)


def _await(ctl: Path, name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not (ctl / name).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the model process did not answer {name!r} in {timeout_s:g} s")
        time.sleep(0.002)
    (ctl / name).unlink()


def trace_concurrency(port: int, model: str, c: int, warm: int, window: int, path: Path, ctl: Path) -> dict:
    """Profile, in the model process (hf_serve_profiler/sitecustomize.py), a window of decode steps with ``c``
    streams in flight."""
    words = "the city of paris has a long history and the weather is good"  # 14 words, 14 tokens, every prompt
    streams = [Stream(port, model, f"{words} w{i % 100}", warm + window + 16) for i in range(c)]
    for s in streams:
        s.start()
    wait_until(streams, warm, 600)
    _signal(ctl, "start", str(path))  # torch.profiler writes a .json.gz path gzipped
    _await(ctl, "started", 60)
    n0 = [s.tokens for s in streams]
    t0 = time.perf_counter()
    wait_until(streams, warm + window, 600)
    wall = time.perf_counter() - t0
    n1 = [s.tokens for s in streams]
    _signal(ctl, "stop")
    _await(ctl, "done", 300)
    for s in streams:
        s.join(timeout=600)
    got = [b - a for a, b in zip(n0, n1, strict=True)]
    step_ms = wall * 1e3 / (sum(got) / len(got))
    return {"window_s": wall, "tokens_per_stream": got, "step_ms": step_ms, "kernels": kernel_counts(path)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16, 32, 64])
    parser.add_argument("--warm", type=int, default=24, help="tokens every stream has before the profiler starts")
    parser.add_argument("--window", type=int, default=24, help="tokens every stream gets while profiled")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=64)
    parser.add_argument("--port", type=int, default=8019)
    parser.add_argument("--tiny", action="store_true", help="a tiny model (CPU smoke run)")
    parser.add_argument("--fixture-steps", type=int, default=3, help="decode steps kept in OUT/fixtures' cut traces")
    parser.add_argument(
        "--step-kernel", default=None, help="for wavemla trace (default: a kernel launched once a step in every trace)"
    )
    args = parser.parse_args(argv)
    # No hub: the GPU machine has no network. On CUDA the server would fetch Hub kernels (liger's RMSNorm and
    # others) at load time; without a network they are switched off (USE_HUB_KERNELS=0), so the layers run
    # transformers' own torch code.
    os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_UPDATE_CHECK="1", HF_HUB_DISABLE_TELEMETRY="1",
                      USE_HUB_KERNELS="0")  # fmt: skip
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hf-serve-dsv3-"))
    model_dir = work / "model"  # not under OUT: GBs of weights
    sizes = build_model(model_dir, args.tiny, args.layers, args.experts)
    # transformers serve runs the model in a process of its own (multiprocessing, spawn): the profiler must run
    # there, started and stopped through files in `ctl` by the sitecustomize that PYTHONPATH gives that process.
    ctl = work / "ctl"
    ctl.mkdir()
    os.environ["HF_SERVE_PROFILE_CTL"] = str(ctl)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent / "hf_serve_profiler"), os.environ.get("PYTHONPATH", "")]
    )
    start_server(model_dir, args.port, "cuda" if cuda else "cpu")
    record: dict[str, Any] = {
        "engine": f"transformers serve --continuous-batching (transformers {transformers.__version__})",
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name() if cuda else None, "model": sizes,
        "warm": args.warm, "window": args.window, "batches": {},
    }  # fmt: skip
    paths = []
    for c in args.batch:
        path = args.out / f"hf-serve-dsv3-bs{c}.json.gz"
        rec = trace_concurrency(args.port, str(model_dir), c, args.warm, args.window, path, ctl)
        record["batches"][c] = rec
        paths.append(str(path))
        print(f"C={c}: {rec['step_ms']:.3f} ms a step over {rec['window_s']:.2f} s, tokens {rec['tokens_per_stream']}"
              f", {sum(rec['kernels'].values())} kernels", flush=True)  # fmt: skip
        (args.out / "hf-serve-dsv3.json").write_text(json.dumps(record, indent=1))  # kept if a later C dies
    if not cuda:
        print("run on the CPU: traces written, no kernels to analyse")
        return 0
    step_kernel = args.step_kernel or per_step_kernel(record)
    if step_kernel is None:
        print("no kernel is launched once a step in every trace: pass --step-kernel (analysis skipped)")
        return 1
    record["step_kernel"] = step_kernel
    (args.out / "hf-serve-dsv3.json").write_text(json.dumps(record, indent=1))
    write_fixtures(paths, step_kernel, args.out / "fixtures", args.fixture_steps)
    slope = args.out / "hf-serve-dsv3-slope.json"
    cmd = [sys.executable, "-m", "wavemla", "trace", *paths, "--step-kernel", step_kernel, "--json", str(slope)]
    print(" ".join(cmd), flush=True)
    rc = subprocess.run(cmd, check=False).returncode
    if rc == 0:
        analysis = json.loads(slope.read_text())
        print(f"\n{'C':>4} {'trace ms/step':>14} {'measured':>9} {'trace/measured':>15}")
        for t in analysis["traces"]:
            ms = record["batches"][t["batch"]]["step_ms"]
            print(f"{t['batch']:>4} {t['span_ms']:>14.3f} {ms:>9.3f} {t['span_ms'] / ms - 1:>+14.1%}")
    return rc


def write_fixtures(paths: list[str], step_kernel: str, out_dir: Path, steps: int) -> None:
    """Each trace cut to ``steps`` decode steps by the per-step kernel (trim_trace.trim_by_kernel: the GPU events
    and the runtime calls that launched them), gzipped into ``out_dir`` under the trace's name: small enough to
    commit as test fixtures of ``wavemla trace``."""
    sys.path[:0] = [str(Path(__file__).resolve().parent)]
    from trim_trace import trim_by_kernel

    out_dir.mkdir(parents=True, exist_ok=True)
    for path in map(Path, paths):
        with gzip.open(path, "rt") as f:
            cut = trim_by_kernel(json.load(f), step_kernel, steps)
        with gzip.open(out_dir / path.name, "wt", compresslevel=9) as f:
            json.dump(cut, f, separators=(",", ":"))
        print(f"fixture {out_dir / path.name}: {(out_dir / path.name).stat().st_size} bytes", flush=True)


def per_step_kernel(record: dict[str, Any]) -> str | None:
    """A kernel name launched once a decode step in every trace (its count equal to the tokens a stream got in the
    window, within one): the most launched such name, as an anchored regex; None where none is."""
    best = None
    for name in next(iter(record["batches"].values()))["kernels"]:
        ok = all(abs(rec["kernels"].get(name, 0) - sum(rec["tokens_per_stream"]) / len(rec["tokens_per_stream"])) <= 1
                 for rec in record["batches"].values())  # fmt: skip
        if ok:
            best = name
            break
    print(f"per-step kernel: {best!r}", flush=True)
    return "^" + re.escape(best) + "$" if best else None


if __name__ == "__main__":
    import multiprocessing

    code = main()
    # Leave without the interpreter's teardown, where the server's daemon thread died with a segmentation fault on
    # the H100 machine (exit 139 after a complete run); the model process transformers spawned is ended first.
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(10)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
