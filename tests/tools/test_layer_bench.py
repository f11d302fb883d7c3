"""Tests for ``wavemla layer-bench``: the tiny layer end to end on the CPU lane (JSON, traces, rules), its attention
and MoE against fp64 references of dsv4-attention.md §2-§5, and argument errors.

Without a GPU the layer runs eagerly through Triton's interpreter (fp16) and traces come from the CPU profiler, so
they hold the ``layer.*`` annotations but no GPU kernels; kernel classification is checked on kernel names instead.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import torch

from wavemla import cli
from wavemla.reference.fp8 import dequantize_model1, quantize_model1
from wavemla.reference.indexer import dequantize_index_k, quantize_index_q
from wavemla.tools import layer_bench
from wavemla.tools.layer_bench import (
    COMPONENTS,
    RESULTS_FILE,
    RULES_FILE,
    SCHEMA,
    TINY,
    DecoderLayer,
    MoE,
    make_config,
    run_layer_bench,
    yarn_freqs,
)
from wavemla.tools.trace import StepSpec, analyze, load_events, profile_trace, resolve_inputs
from wavemla.tools.trace_rules import RuleSet, build_ruleset, default_rules

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16
BATCHES = (1, 3)
# Lane tolerances against the fp64 references: max error / max |ref|, cosine difference, slack of a top-k choice
# (relative to the largest score), and request-for-request agreement of two batch sizes. The CPU lane runs in fp16;
# bf16 keeps 3 fewer mantissa bits.
TOL = {
    torch.float16: {"rel": 5e-3, "cos": 2e-6, "topk": 1e-2, "slice": 2e-3},
    torch.bfloat16: {"rel": 4e-2, "cos": 2e-4, "topk": 3e-2, "slice": 2e-2},
}[DTYPE]
# torch._grouped_mm is graph-capturable on sm_90/sm_100 only; the tool refuses other GPUs.
GRAPHS_OK = DEVICE == "cpu" or torch.cuda.get_device_capability()[0] in (9, 10)
STEPS = StepSpec(kernel=layer_bench.STEP_KERNEL)  # how `wavemla trace` counts layer steps in these traces
# H200 traces and the rules file of an earlier `layer-bench --mode csa --batch 1 32 64 --context 8192` run
# (docs/trace.md, "Real H200 traces in the tests"; analysed in test_trace.py)
H200 = Path(__file__).parent / "data" / "h200_layer_csa"
H200_RULES = Path(__file__).parent / "data" / "h200_layer_rules.json"


# ------------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    if not GRAPHS_OK:
        pytest.skip("the layer bench runs on sm_90/sm_100 GPUs (or the CPU interpreter)")
    out = tmp_path_factory.mktemp("layer_bench")
    cfg = make_config(tiny=True, batches=BATCHES, out=out, device=DEVICE, reps=1, profile_steps=1)
    lines: list[str] = []
    doc = run_layer_bench(cfg, log=lines.append)
    assert len(lines) == 1 + len(BATCHES) * 2  # a header, then one line per mode and batch
    return doc, out


def test_json_schema_and_values(tiny_run: tuple[dict[str, Any], Path]) -> None:
    doc, out = tiny_run
    assert json.loads((out / RESULTS_FILE).read_text()) == doc
    assert doc["schema"] == SCHEMA
    assert set(doc) >= {"env", "args", "dims", "timer", "units", "modes", "rules"}
    assert doc["args"]["batches"] == list(BATCHES) and doc["args"]["tiny"] is True and doc["args"]["ep"] == 1
    assert doc["args"]["index_k"] == "fp8"
    assert doc["modes"]["csa"]["index_k"] == {"format": "fp8", "layout": "paged", "row_bytes": 132}
    assert "index_k" not in doc["modes"]["hca"]
    assert doc["dims"]["hidden"] == TINY.hidden and doc["dims"]["experts"] == TINY.experts
    assert list(doc["modes"]) == ["csa", "hca"]
    context = doc["args"]["context"]
    for mode, comps in (("csa", list(COMPONENTS)), ("hca", [c for c in COMPONENTS if c != "indexer"])):
        entry = doc["modes"][mode]
        assert entry["components"] == comps
        assert entry["n_comp"] == context // entry["ratio"]
        assert entry["rows"]["window"] == TINY.window
        selected = min(TINY.index_topk, entry["n_comp"]) if mode == "csa" else entry["n_comp"]
        assert entry["rows"]["compressed"] == selected
        assert [r["batch"] for r in entry["batches"]] == list(BATCHES)
        for rec in entry["batches"]:
            assert list(rec["components"]) == comps
            for timing in [*rec["components"].values(), rec["layer"]]:
                assert 0 < timing["p20_us"] <= timing["median_us"] <= timing["p80_us"]
            assert all(t["bytes"] > 0 and t["gbps"] > 0 for t in rec["components"].values())
            assert rec["component_sum_us"] == pytest.approx(sum(t["median_us"] for t in rec["components"].values()))
            assert TINY.experts_per_token <= rec["distinct_routed_experts"] <= TINY.experts
            assert rec["experts_read"] == rec["distinct_routed_experts"] + 1  # one GPU: its routed ones and the shared
            assert rec["trace"] == f"{mode}/layer_bs{rec['batch']}.json.gz"
            if DEVICE == "cuda":  # the traced steps' own times, one per profiled step
                traced = rec["layer_traced"]
                assert len(traced["steps_us"]) == doc["args"]["profile_steps"] and traced["median_us"] > 0
            else:
                assert "layer_traced" not in rec
        # more requests touch more experts: the MoE weight bytes grow with the batch
        moe_bytes = [r["components"]["moe"]["bytes"] for r in entry["batches"]]
        assert moe_bytes == sorted(moe_bytes)


def test_traces_parse_with_trace_readers(tiny_run: tuple[dict[str, Any], Path]) -> None:
    doc, out = tiny_run
    for mode, entry in doc["modes"].items():
        inputs = resolve_inputs([str(out / mode)])  # the mode directory holds traces only
        assert [(Path(i.path).name, i.batch) for i in inputs] == [(f"layer_bs{b}.json.gz", b) for b in BATCHES]
        for item in inputs:
            events = load_events(item.path)
            names = {e["name"] for e in events if e.get("cat") in ("user_annotation", "gpu_user_annotation")}
            assert layer_bench.STEP_MARKER in names
            # the profiler's warm-up step is traced but not kept: exactly the requested steps are in the file
            marks = [e for e in events if e["name"] == layer_bench.STEP_MARKER and e.get("cat") == "user_annotation"]
            assert len(marks) == doc["args"]["profile_steps"]
            if DEVICE == "cuda":  # graph replays: kernels, but no per-component ranges (Python does not rerun)
                rules = build_ruleset([out / RULES_FILE])
                prof = profile_trace(item.path, item.batch, rules, STEPS)
                assert prof.steps == doc["args"]["profile_steps"]
                assert prof.graph_kernels > 0
                ran = {c for c, t in prof.components.items() if t.busy_ms > 0}
                assert {"attention", "moe", "dense_gemm"} <= ran and ("indexer" in ran) == (mode == "csa")
            else:  # CPU profiler: eager steps with every component's range, CPU ops, no GPU kernels
                assert {f"layer.{c}" for c in entry["components"]} <= names
                with pytest.raises(ValueError, match="no GPU kernel events"):
                    profile_trace(item.path, item.batch, RuleSet(default_rules()), STEPS)
        assert shlex.split(entry["trace_command"])[-4:] == [
            "--step-kernel",
            layer_bench.STEP_KERNEL,
            "--rules",
            str(out / RULES_FILE),
        ]


@pytest.mark.parametrize(
    ("name", "counted"),
    [
        ("_sparse_mla_decode_kernel", True),
        ("_sparse_mla_decode_ws_kernel", True),  # the split kernel on sm_90 with Gluon
        ("_sparse_mla_combine_kernel", False),
        ("_dense_mla_decode_ws_kernel", False),
        ("_sparse_prefill_kernel", False),
        ("_mla_v32_lists_kernel", False),
    ],
)
def test_step_kernel_counts_either_split_kernel(name: str, counted: bool) -> None:
    """One split kernel runs per layer step, whichever of the two the GPU runs; the printed command is shell-safe."""
    assert bool(re.search(layer_bench.STEP_KERNEL, name)) is counted
    command = layer_bench.trace_command(Path("out dir"), "csa")
    assert shlex.split(command)[2:5] == ["out dir/csa", "--step-kernel", layer_bench.STEP_KERNEL]


# Kernel names as Kineto writes them on an H200: ours (Triton function names), CUTLASS grouped GEMM of
# torch._grouped_mm, cuBLAS and ATen elementwise kernels.
GROUPED = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<"
    "cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
    "MainloopSm90ArrayTmaGmmaWarpSpecializedPingpong<4, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, "
    "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>, cutlass::bfloat16_t> > >(...)"
)
ROUTER_TOPK = "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<...>)"
KERNELS = [
    ("_sparse_mla_decode_kernel", "attention"),
    ("_sparse_mla_combine_kernel", "attention"),
    ("_indexer_score_kernel", "indexer"),
    ("_indexer_hist_kernel", "indexer"),
    ("_indexer_count_kernel", "indexer"),
    ("_indexer_compact_kernel", "indexer"),
    (GROUPED, "moe"),
    ("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, cutlass::bfloat16_t>(...)", "moe"),
    (ROUTER_TOPK, "moe"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel("
        "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(c10::BFloat16)#1}, ...>(int, ...)",
        "moe",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::softplus_kernel("
        "at::TensorIteratorBase&, c10::Scalar const&, c10::Scalar const&)::{lambda()#1}, ...>(int, ...)",
        "moe",
    ),
    ("nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "dense_gemm"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, ...> >(...)", "norm_elementwise"),
    # the MoE counting sort's cumsums: one-hot over pairs (2-D) and expert counts into offsets (1-D, cub)
    ("void at::native::tensor_kernel_scan_outer_dim<int, unsigned int, std::plus<int> >(int*, ...)", "moe"),
    (
        "void at_cuda_detail::cub::detail::scan::DeviceScanInitKernel<at_cuda_detail::cub::ScanTileState<int, true> >"
        "(at_cuda_detail::cub::ScanTileState<int, true>, int)",
        "moe",
    ),
    ("void at_cuda_detail::cub::detail::scan::DeviceScanKernel<...::Policy1000, int const*, int*, ...>(...)", "moe"),
    # kv_write's FP8 scale 2^ceil(log2(amax / 448)); the float8 cast after it is a default quantization rule
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::log2_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, ...>(int, ...)",
        "quantization",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::ceil_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, ...>(int, ...)",
        "quantization",
    ),
    ("exp2_kernel_vectorized4_kernel", "quantization"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::float8_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda(float)#1}, ...>(int, ...)",
        "quantization",
    ),
]


@pytest.mark.parametrize(("name", "component"), KERNELS, ids=[f"{c}-{i}" for i, (_, c) in enumerate(KERNELS)])
def test_rules_file_classifies_layer_kernels(tiny_run: tuple[dict[str, Any], Path], name: str, component: str) -> None:
    _, out = tiny_run
    assert build_ruleset([out / RULES_FILE]).classify(name) == component


def test_without_rules_file_router_topk_is_sampling() -> None:
    # why the rules file exists: the default rules cannot tell the router's top-k from a sampler's
    assert RuleSet(default_rules()).classify(ROUTER_TOPK) == "sampling"


def test_rules_file_classifies_every_kernel_of_the_h200_traces(tmp_path: Path) -> None:
    # The H200 run's own rules file left cub's scans and exp2 in "other" (test_trace.py pins them); the rules
    # written now keep the old ones and leave nothing unclassified.
    written = json.loads(layer_bench.write_rules(tmp_path).read_text())["rules"]
    old = json.loads(H200_RULES.read_text())["rules"]
    assert written == list(layer_bench.LAYER_RULES) and {r["name"] for r in old} < {r["name"] for r in written}
    report = analyze(resolve_inputs([str(H200)]), STEPS, build_ruleset([tmp_path / RULES_FILE]))
    assert report.unclassified() == []
    fit = report.fit
    assert fit is not None and fit.driver == "moe"
    slopes = {c: f.slope_ms_per_request for c, f in fit.components.items()}
    # The counting sort's one-hot cumsum (2 → 81 µs a step from batch 1 to 64) moves from norm_elementwise to moe:
    # norm_elementwise's slope halves, below the indexer's, and moe's share of the busy-time slope grows to 90%.
    assert slopes["moe"] == pytest.approx(0.04138, abs=1e-5) and fit.driver_share == pytest.approx(0.904, abs=1e-3)
    assert slopes["norm_elementwise"] == pytest.approx(0.00139, abs=1e-5)
    assert slopes["norm_elementwise"] < slopes["indexer"]


# --------------------------------------------------------------------------------------- fp64 references


def _rms64(x: torch.Tensor, w: torch.Tensor | None = None, eps: float = TINY.eps) -> torch.Tensor:
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w.double()


def _freqs64() -> torch.Tensor:
    """YaRN frequencies written from dsv4-attention.md §1-§2 (theta 160000, factor 16, lo 15, hi 25)."""
    j = torch.arange(32, dtype=torch.float64)
    f = 160000.0 ** (-j / 32)
    ramp = ((j - 15) / 10).clamp(0, 1)
    return f * (1 - ramp) + f / 16 * ramp


def _rope64(x: torch.Tensor, p: int, inverse: bool = False) -> torch.Tensor:
    """Rotate the last 64 dims as 32 complex pairs by ``p·f_j`` (conjugate when inverse), fp64."""
    z = torch.view_as_complex(x[..., -64:].reshape(*x.shape[:-1], 32, 2).contiguous())
    turn = torch.polar(torch.ones(32, dtype=torch.float64), p * _freqs64() * (-1.0 if inverse else 1.0))
    out = x.clone()
    out[..., -64:] = torch.view_as_real(z * turn).flatten(-2)
    return out


def _rows(cache: torch.Tensor) -> torch.Tensor:
    return dequantize_model1(cache.cpu(), torch.float64).reshape(-1, 512)


def _slot_rows(table: torch.Tensor, page: int, n: int) -> torch.Tensor:
    """Global slots of a request's rows 0..n-1 through its block table row."""
    i = torch.arange(n)
    return table.long().cpu()[i // page] * page + i % page


def _is_topk(score: torch.Tensor, chosen: torch.Tensor, k: int, tol: float) -> bool:
    """``chosen`` holds k distinct rows whose scores all reach the k-th best within ``tol`` (near ties allowed)."""
    kth = score.topk(k).values[-1]
    return chosen.numel() == k == chosen.unique().numel() and bool((score[chosen] >= kth - tol).all())


def _assert_close(name: str, got: torch.Tensor, ref: torch.Tensor, rel: float, cos: float) -> None:
    got = got.double().cpu()
    err = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    cd = 1 - torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
    assert err <= rel * scale and cd <= cos, f"{name}: max err {err:.3g} (scale {scale:.3g}), cosine diff {cd:.3g}"


@pytest.fixture(scope="module")
def moe() -> MoE:
    return MoE(TINY, DEVICE, DTYPE, torch.Generator(device=DEVICE).manual_seed(3))


def test_yarn_freqs_follow_the_spec() -> None:
    f = yarn_freqs(TINY)
    base = 160000.0 ** (-torch.arange(32, dtype=torch.float64) / 32)
    assert torch.equal(f[:16], base[:16])  # ramp 0 up to lo = 15
    assert torch.allclose(f[25:], base[25:] / 16, rtol=1e-15)  # ramp 1 from hi = 25
    assert torch.allclose(f, _freqs64(), rtol=1e-14)


@pytest.mark.parametrize(
    ("mode", "index_k"),
    [
        pytest.param("csa", "fp8", id="csa"),
        pytest.param("csa", "mxfp4", id="csa-mxfp4"),
        pytest.param("hca", "fp8", id="hca"),
    ],
)
def test_attention_and_moe_match_fp64_reference(mode: str, index_k: str, moe: MoE) -> None:
    d = TINY
    context, b = 16 * d.window + 5, 3  # p = context - 1 not aligned to the ring or to a compressed row
    layer = DecoderLayer(d, mode, context, b, moe, device=DEVICE, dtype=DTYPE, seed=1, index_k=index_k)
    inp = layer.inputs(b)
    acts = layer.forward(inp)
    p = context - 1
    n_comp = context // layer_bench.MODES[mode]
    swa_rows, comp_rows = _rows(layer.swa_cache), _rows(layer.comp_cache)
    wq_a, wkv = layer.w_qkv_a.double().cpu().split([d.q_lora, 512])
    for r in range(b):
        x = layer.x[r].double().cpu()
        xn = _rms64(x, layer.attn_norm.cpu())
        qr = _rms64(wq_a @ xn, layer.q_norm.cpu())
        q = _rope64(_rms64((layer.wq_b.double().cpu() @ qr).view(d.heads, 512)), p)
        kv = _rope64(_rms64(wkv @ xn, layer.kv_norm.cpu()), p)

        # the window: tokens p-15 .. p at ring slots t % 16; the step wrote token p's row (FP8 MODEL1)
        ring = torch.arange(p - d.window + 1, p + 1) % d.window
        win_slots = _slot_rows(layer.swa_table[r], d.swa_page, d.window)[ring]
        assert torch.equal(layer.win_idx[r, 0].cpu().long(), win_slots)
        written = swa_rows[win_slots[-1]]
        quantized_ref = dequantize_model1(quantize_model1(kv.float().view(1, 1, 1, 512)), torch.float64).view(512)
        # fp16 vs fp64 inputs may round an element to the neighbouring e4m3 code: at most 1/8 of the tile's amax
        _assert_close(f"row {r} written to the window", written, quantized_ref, rel=0.13, cos=1e-3)

        slots = _slot_rows(layer.comp_table[r], d.page(mode), n_comp)  # compressed row i -> global slot
        if mode == "csa":
            # page-split rows of the chosen format, read back by their width
            assert layer.idx_cache.shape[-1] == layer_bench.INDEX_K_ROW_BYTES[index_k]
            iq = _rope64((layer.idx_wq_b.double().cpu() @ qr).view(d.index_heads, 128), p)
            w = (layer.idx_wproj.double().cpu() @ xn) * (128**-0.5 * d.index_heads**-0.5)
            iq8, w8 = quantize_index_q(iq, w)  # e4m3 queries, their scale folded into the head weights
            keys = dequantize_index_k(layer.idx_cache.cpu(), layout="paged").double().reshape(-1, 128)[slots]
            score = (torch.relu(iq8.double() @ keys.T) * w8.double()[:, None]).sum(0)  # [n_comp]
            k = min(d.index_topk, n_comp)
            assert int(acts.comp_len[r]) == k
            chosen_slots = acts.comp_idx[r, 0, :k].long().cpu()
            row_of = {int(s): i for i, s in enumerate(slots)}
            chosen = torch.tensor([row_of[int(s)] for s in chosen_slots])
            assert _is_topk(score, chosen, k, tol=TOL["topk"] * score.abs().max().item()), f"request {r}: not a top-{k}"
            comp = comp_rows[chosen_slots]
        else:
            assert torch.equal(acts.comp_idx[r, 0].long().cpu(), slots)
            comp = comp_rows[slots]
        rows = torch.cat([swa_rows[win_slots], comp])  # attended rows, K = V

        s = (q @ rows.T) * 512**-0.5  # [H, N]
        sink = layer.sink.double().cpu()
        m = torch.maximum(s.amax(-1), sink)
        e = torch.exp(s - m[:, None])
        o = (e @ rows) / (e.sum(-1) + torch.exp(sink - m))[:, None]
        _assert_close(f"request {r} sparse decode", acts.o[r], o, rel=TOL["rel"], cos=TOL["cos"])
        o = _rope64(o, p, inverse=True)
        heads = d.heads // d.o_groups
        groups = o.view(d.o_groups, heads * 512)  # group g = heads 8g .. 8g+7
        y = torch.cat([layer.wo_a[g].double().cpu() @ groups[g] for g in range(d.o_groups)])
        attn = layer.wo_b.double().cpu() @ y
        _assert_close(f"request {r} attention output", acts.attn_out[r], attn, rel=TOL["rel"], cos=TOL["cos"])

    # MoE on the layer's own h: the layer's routing must be a top-6, its output the weighted expert sum
    for t in range(b):
        h = acts.h[t].double().cpu()
        hn = _rms64(h, moe.ffn_norm.cpu())
        scores = torch.sqrt(torch.nn.functional.softplus(moe.gate.double().cpu() @ hn))
        biased = scores + moe.bias.double().cpu()
        sel = acts.experts[t].cpu()
        assert _is_topk(biased, sel, d.experts_per_token, tol=TOL["topk"]), f"token {t}: routing is not a top-6"
        gates = scores[sel] / scores[sel].sum() * d.route_scale

        def expert(i: int, v: torch.Tensor) -> torch.Tensor:
            gu = moe.w13[i].double().cpu() @ v
            return moe.w2[i].double().cpu() @ (torch.nn.functional.silu(gu[: d.moe_inter]) * gu[d.moe_inter :])

        ref = h + sum(g * expert(int(i), hn) for g, i in zip(gates, sel, strict=True)) + expert(d.experts, hn)
        _assert_close(f"token {t} MoE", acts.out[t], ref, rel=TOL["rel"], cos=TOL["cos"])


def _expert64(moe: MoE, i: int, v: torch.Tensor) -> torch.Tensor:
    gu = moe.w13[i].double().cpu() @ v
    return moe.w2[i].double().cpu() @ (torch.nn.functional.silu(gu[: TINY.moe_inter]) * gu[TINY.moe_inter :])


@pytest.mark.parametrize("ep", [2, 4])
def test_expert_parallel_moe_is_this_gpus_share(ep: int) -> None:
    """One of ``ep`` expert-parallel GPUs: its tokens get the shared expert and the routed experts it holds
    (``0 .. E/ep - 1``), nothing from the others'; its weight reads count the local experts chosen by its own and
    the simulated other GPUs' tokens."""
    t, local = 3, TINY.experts // ep
    moe = MoE(TINY, DEVICE, DTYPE, torch.Generator(device=DEVICE).manual_seed(5), ep=ep, max_tokens=t)
    assert moe.w13.shape[0] == local + 1 and moe.remote_x.shape[0] == (ep - 1) * t
    h = torch.randn((t, TINY.hidden), generator=torch.Generator().manual_seed(6)).to(DEVICE, DTYPE)
    out, sel = moe(h)
    for i in range(t):
        hv = h[i].double().cpu()
        hn = _rms64(hv, moe.ffn_norm.cpu())
        scores = torch.sqrt(torch.nn.functional.softplus(moe.gate.double().cpu() @ hn))
        chosen = sel[i].cpu()
        assert _is_topk(scores + moe.bias.double().cpu(), chosen, TINY.experts_per_token, tol=TOL["topk"])
        gates = scores[chosen] / scores[chosen].sum() * TINY.route_scale
        here = [(g, int(e)) for g, e in zip(gates, chosen, strict=True) if int(e) < local]
        ref = hv + sum((g * _expert64(moe, e, hn) for g, e in here), _expert64(moe, local, hn))
        _assert_close(f"token {i} MoE share", out[i], ref, rel=TOL["rel"], cos=TOL["cos"])
    mine = sel.reshape(-1).cpu()
    theirs = moe.remote_sel[: (ep - 1) * t].reshape(-1).cpu()
    both = torch.cat((mine, theirs))
    assert moe.experts_read(sel) == int(torch.unique(both[both < local]).numel()) + 1
    assert moe.remote_pairs_upto[(ep - 1) * t] == int((theirs < local).sum())  # their pairs that reach this GPU
    with pytest.raises(ValueError, match="h: 4 tokens, more than the 3 built for"):
        moe(torch.cat((h, h[:1])))


def test_expert_parallel_arguments() -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    with pytest.raises(ValueError, match="ep: expected a divisor of the 16 routed experts, got 3"):
        MoE(TINY, DEVICE, DTYPE, gen, ep=3, max_tokens=2)
    with pytest.raises(ValueError, match="max_tokens: expected >= 1 with ep = 2"):
        MoE(TINY, DEVICE, DTYPE, gen, ep=2)
    cfg = make_config(tiny=True, device="cpu", ep=8)
    assert cfg.ep == 8 and make_config(tiny=True, device="cpu").ep == 1


def test_expert_parallel_run_end_to_end(tmp_path: Path) -> None:
    """``--ep 4`` through the whole tool: the record counts the expert weight sets read on this GPU, and the MoE's
    bytes are those sets."""
    if not GRAPHS_OK:
        pytest.skip("the layer bench runs on sm_90/sm_100 GPUs (or the CPU interpreter)")
    cfg = make_config(tiny=True, modes=["hca"], batches=(2,), ep=4, out=tmp_path, device=DEVICE, reps=1,
                      profile_steps=1)  # fmt: skip
    doc = run_layer_bench(cfg, log=lambda _: None)
    assert doc["args"]["ep"] == 4
    rec = doc["modes"]["hca"]["batches"][0]
    assert 2 <= rec["experts_read"] <= TINY.experts // 4 + 1  # local experts chosen by any GPU's tokens + shared
    expert = 3 * TINY.hidden * TINY.moe_inter * torch.finfo(DTYPE).bits // 8
    gate = TINY.experts * TINY.hidden * torch.finfo(DTYPE).bits // 8
    assert rec["components"]["moe"]["bytes"] == gate + rec["experts_read"] * expert


def test_mxfp4_index_k_run_end_to_end(tmp_path: Path) -> None:
    """``--index-k mxfp4`` through the whole tool: the CSA layer's indexer reads 68-byte rows, the JSON records the
    format, and the indexer's bytes count 68 bytes per compressed row."""
    if not GRAPHS_OK:
        pytest.skip("the layer bench runs on sm_90/sm_100 GPUs (or the CPU interpreter)")
    cfg = make_config(tiny=True, modes=["csa"], batches=(2,), index_k="mxfp4", out=tmp_path, device=DEVICE, reps=1,
                      profile_steps=1)  # fmt: skip
    lines: list[str] = []
    doc = run_layer_bench(cfg, log=lines.append)
    assert "MXFP4 index-K rows" in lines[0]
    assert doc["args"]["index_k"] == "mxfp4" == json.loads((tmp_path / RESULTS_FILE).read_text())["args"]["index_k"]
    entry = doc["modes"]["csa"]
    assert entry["index_k"] == {"format": "mxfp4", "layout": "paged", "row_bytes": 68}
    el = torch.finfo(DTYPE).bits // 8
    weights = (TINY.index_heads * 128 * TINY.q_lora + TINY.index_heads * TINY.hidden) * el  # idx_wq_b, idx_wproj
    rec = entry["batches"][0]
    assert rec["components"]["indexer"]["bytes"] == weights + 2 * entry["n_comp"] * 68


def test_rerun_into_the_same_directory_leaves_only_its_own_traces(tmp_path: Path) -> None:
    """``wavemla trace OUT/<mode>`` fits every trace in the directory: a second run into the same ``--out`` with
    fewer batch sizes must not leave the first run's other traces there to be fitted with its own."""
    if not GRAPHS_OK:
        pytest.skip("the layer bench runs on sm_90/sm_100 GPUs (or the CPU interpreter)")
    for batches in ((1, 2), (1,)):
        cfg = make_config(tiny=True, modes=["hca"], batches=batches, out=tmp_path, device=DEVICE, reps=1,
                          profile_steps=1)  # fmt: skip
        doc = run_layer_bench(cfg, log=lambda _: None)
    assert [r["batch"] for r in doc["modes"]["hca"]["batches"]] == [1]
    assert [(Path(i.path).name, i.batch) for i in resolve_inputs([str(tmp_path / "hca")])] == [("layer_bs1.json.gz", 1)]


def test_cpu_timings_are_p20_median_p80_of_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    # five calls of 1..5 µs by the clock: p80 lies between the 4th and the 5th, as on the GPU (it was the maximum)
    clock = iter([0.0, 3e-6, 0.0, 1e-6, 0.0, 5e-6, 0.0, 2e-6, 0.0, 4e-6])
    monkeypatch.setattr(layer_bench.time, "perf_counter", lambda: next(clock))
    assert layer_bench._cpu_timings_us(lambda: None, 5) == pytest.approx((1.8, 3.0, 4.2))


def test_slicing_a_batch_repeats_the_first_requests(moe: MoE) -> None:
    layer = DecoderLayer(TINY, "hca", 4 * TINY.window * 8, 3, moe, device=DEVICE, dtype=DTYPE, seed=2)
    one = layer.forward(layer.inputs(1))
    three = layer.forward(layer.inputs(3))
    torch.testing.assert_close(one.attn_out[0], three.attn_out[0], rtol=TOL["slice"], atol=TOL["slice"])
    with pytest.raises(ValueError, match="batch 4"):
        layer.inputs(4)


# ----------------------------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--batch", "0"], "--batch: batch sizes must be >= 1, got 0", id="batch-zero"),
        pytest.param(["--batch", "4", "-2"], "--batch: batch sizes must be >= 1, got -2", id="batch-negative"),
        pytest.param(["--context", "15"], "--context 15: shorter than the 16-token sliding window", id="context"),
        pytest.param(["--mode", "csa", "swa"], "--mode: unknown mode 'swa'; choose from csa, hca", id="mode"),
        pytest.param(
            ["--mode", "hca", "--context", "100"],
            "--context 100: the HCA layer has no complete compressed row before 128 tokens",
            id="hca",
        ),
        pytest.param(["--experts", "5"], "--experts 5: expected 6..1022 routed experts", id="experts"),
        pytest.param(["--reps", "0"], "--reps: expected >= 1, got 0", id="reps"),
        pytest.param(["--ep", "0"], "--ep 0: expected a divisor of the 16 routed experts", id="ep-zero"),
        pytest.param(["--ep", "3"], "--ep 3: expected a divisor of the 16 routed experts", id="ep-divisor"),
        pytest.param(["--seed", str(2**63)], f"--seed: expected -2^53..2^53, got {2**63}", id="seed-overflow"),
        pytest.param(
            ["--mode", "hca", "--index-k", "mxfp4"],
            "--index-k mxfp4: the index-K cache is the CSA layer's; --mode hca runs no indexer",
            id="index-k-hca",
        ),
    ],
)
def test_argument_errors_exit_2(argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = cli.main(["layer-bench", "--tiny", "--cpu", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("wavemla layer-bench: error: ") and message in err, err
    assert not (tmp_path / "out").exists()  # nothing is written before the arguments are valid


@pytest.mark.parametrize("name", ["", "  "])
def test_an_out_directory_of_no_name_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """An empty --out is no directory (Path("") is the current one, where the run would write and clear its traces),
    and a blank one would be a directory named by spaces."""
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["layer-bench", "--tiny", "--cpu", "--out", name])
    err = capsys.readouterr().err
    assert rc == 2 and err == "wavemla layer-bench: error: --out: expected a directory name, got an empty one\n", err
    assert list(tmp_path.iterdir()) == []


def test_an_out_directory_that_cannot_be_made_names_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("")
    rc = cli.main(["layer-bench", "--tiny", "--cpu", "--out", str(taken / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"wavemla layer-bench: error: --out: {taken / 'out'}: "), err


def test_sizes_that_do_not_fit_in_memory_end_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A ``--batch`` or ``--context`` too large for the machine (an allocation fails, as torch's CPU allocator
    reports it) ends in one line naming the size options, exit 2, not a traceback."""

    def no_memory(cfg: object, log: object = print) -> None:
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 800000000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(layer_bench, "run_layer_bench", no_memory)
    rc = cli.main(["layer-bench", "--tiny", "--cpu", "--out", str(tmp_path / "out"), "--context", "100000000000"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    says = "wavemla layer-bench: error: --batch, --context, --experts: too large for this machine's memory"
    assert err.startswith(says), err


def test_index_k_format_outside_the_choices_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture, moe: MoE) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["layer-bench", "--tiny", "--cpu", "--out", str(tmp_path / "out"), "--index-k", "fp4"])
    assert exit_info.value.code == 2 and "--index-k" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^--index-k: unknown format 'fp4'; choose from fp8, mxfp4$"):
        make_config(tiny=True, device="cpu", index_k="fp4")
    with pytest.raises(ValueError, match="index_k: expected one of fp8, mxfp4, got 'fp4'"):
        DecoderLayer(TINY, "csa", 1024, 1, moe, device=DEVICE, dtype=DTYPE, index_k="fp4")
    assert make_config(tiny=True, device="cpu", modes=["csa", "hca"], index_k="mxfp4").index_k == "mxfp4"
    assert not (tmp_path / "out").exists()


def test_full_size_needs_a_gpu() -> None:
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        make_config(device="cpu")
    cfg = make_config(device="cuda")  # the GPU defaults, validated without a GPU
    assert cfg.batches == (1, 8, 16, 32, 48, 64, 80, 96, 128) and cfg.context == 65536
    assert cfg.dims.experts == 256 and cfg.dtype == torch.bfloat16 and cfg.modes == ("csa", "hca")
