"""Time one DeepSeek-V4-Flash decoder layer at real sizes (random weights), component by component.

For each batch size it also writes one profiler trace, which ``wavemla trace`` reads directly.

The layer is a CSA layer (lightning indexer + 512 selected compressed rows) or an HCA layer (every compressed row),
decoding one token per request at position ``context - 1``. Its components, each inside a
``torch.profiler.record_function`` range ``layer.<component>`` (→ the ``wavemla trace`` components its kernels
land in):

- ``qkv_proj``: attn RMSNorm, fused ``[wq_a; wkv]`` GEMM, q-LoRA norm, ``wq_b``, per-head RMS norm, kv norm,
  interleaved YaRN rope on the last 64 dims (→ dense_gemm, norm_elementwise);
- ``kv_write``: FP8 MODEL1 quantize of the new row in torch and its store into the window ring at slot
  ``p % 128`` (→ quantization, norm_elementwise; the scale's log2/ceil/exp2 → quantization only with
  ``OUT/layer_rules.json``);
- ``indexer`` (CSA only): ``idx_wq_b`` GEMM + rope, head weights, q quantized to e4m3 per head with its scale folded
  into the head weights (DeepSeek's way), wavemla's lightning indexer (FP8 queries, exact top-512) over
  ``context // 4`` index-K rows in the page-split layout: FP8 rows (132 bytes, vLLM's V3.2 cache) or, with
  ``--index-k mxfp4``, MXFP4 rows (68 bytes, SGLang's DeepSeek-V4 cache) (→ indexer, dense_gemm, quantization);
- ``sparse_mla``: ``wavemla.sparse_mla_decode`` over 128 window rows + 512 CSA rows or all ``context // 128`` HCA
  rows (→ attention);
- ``o_proj``: inverse rope, grouped ``wo_a`` (8 groups as one batched GEMM), ``wo_b``, residual (→ dense_gemm);
- ``moe``: ffn RMSNorm, router (sqrt-softplus scores, top-6 of 256 with a selection bias), routed + shared experts
  as one grouped GEMM pair, weighted combine, residual (→ moe, the router's top-k/softplus, the counting sort's
  cumsums and the SiLU only with ``OUT/layer_rules.json``; the router GEMM → dense_gemm).

MoE: token-expert pairs are sorted by expert with a counting sort (one-hot cumsum: no host sync, no sort kernel),
and each projection runs as ONE grouped GEMM over all experts with per-expert row offsets (``torch._grouped_mm``,
CUTLASS ``GroupProblemShape`` on sm_90/sm_100). Why not a per-pair weight gather + bmm: it copies the selected
expert's 50 MB of weights for every token-expert pair (38 GB at batch 128). Why not per-expert matmuls: their row
counts live on the GPU, so looping over them syncs the host and cannot be captured in a CUDA graph. The grouped
GEMM reads each touched expert once, as a serving MoE kernel does, and its kernel names classify as ``moe``. The
shared expert is expert number ``experts`` (every token routed to it with weight 1), as engines that fuse it into
the routed GEMM do.

For every batch size the layer runs once eagerly; then each component is captured in its own CUDA graph, and the
whole layer in one more; replays are timed after 50 ms of untimed ones, with the L2 flushed before each (median,
p20, p80; ``wavemla.tools.bench.WARM_MS``). A few whole-layer
replays are profiled into ``OUT/<mode>/layer_bs<b>.json.gz``. Results go to ``OUT/layer_bench.json`` (schema
``wavemla.layer_bench/1``) and ``OUT/layer_rules.json`` holds the classification rules for the ATen kernels that
only the MoE or only the KV write's FP8 quantizer launch here. Then::

    wavemla trace OUT/csa --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules OUT/layer_rules.json

``--tiny`` runs the same code at tiny sizes; without a GPU it runs on the CPU through Triton's interpreter (fp16,
eager, CPU profiler: timings and traces then exercise the code paths but measure nothing). See docs/layer-bench.md.

Example::

    wavemla layer-bench --out runs/layer --batch 1 8 16 32 48 64 80 96 128 --context 65536
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from wavemla.api import MLAMetadata, get_mla_metadata, sparse_mla_decode
from wavemla.cli import blank_file_name
from wavemla.reference.fp8 import BYTES_PER_TOKEN, D_QK, empty_model1, page_views, quantize_model1
from wavemla.reference.indexer import (
    FP8_ROW_BYTES,
    INDEX_DIM,
    INDEX_K_FORMATS,
    MXFP4_ROW_BYTES,
    quantize_index_k,
    quantize_index_q,
)
from wavemla.tools.bench import WARM_MS, spread_us
from wavemla.tools.revision import source_revision

SCHEMA = "wavemla.layer_bench/1"
RESULTS_FILE = "layer_bench.json"
RULES_FILE = "layer_rules.json"
# The sparse decode's split kernel runs exactly once per layer step: the robust step counter for `wavemla trace`. A
# regex: the Triton kernel or, on sm_90 with Gluon, the warp-specialized one.
STEP_KERNEL = "^_sparse_mla_decode(_ws)?_kernel$"
STEP_MARKER = "layer_step"
TRACE_GLOB = "layer_bs*.json.gz"  # the traces of one mode's directory, OUT/<mode>/layer_bs<b>.json.gz
ROPE = 64  # rope dims at the end of each 512-wide latent and of each 128-wide indexer head
MODES: dict[str, int] = {"csa": 4, "hca": 128}  # layer type -> compression ratio
COMPONENTS: tuple[str, ...] = ("qkv_proj", "kv_write", "indexer", "sparse_mla", "o_proj", "moe")
DEFAULT_BATCHES = (1, 8, 16, 32, 48, 64, 80, 96, 128)
TINY_BATCHES = (1, 2)
MAX_GROUPS = 1023  # torch._grouped_mm takes fewer than 1024 groups: routed experts + the shared one
# DecoderLayer seeds its generators with seed·1000 + ratio, which torch takes within 64 bits
SEED_MAX = 2**53
# --index-k: bytes of one index-K row of each format (both stored page-split, as the serving engines hold them)
INDEX_K_ROW_BYTES = {"fp8": FP8_ROW_BYTES, "mxfp4": MXFP4_ROW_BYTES}

# ATen kernels that, in this layer, only one component launches. The default rules cannot know that: they would
# file them under sampling (top-k) or norm_elementwise (ATen elementwise and scans), or leave them in "other" (the
# names of cub's scan kernels and of the jiterator's exp2 carry neither a component nor ``at::native::``). In
# another engine the same kernels serve sampling, MoE alignment or any quantizer, so they are not default rules.
# Names follow ATen's CUDA sources (TensorTopK.cu, ActivationSiluKernel.cu, ActivationSoftplusKernel.cu, the cumsum
# scans and their cub path, the jiterator's exp2); tests/tools/data/h200_layer_csa holds H200 traces with them all.
LAYER_RULES: tuple[dict[str, str], ...] = (
    {
        "name": "layer-bench-router-topk",
        "component": "moe",
        "pattern": r"gatherTopK|radixFindKthValues|computeBlockwiseWithinKCounts|computeBlockwiseKthCounts",
    },
    {"name": "layer-bench-router-softplus", "component": "moe", "pattern": r"softplus_kernel"},
    {"name": "layer-bench-expert-silu", "component": "moe", "pattern": r"silu_kernel"},
    # MoE.__call__'s counting sort: the one-hot cumsum over pairs (a 2-D scan, grows with the batch) and the
    # cumsum of the expert counts into grouped-GEMM offsets (1-D: cub's DeviceScan init + scan kernels)
    {
        "name": "layer-bench-moe-counting-sort",
        "component": "moe",
        "pattern": r"tensor_kernel_scan_(?:outer|innermost)_dim|DeviceScan(?:Init)?Kernel",
    },
    # quantize_model1's power-of-two scale 2^ceil(log2(amax / 448)) in kv_write
    {
        "name": "layer-bench-kv-fp8-scale",
        "component": "quantization",
        "pattern": r"log2_kernel_cuda|ceil_kernel_cuda|exp2_kernel",
    },
)


# ------------------------------------------------------------------------------------------------------ shapes


@dataclass(frozen=True)
class LayerDims:
    """Sizes of one decoder layer. The latent (512, rope 64) and the indexer head (128) are fixed by the kernels."""

    hidden: int = 4096
    heads: int = 64
    q_lora: int = 1024
    o_groups: int = 8
    o_lora: int = 1024
    index_heads: int = 64
    index_topk: int = 512
    window: int = 128
    swa_page: int = 64
    csa_page: int = 64  # shared by the compressed KV cache and the index-K cache (one block table)
    hca_page: int = 2
    experts: int = 256
    experts_per_token: int = 6
    moe_inter: int = 2048
    route_scale: float = 1.5
    rope_theta: float = 160000.0
    eps: float = 1e-6

    def page(self, mode: str) -> int:
        return self.csa_page if mode == "csa" else self.hca_page


FLASH = LayerDims()
# Interpreter-sized: 8 heads per output group as in Flash, indexer heads 16 (the smallest the kernel takes).
TINY = LayerDims(
    hidden=256,
    heads=16,
    q_lora=128,
    o_groups=2,
    o_lora=128,
    index_heads=16,
    index_topk=32,
    window=16,
    swa_page=8,
    experts=16,
    moe_inter=64,
)


@dataclass(frozen=True)
class BenchConfig:
    """Validated arguments of one run (see :func:`make_config`)."""

    dims: LayerDims
    modes: tuple[str, ...]
    batches: tuple[int, ...]
    context: int
    reps: int
    profile_steps: int
    out: Path
    tiny: bool
    device: str  # "cuda" or "cpu" (Triton interpreter)
    seed: int = 0
    ep: int = 1  # expert-parallel GPUs: time one of them (see MoE)
    index_k: str = "fp8"  # the CSA indexer's index-K rows: "fp8" or "mxfp4" (INDEX_K_ROW_BYTES)

    @property
    def dtype(self) -> torch.dtype:
        # fp16 on the CPU: the interpreter multiplies raw bf16 bits in tl.dot (triton issue 11584)
        return torch.bfloat16 if self.device == "cuda" else torch.float16


def n_comp(context: int, mode: str) -> int:
    """Complete compressed rows seen by the token at position ``context - 1``: ``context // ratio``."""
    return context // MODES[mode]


def make_config(
    *,
    modes: Sequence[str] | None = None,
    batches: Sequence[int] | None = None,
    context: int | None = None,
    experts: int | None = None,
    ep: int | None = None,
    reps: int | None = None,
    profile_steps: int | None = None,
    out: str | Path = "layer_bench",
    tiny: bool = False,
    device: str = "cuda",
    seed: int = 0,
    index_k: str = "fp8",
) -> BenchConfig:
    """Check and complete the arguments; raises ValueError with a message naming the option."""
    blank = blank_file_name("--out", str(out), "directory")  # "" would write into the current directory
    if blank is not None:
        raise ValueError(blank)
    dims = TINY if tiny else FLASH
    mode_list = list(modes) if modes else list(MODES)
    for m in mode_list:
        if m not in MODES:
            raise ValueError(f"--mode: unknown mode {m!r}; choose from {', '.join(MODES)}")
    batch_list = list(batches) if batches else list(TINY_BATCHES if tiny else DEFAULT_BATCHES)
    bad = [b for b in batch_list if b < 1]
    if bad:
        raise ValueError(f"--batch: batch sizes must be >= 1, got {bad[0]}")
    ctx = context if context is not None else (64 * dims.window if tiny else 65536)
    if ctx < dims.window:
        raise ValueError(
            f"--context {ctx}: shorter than the {dims.window}-token sliding window; "
            f"decode at a context of at least {dims.window} tokens"
        )
    if index_k not in INDEX_K_FORMATS:
        raise ValueError(f"--index-k: unknown format {index_k!r}; choose from {', '.join(INDEX_K_FORMATS)}")
    if index_k != "fp8" and "csa" not in mode_list:
        raise ValueError(
            f"--index-k {index_k}: the index-K cache is the CSA layer's; --mode {' '.join(mode_list)} runs no indexer"
        )
    for m in mode_list:
        if n_comp(ctx, m) < 1:
            raise ValueError(
                f"--context {ctx}: the {m.upper()} layer has no complete compressed row before {MODES[m]} tokens"
            )
    n_exp = experts if experts is not None else dims.experts
    if not dims.experts_per_token <= n_exp <= MAX_GROUPS - 1:
        raise ValueError(
            f"--experts {n_exp}: expected {dims.experts_per_token}..{MAX_GROUPS - 1} routed experts "
            f"(top-{dims.experts_per_token} routing; the grouped GEMM takes < 1024 groups with the shared expert)"
        )
    n_ep = ep if ep is not None else 1
    if n_ep < 1 or n_exp % n_ep:
        raise ValueError(f"--ep {n_ep}: expected a divisor of the {n_exp} routed experts (each GPU holds as many)")
    n_reps = reps if reps is not None else (1 if device == "cpu" else 20)
    n_prof = profile_steps if profile_steps is not None else (1 if device == "cpu" else 5)
    if n_reps < 1:
        raise ValueError(f"--reps: expected >= 1, got {n_reps}")
    if n_prof < 1:
        raise ValueError(f"--profile-steps: expected >= 1, got {n_prof}")
    if abs(seed) > SEED_MAX:
        raise ValueError(f"--seed: expected -2^53..2^53, got {seed}")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device: expected 'cuda' or 'cpu', got {device!r}")
    if device == "cpu" and not tiny:
        raise ValueError("the full-size layer needs a CUDA GPU (about 15 GB); use --tiny for the CPU interpreter run")
    return BenchConfig(
        dims=dataclasses.replace(dims, experts=n_exp),
        modes=tuple(dict.fromkeys(mode_list)),
        batches=tuple(sorted(set(batch_list))),
        context=ctx,
        reps=n_reps,
        profile_steps=n_prof,
        out=Path(out),
        tiny=tiny,
        device=device,
        seed=seed,
        ep=n_ep,
        index_k=index_k,
    )


# ------------------------------------------------------------------------------------------------- math helpers


def yarn_freqs(dims: LayerDims, factor: float = 16.0, orig: int = 65536, beta_fast: float = 32.0) -> torch.Tensor:
    """Rope frequencies of CSA/HCA layers, fp64 ``[32]``: YaRN-ramped between ``f`` and ``f / factor``.

    ``f_j = theta^(-2j/64)``; the ramp is 0 below the correction dim of ``beta_fast`` rotations and 1 above that
    of one rotation over ``orig`` tokens (dsv4-attention.md §2; no mscale on cos/sin).
    """
    j = torch.arange(ROPE // 2, dtype=torch.float64)
    f = dims.rope_theta ** (-2.0 * j / ROPE)

    def corr_dim(rotations: float) -> float:
        return ROPE * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(dims.rope_theta))

    lo = max(math.floor(corr_dim(beta_fast)), 0)
    hi = min(math.ceil(corr_dim(1.0)), ROPE - 1)
    ramp = ((j - lo) / max(hi - lo, 1e-3)).clamp(0.0, 1.0)
    return f * (1.0 - ramp) + (f / factor) * ramp


def rope_tail(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Interleaved (GPT-J) rope on the last 64 dims of ``x [..., d]``; ``cos``/``sin`` broadcast to ``[..., 32]``.

    Pair j = dims ``(d-64+2j, d-63+2j)``. Pass ``-sin`` for the inverse rotation. Returns x's dtype.
    """
    head, tail = x[..., :-ROPE], x[..., -ROPE:]
    pairs = tail.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    rot = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    return torch.cat((head, rot.to(x.dtype)), dim=-1)


def _rms(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _normal(shape: Sequence[int], std: float, gen: torch.Generator, device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=device).normal_(0.0, std, generator=gen)


def _random_model1(nb: int, page: int, gen: torch.Generator, device: str, chunk: int = 256) -> torch.Tensor:
    """A MODEL1 cache ``[nb, page, 1, 584]`` of quantized N(0, 1) rows, built a chunk of pages at a time."""
    cache = empty_model1(nb, page, device)
    stride = cache.stride(0)
    pages = torch.as_strided(cache, (nb, stride), (stride, 1))
    for s in range(0, nb, chunk):
        e = min(nb, s + chunk)
        part = quantize_model1(torch.randn((e - s, page, 1, D_QK), generator=gen, device=device))
        pages[s:e].copy_(torch.as_strided(part, (e - s, stride), (stride, 1)))
    return cache


def _block_table(batch: int, blocks: int, gen: torch.Generator, device: str) -> torch.Tensor:
    """``[batch, blocks]`` int32: each request owns ``blocks`` pages, in a shuffled order as a paged allocator."""
    return torch.randperm(batch * blocks, generator=gen).view(batch, blocks).to(torch.int32).to(device)


def _slots(table: torch.Tensor, rows: torch.Tensor, page: int) -> torch.Tensor:
    """Global slots ``table[r, i // page] * page + i % page`` of row numbers ``rows`` for every request r."""
    return table.long()[:, rows // page] * page + rows % page


# ---------------------------------------------------------------------------------------------------------- MoE


class MoE:
    """Router + routed experts + the shared expert, shared by the CSA and HCA layers of one run.

    Weights: ``gate [E, hidden]``, ``bias [E]`` fp32 (selection only), ``w13 [L+1, 2·inter, hidden]`` (gate and up
    projections), ``w2 [L+1, hidden, inter]``; expert ``L`` is the shared expert. With ``ep`` = 1 every routed expert
    is here (``L = E``; at Flash sizes with E = 256 the expert weights are 12.9 GB in bf16).

    ``ep`` > 1 times one GPU of ``ep`` expert-parallel ones (data-parallel attention: every GPU runs attention for its
    own requests): it holds routed experts ``0 .. L-1`` (``L = E / ep``) and the shared expert, and its experts serve
    the token-expert pairs routed to them from all ``ep`` GPUs' tokens. The other GPUs' tokens stand in as
    ``(ep - 1)·T`` fixed random hidden states (as the dispatch delivers them: normed) with uniform random top-k
    routing, drawn once; the all-to-all dispatch and combine themselves are not run. Pairs routed to other GPUs'
    experts are not computed here, so the layer output holds only this GPU's share of each token's MoE.
    """

    def __init__(
        self, dims: LayerDims, device: str, dtype: torch.dtype, gen: torch.Generator, *, ep: int = 1,
        max_tokens: int = 0,
    ) -> None:  # fmt: skip
        if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or dims.experts % ep:
            raise ValueError(f"ep: expected a divisor of the {dims.experts} routed experts, got {ep!r}")
        if ep > 1 and max_tokens < 1:
            raise ValueError(f"max_tokens: expected >= 1 with ep = {ep} (the largest batch), got {max_tokens}")
        self.dims, self.ep = dims, ep
        e, h, i = dims.experts, dims.hidden, dims.moe_inter
        self.local = e // ep
        self.ffn_norm = 1.0 + _normal((h,), 0.1, gen, device, dtype)
        self.gate = _normal((e, h), h**-0.5, gen, device, dtype)
        self.bias = _normal((e,), 0.1, gen, device, torch.float32)
        self.w13 = torch.empty((self.local + 1, 2 * i, h), dtype=dtype, device=device)
        self.w2 = torch.empty((self.local + 1, h, i), dtype=dtype, device=device)
        for k in range(self.local + 1):  # one expert at a time keeps the generator's temporaries small
            self.w13[k].normal_(0.0, h**-0.5, generator=gen)
            self.w2[k].normal_(0.0, i**-0.5, generator=gen)
        # GEMM group of each expert id 0..E (E: the shared expert): the local experts keep their number, the shared
        # expert is group L, and experts held by other GPUs go to group L+1, which the grouped GEMMs leave out.
        group = torch.full((e + 1,), self.local + 1, dtype=torch.long, device=device)
        group[: self.local] = torch.arange(self.local, device=device)
        group[e] = self.local
        self.group_of = group
        self.slot_ids = torch.arange(self.local + 2 if ep > 1 else self.local + 1, device=device)
        n_remote = (ep - 1) * max_tokens if ep > 1 else 0
        self.remote_x = _normal((n_remote, h), 1.0, gen, device, dtype)
        self.remote_sel = (
            torch.rand((n_remote, e), generator=gen, device=device).topk(dims.experts_per_token, dim=-1).indices
        )
        # the other GPUs' pairs that reach this GPU (a local expert), in token order, and how many of them the first
        # n tokens give (a host list: the pair count of a batch is a static shape, as a capturable dispatch needs)
        here = self.remote_sel < self.local
        tok, slot = here.nonzero(as_tuple=True)
        self.remote_pair_token, self.remote_pair_group = tok, self.remote_sel[tok, slot]
        self.remote_pairs_upto = [0, *here.sum(1).cumsum(0).tolist()]

    def route(self, hn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(experts [T, k] int64, weights [T, k] fp32)``: top-k of sqrt(softplus(logits)) + bias; weights are the
        unbiased scores renormalised over the k and times ``route_scale``."""
        scores = torch.sqrt(F.softplus((hn @ self.gate.T).float()))
        sel = torch.topk(scores + self.bias, self.dims.experts_per_token, dim=-1, sorted=False).indices
        w = scores.gather(1, sel)
        return sel, w / w.sum(-1, keepdim=True) * self.dims.route_scale

    def _remote(self, t: int) -> int:
        """Tokens of the other GPUs at a batch of ``t`` tokens here."""
        n = (self.ep - 1) * t
        if n > self.remote_x.shape[0]:
            raise ValueError(f"h: {t} tokens, more than the {self.remote_x.shape[0] // (self.ep - 1)} built for")
        return n

    def experts_read(self, sel: torch.Tensor) -> int:
        """Expert weight sets a step reads here when this GPU's tokens chose ``sel [T, k]``: the distinct local
        experts among its own and (``ep`` > 1) the other GPUs' pairs, and the shared expert."""
        chosen = torch.cat((sel.reshape(-1), self.remote_sel[: self._remote(sel.shape[0])].reshape(-1)))
        return int(torch.unique(chosen[chosen < self.local]).numel()) + 1

    def __call__(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``h [T, hidden]`` -> ``(h + moe(rms(h)) [T, hidden], routed experts [T, k])`` (``ep`` > 1: this GPU's
        share of the MoE)."""
        d = self.dims
        t, k, inter = h.shape[0], d.experts_per_token + 1, d.moe_inter
        hn = _rms(h, self.ffn_norm, d.eps)
        sel, w = self.route(hn)
        shared = torch.full((t, 1), d.experts, dtype=sel.dtype, device=h.device)
        pair_expert = torch.cat((sel, shared), 1).reshape(-1)  # pair p = (token p // k, slot p % k)
        own_group = pair_expert if self.ep == 1 else self.group_of[pair_expert]
        pair_w = torch.cat((w, torch.ones((t, 1), dtype=w.dtype, device=h.device)), 1)
        pair_ids = torch.arange(t * k, device=h.device)
        pair_token = torch.div(pair_ids, k, rounding_mode="floor")
        x_in, pair_group = hn, own_group
        if self.ep > 1:  # then the other GPUs' tokens (rows t.. of x_in) and their pairs routed here
            n_r = self._remote(t)
            m = self.remote_pairs_upto[n_r]
            x_in = torch.cat((hn, self.remote_x[:n_r]))
            pair_group = torch.cat((own_group, self.remote_pair_group[:m]))
            pair_token = torch.cat((pair_token, t + self.remote_pair_token[:m]))
        # counting sort of pairs by group: rank inside its group + where the group's rows start
        hits = (pair_group[:, None] == self.slot_ids[None, :]).to(torch.int32).cumsum(0, dtype=torch.int32)
        counts = hits[-1]
        offs = counts.cumsum(0, dtype=torch.int32)  # end row of each group: the grouped GEMM's offsets
        rank = hits.gather(1, pair_group[:, None])[:, 0] - 1
        dest = ((offs - counts).gather(0, pair_group) + rank).long()  # sorted row of each pair
        token = torch.empty_like(pair_token).scatter_(0, dest, pair_token)
        xs = x_in[token]  # [P, hidden], rows grouped by expert
        offs = offs[: self.local + 1]  # the rows of own pairs sent to other GPUs (the last group) are not computed
        g = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)  # [P, 2·inter]
        # V4 clamps gate <= 10 and up to +-10 first (config.json swiglu_limit); it is left out: values stay near
        # N(0, 1) here, and engines fuse it into this activation (docs/layer-bench.md, "What is not modelled")
        act = F.silu(g[:, :inter]) * g[:, inter:]
        y = torch._grouped_mm(act, self.w2.transpose(1, 2), offs=offs)  # [P, hidden]
        y_own = y[dest[: t * k]].view(t, k, -1).float()
        if self.ep > 1:  # uncomputed rows hold whatever the GEMM left there: select, not multiply
            y_own = torch.where((own_group <= self.local).view(t, k, 1), y_own, 0.0)
        out = (y_own * pair_w[..., None]).sum(1)
        return h + out.to(h.dtype), sel


# -------------------------------------------------------------------------------------------------------- layer


@dataclass
class StepInputs:
    """Everything one decode step at batch ``b`` reads besides weights and caches (slices of the max batch)."""

    b: int
    x: torch.Tensor  # [b, hidden] layer input (hidden state)
    pos: torch.Tensor  # [b] int64 position being decoded
    win_idx: torch.Tensor  # [b, 1, window] int32 window slots
    win_len: torch.Tensor  # [b] int32
    write_blk: torch.Tensor  # [b] int64 page of the new row's ring slot
    write_off: torch.Tensor  # [b] int64 offset in that page
    block_table: torch.Tensor  # [b, blocks] int32 of the compressed (and index-K) caches
    n_comp: torch.Tensor  # [b] int32 visible compressed rows
    comp_idx: torch.Tensor | None  # HCA: [b, 1, n_comp] int32 every compressed row
    comp_len: torch.Tensor | None  # HCA: [b] int32
    meta: MLAMetadata


@dataclass
class Activations:
    """Intermediates of one eager step; the inputs of the per-component graphs and of the correctness test."""

    xn: torch.Tensor  # [b, hidden] attn-normed input
    qr: torch.Tensor  # [b, q_lora] q latent (shared with the indexer)
    q: torch.Tensor  # [b, heads, 512]
    kv: torch.Tensor  # [b, 512] the new row (normed, roped)
    comp_idx: torch.Tensor  # [b, 1, k] int32 compressed slots attended
    comp_len: torch.Tensor  # [b] int32
    o: torch.Tensor  # [b, heads, 512] sparse decode output
    attn_out: torch.Tensor  # [b, hidden] attention block output (before the residual)
    h: torch.Tensor  # [b, hidden] x + attn_out
    out: torch.Tensor  # [b, hidden] layer output
    experts: torch.Tensor  # [b, k] routed experts


class DecoderLayer:
    """One CSA or HCA decoder layer with random weights, caches for ``max_batch`` requests at ``context`` tokens.

    Every request decodes position ``p = context - 1``: the window holds ``min(context, window)`` rows and the
    compressed cache ``context // ratio`` rows per request. Caches hold N(0, 1) rows (quantized), which stand in
    for earlier tokens; the step writes row ``p`` into the window ring. A CSA layer's index-K cache holds
    ``index_k`` rows (``"fp8"`` or ``"mxfp4"``) in the page-split layout, ``[blocks, page, INDEX_K_ROW_BYTES]``.
    """

    def __init__(
        self,
        dims: LayerDims,
        mode: str,
        context: int,
        max_batch: int,
        moe: MoE,
        *,
        device: str,
        dtype: torch.dtype,
        seed: int = 0,
        index_k: str = "fp8",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        if index_k not in INDEX_K_FORMATS:
            raise ValueError(f"index_k: expected one of {', '.join(INDEX_K_FORMATS)}, got {index_k!r}")
        self.dims, self.mode, self.context, self.max_batch = dims, mode, context, max_batch
        self.index_k = index_k
        self.device, self.dtype, self.moe = device, dtype, moe
        gen = torch.Generator(device=device).manual_seed(seed * 1000 + MODES[mode])
        cpu_gen = torch.Generator().manual_seed(seed * 1000 + MODES[mode])
        d = dims
        h, hd = d.hidden, d.heads * D_QK

        def w(shape: Sequence[int], fan_in: int) -> torch.Tensor:
            return _normal(shape, fan_in**-0.5, gen, device, dtype)

        self.attn_norm = 1.0 + _normal((h,), 0.1, gen, device, dtype)
        self.w_qkv_a = w((d.q_lora + D_QK, h), h)  # [wq_a; wkv], one GEMM as engines fuse them
        self.q_norm = 1.0 + _normal((d.q_lora,), 0.1, gen, device, dtype)
        self.kv_norm = 1.0 + _normal((D_QK,), 0.1, gen, device, dtype)
        self.wq_b = w((hd, d.q_lora), d.q_lora)
        self.sink = torch.randn((d.heads,), generator=gen, device=device)
        self.wo_a = w((d.o_groups, d.o_lora, hd // d.o_groups), hd // d.o_groups)
        self.wo_b = w((h, d.o_groups * d.o_lora), d.o_groups * d.o_lora)
        if mode == "csa":
            self.idx_wq_b = w((d.index_heads * INDEX_DIM, d.q_lora), d.q_lora)
            self.idx_wproj = w((d.index_heads, h), h)
        ang = torch.arange(context, dtype=torch.float64)[:, None] * yarn_freqs(d)[None, :]
        self.cos = torch.cos(ang).float().to(device)  # [context, 32]
        self.sin = torch.sin(ang).float().to(device)

        # window ring: slot of token t is ring position t % window
        p = context - 1
        self.n_win = min(context, d.window)
        swa_blocks = -(-d.window // d.swa_page)
        self.swa_table = _block_table(max_batch, swa_blocks, cpu_gen, device)
        self.swa_cache = _random_model1(max_batch * swa_blocks, d.swa_page, gen, device)
        self.swa_data, self.swa_scales = page_views(self.swa_cache)
        ring = torch.arange(p - self.n_win + 1, p + 1, device=device) % d.window
        self.win_idx = _slots(self.swa_table, ring, d.swa_page).to(torch.int32).view(max_batch, 1, self.n_win)
        self.win_len = torch.full((max_batch,), self.n_win, dtype=torch.int32, device=device)
        self.write_blk = self.swa_table.long()[:, (p % d.window) // d.swa_page]
        self.write_off = torch.full((max_batch,), (p % d.window) % d.swa_page, dtype=torch.long, device=device)

        # compressed rows (and, for CSA, the index-K rows under the same block table)
        self.n_comp = n_comp(context, mode)
        page = d.page(mode)
        blocks = -(-self.n_comp // page)
        self.comp_table = _block_table(max_batch, blocks, cpu_gen, device)
        self.comp_cache = _random_model1(max_batch * blocks, page, gen, device)
        self.n_comp_t = torch.full((max_batch,), self.n_comp, dtype=torch.int32, device=device)
        self.comp_idx: torch.Tensor | None = None
        self.comp_len: torch.Tensor | None = None
        if mode == "csa":
            nb = max_batch * blocks
            width = INDEX_K_ROW_BYTES[index_k]
            self.idx_cache = torch.empty((nb, page, width), dtype=torch.uint8, device=device)
            for s in range(0, nb, 1024):
                e = min(nb, s + 1024)
                rows = torch.randn((e - s, page, INDEX_DIM), generator=gen, device=device)
                self.idx_cache[s:e] = quantize_index_k(rows, layout="paged", fmt=index_k)
            self.n_sel = min(d.index_topk, self.n_comp)
        else:
            rows_all = torch.arange(self.n_comp, device=device)
            slots = _slots(self.comp_table, rows_all, page).to(torch.int32)
            self.comp_idx = slots.view(max_batch, 1, self.n_comp)
            self.comp_len = torch.full((max_batch,), self.n_comp, dtype=torch.int32, device=device)
            self.n_sel = self.n_comp
        self.x = _normal((max_batch, h), 1.0, gen, device, dtype)
        self.pos = torch.full((max_batch,), p, dtype=torch.long, device=device)

    @property
    def components(self) -> tuple[str, ...]:
        return COMPONENTS if self.mode == "csa" else tuple(c for c in COMPONENTS if c != "indexer")

    def inputs(self, b: int) -> StepInputs:
        """The step inputs of the first ``b`` requests, with a fresh sparse-decode metadata object."""
        if not 1 <= b <= self.max_batch:
            raise ValueError(f"batch {b}: expected 1..{self.max_batch} (the layer was built for {self.max_batch})")
        meta, _ = get_mla_metadata()
        return StepInputs(
            b=b,
            x=self.x[:b],
            pos=self.pos[:b],
            win_idx=self.win_idx[:b],
            win_len=self.win_len[:b],
            write_blk=self.write_blk[:b],
            write_off=self.write_off[:b],
            block_table=self.comp_table[:b],
            n_comp=self.n_comp_t[:b],
            comp_idx=None if self.comp_idx is None else self.comp_idx[:b],
            comp_len=None if self.comp_len is None else self.comp_len[:b],
            meta=meta,
        )

    # components ------------------------------------------------------------------------------------------------

    def qkv_proj(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x [T, hidden]`` -> ``(q [T, H, 512], kv [T, 512], qr [T, q_lora], xn [T, hidden])``."""
        d = self.dims
        t = x.shape[0]
        cos, sin = self.cos[pos], self.sin[pos]
        xn = _rms(x, self.attn_norm, d.eps)
        qkv = xn @ self.w_qkv_a.T
        qr = _rms(qkv[:, : d.q_lora], self.q_norm, d.eps)
        q = _rms((qr @ self.wq_b.T).view(t, d.heads, D_QK), None, d.eps)  # per-head RMS, no weight
        q = rope_tail(q, cos[:, None], sin[:, None])
        kv = rope_tail(_rms(qkv[:, d.q_lora :], self.kv_norm, d.eps), cos, sin)
        return q, kv, qr, xn

    def kv_write(self, kv: torch.Tensor, inp: StepInputs) -> None:
        """Quantize the new rows ``kv [T, 512]`` to MODEL1 and store them at their window ring slots."""
        new_data, new_scales = page_views(quantize_model1(kv.view(-1, 1, 1, D_QK)))  # page size 1
        self.swa_data[inp.write_blk, inp.write_off] = new_data[:, 0]
        self.swa_scales[inp.write_blk, inp.write_off] = new_scales[:, 0]

    def indexer(self, xn: torch.Tensor, qr: torch.Tensor, inp: StepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """CSA: ``(comp_idx [T, 1, topk] int32 global slots, comp_len [T] int32)`` from the lightning indexer."""
        from wavemla.indexer_glue import sparse_decode_extra_args
        from wavemla.kernels.indexer import lightning_indexer

        d = self.dims
        t = xn.shape[0]
        cos, sin = self.cos[inp.pos], self.sin[inp.pos]
        iq = rope_tail((qr @ self.idx_wq_b.T).view(t, d.index_heads, INDEX_DIM), cos[:, None], sin[:, None])
        # no Hadamard rotation: it is orthonormal and the cache keys are unrotated, so scores are unchanged
        hw = (xn @ self.idx_wproj.T).float() * (INDEX_DIM**-0.5 * d.index_heads**-0.5)
        # DeepSeek's indexer: q quantized to e4m3 per head, its scale folded into the head weights (FP8 x FP8 dot)
        iq8, hw8 = quantize_index_q(iq, hw)
        idx, length = lightning_indexer(
            iq8.view(t, 1, d.index_heads, INDEX_DIM),
            hw8.view(t, 1, d.index_heads),
            self.idx_cache,
            inp.block_table,
            inp.n_comp,
            d.index_topk,
            max_n_comp=self.n_comp,
            index_k_layout="paged",
        )
        extra = sparse_decode_extra_args(idx, length, extra_k_cache=self.comp_cache, index_page_size=d.csa_page)
        return extra["extra_indices_in_kvcache"], extra["extra_topk_length"]

    def sparse_mla(
        self, q: torch.Tensor, comp_idx: torch.Tensor, comp_len: torch.Tensor, inp: StepInputs
    ) -> torch.Tensor:
        """``q [T, H, 512]`` over the window + compressed rows -> ``o [T, H, 512]`` (sink applied)."""
        t = q.shape[0]
        out, _ = sparse_mla_decode(
            q.view(t, 1, self.dims.heads, D_QK),
            self.swa_cache,
            inp.win_idx,
            topk_length=inp.win_len,
            extra_kv_cache=self.comp_cache,
            extra_indices=comp_idx,
            extra_topk_length=comp_len,
            attn_sink=self.sink,
            metadata=inp.meta,
        )
        return out.view(t, self.dims.heads, D_QK)

    def o_proj(self, o: torch.Tensor, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inverse rope, grouped ``wo_a`` (one batched GEMM over the groups), ``wo_b``; ``(x + attn, attn)``."""
        d = self.dims
        t = o.shape[0]
        o = rope_tail(o, self.cos[pos][:, None], -self.sin[pos][:, None])
        og = o.reshape(t, d.o_groups, -1).transpose(0, 1)  # [G, T, heads_per_group·512]
        y = torch.bmm(og, self.wo_a.transpose(1, 2))  # [G, T, o_lora]
        attn = y.transpose(0, 1).reshape(t, d.o_groups * d.o_lora) @ self.wo_b.T
        return x + attn, attn

    # the step ----------------------------------------------------------------------------------------------------

    def forward(self, inp: StepInputs) -> Activations:
        """One decode step, each component inside ``record_function("layer.<component>")``."""
        with record_function("layer.qkv_proj"):
            q, kv, qr, xn = self.qkv_proj(inp.x, inp.pos)
        with record_function("layer.kv_write"):
            self.kv_write(kv, inp)
        if self.mode == "csa":
            with record_function("layer.indexer"):
                comp_idx, comp_len = self.indexer(xn, qr, inp)
        else:
            assert inp.comp_idx is not None and inp.comp_len is not None
            comp_idx, comp_len = inp.comp_idx, inp.comp_len
        with record_function("layer.sparse_mla"):
            o = self.sparse_mla(q, comp_idx, comp_len, inp)
        with record_function("layer.o_proj"):
            h, attn = self.o_proj(o, inp.x, inp.pos)
        with record_function("layer.moe"):
            out, experts = self.moe(h)
        return Activations(
            xn=xn, qr=qr, q=q, kv=kv, comp_idx=comp_idx, comp_len=comp_len, o=o, attn_out=attn, h=h, out=out,
            experts=experts,
        )  # fmt: skip

    def component_calls(self, inp: StepInputs, acts: Activations) -> dict[str, Callable[[], object]]:
        """Each component alone, fed by ``acts`` of an eager step (what its CUDA graph captures)."""
        calls: dict[str, Callable[[], object]] = {
            "qkv_proj": lambda: self.qkv_proj(inp.x, inp.pos),
            "kv_write": lambda: self.kv_write(acts.kv, inp),
            "indexer": lambda: self.indexer(acts.xn, acts.qr, inp),
            "sparse_mla": lambda: self.sparse_mla(acts.q, acts.comp_idx, acts.comp_len, inp),
            "o_proj": lambda: self.o_proj(acts.o, inp.x, inp.pos),
            "moe": lambda: self.moe(acts.h),
        }
        return {name: calls[name] for name in self.components}

    def model_bytes(self, b: int, acts: Activations) -> dict[str, float]:
        """Bytes each component must move at batch ``b``: weights once, KV rows once, activations ignored."""
        d = self.dims
        el = torch.finfo(self.dtype).bits // 8
        expert = 3 * d.hidden * d.moe_inter * el
        touched = self.moe.experts_read(acts.experts)  # the shared expert included
        out = {
            "qkv_proj": float((self.w_qkv_a.numel() + self.wq_b.numel()) * el),
            "kv_write": float(b * BYTES_PER_TOKEN),
            "sparse_mla": float(b * (self.n_win + self.n_sel) * BYTES_PER_TOKEN),
            "o_proj": float((self.wo_a.numel() + self.wo_b.numel()) * el),
            "moe": float(self.moe.gate.numel() * el + touched * expert),
        }
        if self.mode == "csa":
            weights = (self.idx_wq_b.numel() + self.idx_wproj.numel()) * el
            out["indexer"] = float(weights + b * self.n_comp * INDEX_K_ROW_BYTES[self.index_k])
        return {c: out[c] for c in self.components}


# ------------------------------------------------------------------------------------------------------- timing


def _capture(fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """``fn`` in a CUDA graph, after two warm-up calls on a side stream (allocator, cuBLAS workspaces)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def _cpu_timings_us(fn: Callable[[], object], reps: int) -> tuple[float, float, float]:
    """(p20, median, p80) µs of eager calls by the wall clock (CPU lane: exercises the path, measures nothing)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return spread_us(times)


def _timing(p20: float, med: float, p80: float) -> dict[str, float]:
    return {"median_us": med, "p20_us": p20, "p80_us": p80}


def profile_steps(
    step: Callable[[], object], steps: int, path: Path, cuda: bool, with_stack: bool = False
) -> list[float]:
    """Profile ``steps`` calls of ``step`` (each in a ``layer_step`` range) into a gzipped Chrome trace; with
    ``with_stack`` the trace also holds the Python frames (``nn.Module: ...`` ranges, for ``wavemla trace --scope``).

    On CUDA, CUDA events around each call give its own µs, returned in order: the steps run back to back (no L2
    flush, which would put a kernel of its own between them), so these — not the flushed timings — are what a
    trace's per-step time should match. One more call runs first under the profiler's warm-up (traced, not kept):
    the profiler's first recorded step is slow (on the H200 at b=1: 1649 µs against 579-687 µs for the next two).
    Returns ``[]`` on CPU.
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    plan = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=activities, schedule=plan, with_stack=with_stack) as prof:
        for i in range(steps + 1):
            timed = cuda and i > 0
            if timed:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            with record_function(STEP_MARKER):
                step()
            if timed:
                end.record()
                events.append((start, end))
            if cuda and i in (0, steps):
                # the warm-up's kernels end before the recorded window opens (else the trace keeps those that run
                # after it: one step too many)
                torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(str(path))
    return [start.elapsed_time(end) * 1e3 for start, end in events]


def bench_batch(layer: DecoderLayer, b: int, cfg: BenchConfig, trace_path: Path) -> dict[str, Any]:
    """Time every component and the whole layer at batch ``b``; write the profiler trace; return the record."""
    cuda = cfg.device == "cuda"
    inp = layer.inputs(b)
    acts = layer.forward(inp)  # compiles the Triton kernels, plans the sparse decode
    calls = layer.component_calls(inp, acts)
    times: dict[str, dict[str, float]] = {}
    graphs: list[torch.cuda.CUDAGraph] = []
    if cuda:
        from wavemla.tools.bench import timings_us

        torch.cuda.synchronize()
        for name, fn in calls.items():
            graph = _capture(fn)
            graphs.append(graph)
            times[name] = _timing(*timings_us(graph.replay, reps=cfg.reps, flush=True, graph=False))
        layer_graph = _capture(lambda: layer.forward(inp))
        graphs.append(layer_graph)
        whole = _timing(*timings_us(layer_graph.replay, reps=cfg.reps, flush=True, graph=False))
        traced = profile_steps(layer_graph.replay, cfg.profile_steps, trace_path, cuda=True)
    else:
        for name, fn in calls.items():
            times[name] = _timing(*_cpu_timings_us(fn, cfg.reps))
        whole = _timing(*_cpu_timings_us(lambda: layer.forward(inp), cfg.reps))
        traced = profile_steps(lambda: layer.forward(inp), cfg.profile_steps, trace_path, cuda=False)
    nbytes = layer.model_bytes(b, acts)
    for name, rec in times.items():
        rec["bytes"] = nbytes[name]
        rec["gbps"] = nbytes[name] / rec["median_us"] / 1e3
    record = {
        "batch": b,
        "components": times,
        "layer": whole,
        "component_sum_us": sum(r["median_us"] for r in times.values()),
        "distinct_routed_experts": int(torch.unique(acts.experts).numel()),
        "experts_read": layer.moe.experts_read(acts.experts),
        "trace": f"{layer.mode}/{trace_path.name}",
    }
    if traced:  # CUDA: the traced steps' own times, back to back (the trace's per-step time should match them)
        record["layer_traced"] = {"median_us": statistics.median(traced), "steps_us": traced}
    del graphs
    return record


# -------------------------------------------------------------------------------------------------------- driver


def _environment(cfg: BenchConfig) -> dict[str, Any]:
    import triton

    sha = source_revision()
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "git_sha": sha,
        "device": cfg.device,
        "triton_interpreter": bool(triton.knobs.runtime.interpret),
        "gpu": None,
        "arch": None,
    }
    if cfg.device == "cuda":
        from wavemla.device import DeviceSpec

        spec = DeviceSpec.from_torch()
        env["gpu"], env["arch"] = spec.display_name, spec.arch
    return env


def trace_command(out: Path, mode: str) -> str:
    """The ``wavemla trace`` call for one mode's traces."""
    return shlex.join(
        ["wavemla", "trace", str(out / mode), "--step-kernel", STEP_KERNEL, "--rules", str(out / RULES_FILE)]
    )


def write_rules(out: Path) -> Path:
    """``OUT/layer_rules.json``: this layer's single-component ATen kernels (:data:`LAYER_RULES`), for
    ``wavemla trace --rules``."""
    path = out / RULES_FILE
    path.write_text(json.dumps({"rules": list(LAYER_RULES)}, indent=1) + "\n")
    return path


def _format_record(mode: str, rec: dict[str, Any]) -> str:
    parts = " ".join(f"{k}={v['median_us']:.1f}" for k, v in rec["components"].items())
    return (
        f"{mode} b={rec['batch']:<4d} layer {rec['layer']['median_us']:9.1f} us | {parts} | "
        f"sum {rec['component_sum_us']:.1f} | experts {rec['distinct_routed_experts']} routed, "
        f"{rec['experts_read']} read here | {rec['trace']}"
    )


def run_layer_bench(cfg: BenchConfig, log: Callable[[str], object] = print) -> dict[str, Any]:
    """Run every mode and batch of ``cfg``; write traces, rules and ``layer_bench.json`` into ``cfg.out``.

    Returns the JSON document (schema ``wavemla.layer_bench/1``). The document is rewritten after every batch, so
    an interrupted run keeps what it measured.
    """
    cuda = cfg.device == "cuda"
    if cuda:
        from wavemla.device import DeviceSpec

        arch = DeviceSpec.from_torch().arch
        if arch // 10 not in (9, 10):
            raise ValueError(
                f"sm_{arch}: the MoE's torch._grouped_mm has a graph-capturable path on sm_90/sm_100 only "
                "(elsewhere it syncs the host per call); run on an H100/H200/B200, or --tiny --cpu"
            )
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_rules(cfg.out)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "env": _environment(cfg),
        "args": {
            "modes": list(cfg.modes),
            "batches": list(cfg.batches),
            "context": cfg.context,
            "experts": cfg.dims.experts,
            "ep": cfg.ep,
            "reps": cfg.reps,
            "profile_steps": cfg.profile_steps,
            "tiny": cfg.tiny,
            "dtype": str(cfg.dtype).removeprefix("torch."),
            "seed": cfg.seed,
            "index_k": cfg.index_k,
        },
        "dims": dataclasses.asdict(cfg.dims),
        "timer": (
            f"CUDA-graph replay after {WARM_MS:.0f} ms of untimed replays, L2 flushed before each, "
            "median/p20/p80 of reps"
            if cuda
            else "CPU wall clock of eager calls through the Triton interpreter (exercises the path, not a speed)"
        ),
        "units": {"time": "us per decode step of one layer", "bytes": "weights and KV rows read once", "gbps": "GB/s"},
        "rules": RULES_FILE,
        "modes": {},
    }
    results = cfg.out / RESULTS_FILE
    where = doc["env"]["gpu"] or "CPU (Triton interpreter)"
    experts = f"{cfg.dims.experts} experts" + (
        f" over {cfg.ep} expert-parallel GPUs ({cfg.dims.experts // cfg.ep} and the shared one here)"
        if cfg.ep > 1
        else ""
    )
    index_k = f", {cfg.index_k.upper()} index-K rows" if "csa" in cfg.modes else ""
    log(
        f"layer-bench on {where}: modes {', '.join(cfg.modes)}, context {cfg.context}, {experts}{index_k}, "
        f"{cfg.dtype}, {cfg.reps} reps; times in us (median)"
    )
    with torch.no_grad():
        gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
        moe = MoE(cfg.dims, cfg.device, cfg.dtype, gen, ep=cfg.ep, max_tokens=max(cfg.batches))
        for mode in cfg.modes:
            (cfg.out / mode).mkdir(exist_ok=True)
            # `wavemla trace OUT/<mode>` fits every trace there: an earlier run's other batch sizes would join the fit
            for stale in (cfg.out / mode).glob(TRACE_GLOB):
                stale.unlink()
            layer = DecoderLayer(
                cfg.dims,
                mode,
                cfg.context,
                max(cfg.batches),
                moe,
                device=cfg.device,
                dtype=cfg.dtype,
                seed=cfg.seed,
                index_k=cfg.index_k,
            )
            entry: dict[str, Any] = {
                "ratio": MODES[mode],
                "n_comp": layer.n_comp,
                "rows": {"window": layer.n_win, "compressed": layer.n_sel},
                "components": list(layer.components),
                "trace_dir": mode,
                "trace_command": trace_command(cfg.out, mode),
                "batches": [],
            }
            if mode == "csa":  # the cache the indexer reads: its bytes per row are its share of "bytes"
                entry["index_k"] = {"format": cfg.index_k, "layout": "paged", "row_bytes": layer.idx_cache.shape[-1]}
            doc["modes"][mode] = entry
            for b in cfg.batches:
                rec = bench_batch(layer, b, cfg, cfg.out / mode / f"layer_bs{b}.json.gz")
                entry["batches"].append(rec)
                log(_format_record(mode, rec))
                if cuda:
                    torch.cuda.empty_cache()
                results.write_text(json.dumps(doc, indent=1) + "\n")
            if cuda:
                entry["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
            del layer
            if cuda:
                torch.cuda.empty_cache()
    results.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _join(values: Sequence[int]) -> str:
    return " ".join(str(v) for v in values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", nargs="+", metavar="MODE", help="layer types: csa, hca (default: both)")
    parser.add_argument(
        "--batch",
        nargs="+",
        type=int,
        metavar="N",
        help=f"batch sizes (default: {_join(DEFAULT_BATCHES)}; --tiny: {_join(TINY_BATCHES)})",
    )
    parser.add_argument(
        "--context", type=int, help="tokens per request incl. the decoded one (default 65536; --tiny: 1024)"
    )
    parser.add_argument("--experts", type=int, help="routed experts (default 256, 12.9 GB in bf16; --tiny: 16)")
    parser.add_argument(
        "--ep",
        type=int,
        metavar="N",
        help="time one of N expert-parallel GPUs: it holds experts/N routed experts and serves the pairs routed to "
        "them from N times its batch (the other GPUs' tokens simulated; no all-to-all); default 1",
    )
    parser.add_argument("--reps", type=int, help="timed replays per point (default 20; CPU: 1)")
    parser.add_argument("--profile-steps", type=int, help="whole-layer replays in each trace (default 5; CPU: 1)")
    parser.add_argument("--out", default="layer_bench", metavar="DIR", help="output directory (default layer_bench)")
    parser.add_argument("--tiny", action="store_true", help="tiny dimensions (CPU interpreter without a GPU)")
    parser.add_argument("--cpu", action="store_true", help="with --tiny: use the interpreter even with a GPU")
    parser.add_argument("--seed", type=int, default=0, help="weights, caches and inputs seed, |N| <= 2^53 (default 0)")
    parser.add_argument(
        "--index-k",
        default="fp8",
        choices=INDEX_K_FORMATS,
        help="CSA: the index-K rows the indexer reads, page-split: fp8 (default; 132 bytes, vLLM's V3.2 cache) or "
        "mxfp4 (68 bytes, SGLang's DeepSeek-V4 cache)",
    )


def run(args: argparse.Namespace) -> int:
    """The ``wavemla layer-bench`` verb: 0 on success, 2 on a usage error."""

    def fail(message: str) -> int:
        print(f"wavemla layer-bench: error: {message}", file=sys.stderr)
        return 2

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    try:
        cfg = make_config(
            modes=args.mode,
            batches=args.batch,
            context=args.context,
            experts=args.experts,
            ep=args.ep,
            reps=args.reps,
            profile_steps=args.profile_steps,
            out=args.out,
            tiny=args.tiny,
            device=device,
            seed=args.seed,
            index_k=args.index_k,
        )
        if device == "cpu":
            from wavemla import config

            try:
                config.use_triton_interpreter()
            except RuntimeError as e:
                return fail(f"cannot switch to Triton's interpreter: {e}")
        run_layer_bench(cfg, log=lambda s: print(s, flush=True))
    except ValueError as e:
        return fail(str(e))
    except OSError as e:  # the output directory, or a file the run writes in it
        return fail(f"--out: {e.filename or args.out}: {e.strerror or e}")
    except (MemoryError, RuntimeError) as e:
        from wavemla.cli import out_of_memory

        reason = out_of_memory(e)
        if reason is None:
            raise
        return fail(f"--batch, --context, --experts: too large for this machine's memory ({reason})")
    print(f"wrote {cfg.out / RESULTS_FILE}")
    for mode in cfg.modes:
        print(f"next: {trace_command(cfg.out, mode)}")
    return 0
