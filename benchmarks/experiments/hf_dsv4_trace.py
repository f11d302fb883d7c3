"""Profiler traces of a stack we did not write: transformers' DeepSeek-V4 model decoding, one trace per batch size,
for ``wavemla trace``.

The model has DeepSeek-V4-Flash's attention at its real sizes (64 heads of 512, one shared key=value head, sinks,
window 128, CSA every 4 tokens with a 64-head indexer picking 512, HCA every 128) and random weights; fewer layers
and experts than the model (``--layers``, ``--experts``; 6 routed experts a token and the shared one, as in the
model). Per batch size: a random prompt of ``--prompt`` tokens is prefilled, then ``--steps`` decode steps run
under the profiler, each in a ``layer_step`` range and timed by CUDA events (the same helper as
``wavemla layer-bench``). ``--attn eager`` runs transformers' own attention, ``--attn wavemla`` this package's sparse
decode (``wavemla.hf_attention``). Writes ``OUT/hf-dsv4-ATTN-bsB.json.gz`` and ``OUT/hf-dsv4-ATTN.json`` (measured
step times), then runs ``wavemla trace`` over the traces (``--step-marker layer_step``) into
``OUT/hf-dsv4-ATTN-slope.json`` and prints its table. ``--stack`` records Python frames and passes ``--scope`` rules
(``STACK_SCOPES``) that give eager attention's, the indexer's and the MoE block's kernels their components. ``--tiny``
runs the tests' tiny model instead (a smoke run; on the CPU the traces hold no kernels, so the analysis is skipped).

    PYTHONPATH=src python3 benchmarks/experiments/hf_dsv4_trace.py OUT --attn eager --batch 1 8 32 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from wavemla.tools.layer_bench import STEP_MARKER, profile_steps  # each profiled step in a "layer_step" range

# With --stack: the host ranges of transformers' DeepSeek-V4 that hold each component's kernels.
STACK_SCOPES = (
    "attention=eager_attention_forward",
    r"indexer=nn\.Module: DeepseekV4Indexer_",
    r"moe=nn\.Module: DeepseekV4SparseMoeBlock_",
)


def build_model(layers: int, experts: int) -> Any:
    """The traced model on the GPU: DeepSeek-V4-Flash's attention sizes (the config's defaults), ``layers`` layers,
    ``experts`` routed experts, random weights in bf16, sinks drawn (they are initialized to 0)."""
    import transformers

    cfg = transformers.DeepseekV4Config(num_hidden_layers=layers, num_nextn_predict_layers=0, pad_token_id=0,
                                        vocab_size=32000, n_routed_experts=experts)  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.DeepseekV4ForCausalLM(cfg).to(torch.bfloat16).eval()
    for name, p in model.named_parameters():
        if name.endswith("sinks"):
            p.data.normal_(0.0, 1.0)
    return model


def tiny_model() -> Any:
    """The tests' tiny DeepSeek-V4 (tests/test_hf_attention.py), for a smoke run of this script."""
    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root)]
    from tests.test_hf_attention import tiny_model as make

    return make()


def trace_batch(
    model: Any, b: int, prompt: int, steps: int, path: Path, device: str, with_stack: bool = False
) -> list[float]:
    """Prefill a random prompt at batch ``b``, then profile ``steps`` decode steps; the CUDA-event µs of each."""
    gen = torch.Generator().manual_seed(b)
    ids = torch.randint(2, model.config.vocab_size, (b, prompt), generator=gen).to(device)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    state = {"cache": out.past_key_values, "token": out.logits[:, -1:].argmax(-1)}

    def step() -> None:
        with torch.no_grad():
            o = model(input_ids=state["token"], past_key_values=state["cache"], use_cache=True)
        state["cache"], state["token"] = o.past_key_values, o.logits[:, -1:].argmax(-1)

    step()  # warm: compiles wavemla's kernels for this shape, settles the caches
    return profile_steps(step, steps, path, cuda=device == "cuda", with_stack=with_stack)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--attn", choices=("eager", "wavemla"), default="eager")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=32)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--stack", action="store_true", help="record Python frames (for wavemla trace --scope)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.attn == "wavemla":
        import wavemla.hf_attention

        wavemla.hf_attention.register()
    model = tiny_model() if args.tiny else build_model(args.layers, args.experts)
    device = next(model.parameters()).device.type
    model.config._attn_implementation = args.attn
    record: dict[str, Any] = {"attn": args.attn, "prompt": args.prompt, "steps": args.steps, "layers": args.layers,
                              "experts": args.experts, "layer_types": model.config.layer_types,
                              "batches": {}}  # fmt: skip
    paths = []
    for b in args.batch:
        path = args.out / f"hf-dsv4-{args.attn}-bs{b}.json.gz"
        us = trace_batch(model, b, args.prompt, args.steps, path, device, args.stack)
        paths.append(str(path))
        record["batches"][b] = {"step_us": us, "median_step_us": statistics.median(us) if us else None}
        print(f"b={b}: decode step {record['batches'][b]['median_step_us']} us (median of {len(us)})", flush=True)
        (args.out / f"hf-dsv4-{args.attn}.json").write_text(json.dumps(record, indent=1))  # kept if a later b dies
    if device != "cuda":
        print("run on the CPU: traces written, no kernels to analyse")
        return 0
    slope = args.out / f"hf-dsv4-{args.attn}-slope.json"
    cmd = [sys.executable, "-m", "wavemla", "trace", *paths, "--step-marker", STEP_MARKER, "--json", str(slope)]
    if args.stack:  # the frames name what the kernels' names do not: eager attention, the indexer, the MoE block
        cmd += [f"--scope={s}" for s in STACK_SCOPES]
    rc = subprocess.run(cmd, check=False).returncode
    if rc == 0:
        compare_steps(record, json.loads(slope.read_text()))
    return rc


def compare_steps(record: dict[str, Any], analysis: dict[str, Any]) -> None:
    """Print, per batch, the analyzer's per-step time (first kernel to last, per step) against the CUDA-event step
    times: their mean (what a span over back-to-back steps averages) and median, and the analyzer's difference."""
    print(f"\n{'b':>4} {'trace ms/step':>14} {'events mean':>12} {'median':>9} {'max':>9} {'trace/mean':>11}")
    for t in analysis["traces"]:
        us = record["batches"][t["batch"]]["step_us"]
        mean = statistics.fmean(us) / 1e3
        print(
            f"{t['batch']:>4} {t['span_ms']:>14.3f} {mean:>12.3f} {statistics.median(us) / 1e3:>9.3f} "
            f"{max(us) / 1e3:>9.3f} {t['span_ms'] / mean - 1:>+10.1%}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
