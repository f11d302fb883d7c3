"""Stress decode in CUDA graphs replayed on several streams at once, bit for bit against eager runs.

The decode: sparse (with the CSA indexer), paged dense, or DeepSeek-V3.2's sparse decode.

Each of ``--graphs`` graphs owns its inputs, its outputs, its metadata (:func:`wavemla.get_mla_metadata`) and its
indexer workspace (``--mode dense``: the paged dense decode of DeepSeek-V3 shapes, whose metadata also holds the
device scheduler's work ranges; ``--mode v32``: DeepSeek-V3.2's sparse decode, a 576-wide q over the FP8 V3.2 cache
with 2,048 list entries a token, whose graph holds the list kernel, the dense decode's kernels and, in graphs 1 and 2
of every four, the sink's); it is captured once and then replayed ``--replays`` times in total over
``--streams`` streams, in a seeded random order that moves every graph from stream to stream. Between replays the
streams run unrelated work (matmuls, memsets) and tensors are allocated, used on another stream and freed through
the caching allocator.

Ordering, per replay of graph ``g`` on stream ``S`` checked on stream ``C`` (``C`` may be ``S``):

1. ``S`` waits for the event that ended ``g``'s previous check, so no replay overwrites inputs or outputs that an
   earlier replay or check still uses;
2. on ``S``: noise, then one of ``--variants`` input sets is copied into ``g``'s static input buffers, then the
   replay, then an event;
3. ``C`` waits for that event and compares every output of ``g`` bit for bit with an eager run of the same variant
   (computed before the loop, on fresh metadata); counts and the first differing element land in device buffers,
   so the loop never synchronizes; an event recorded on ``C`` closes the replay.

Tensors that cross streams are handed over (the using stream waits for the allocating one, whose queued work may
still read the block's last tenant) and marked with ``record_stream`` before they are freed, the rest are allocated
on the stream that uses them; static buffers, expected outputs and captured outputs stay referenced until the end. Every
``--check-every`` rounds the host synchronizes and prints each mismatch (graph, replay, first differing element).
Exit code: 0 when every replay matched, 1 on any mismatch, 2 on a CUDA (or setup) error.

``--small`` picks tiny shapes and few replays for compute-sanitizer runs (see docs/reliability.md); ``--cpu`` runs
the same loop eagerly through Triton's interpreter (no graphs, no streams) to check the harness itself;
``--inject-flip N`` flips one output bit of replay N, which must come back as exactly one mismatch.
``--index-k mxfp4`` gives the CSA indexer MXFP4 index-K rows (68 bytes, page-split, as SGLang's DeepSeek-V4 cache
holds them) instead of FP8 rows (132 bytes, each row's scale after its codes).
``--out-buffers`` makes every replayed decode call write a caller's buffer (``out=``, NaN-filled just before the call,
inside the graph), as vLLM's DeepSeek-V4 decode does with the output it allocates in its captured forward; the eager
references are computed without one, so an element a replay leaves unwritten is a mismatch. Two negative
controls break the ownership rules on purpose, to show what the harness catches: ``--share-metadata`` (all graphs
share one split workspace) and ``--share-pool`` (all graphs captured into one memory pool, so the temporaries of
graphs replayed at the same time alias — the failure mode of overlapped CUDA-graph replays in serving engines; a
usage error where no graph is captured, ``--no-graph`` or ``--cpu``).

Example::

    wavemla stress --mode csa --batch 48 7 96 1 --streams 2 --graphs 4 --replays 10000
    wavemla stress --mode csa --index-k mxfp4 --replays 2000
    wavemla stress --mode dense --heads 128 --seqlen 4096 --replays 2000
    wavemla stress --mode v32 --replays 2000
    python -m wavemla.tools.stress --small --replays 20
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# --indexer-select: "auto" and the indexer's SELECT_PATHS (listed here: the kernels are imported only once --cpu has
# picked the interpreter)
INDEXER_SELECTS = ("auto", "token", "chunked", "spread")
# --index-k: the indexer's index-K byte formats, wavemla.reference.indexer.INDEX_K_FORMATS (listed here: torch is
# imported only once --cpu has picked the interpreter)
INDEX_K_FORMATS = ("fp8", "mxfp4")
# mode -> (topk, page, extra_topk, extra_page, extra_pool): FlashMLA's MODEL1 decode shapes (see tools/bench.py)
MODES: dict[str, tuple[int, int, int, int, int]] = {
    "swa": (128, 256, 0, 64, 0),
    "csa": (128, 256, 512, 64, 2048),
    "hca": (128, 256, 1024, 2, 1024),
}
# --small: the same structure at sizes a compute-sanitizer run finishes quickly.
SMALL_MODES: dict[str, tuple[int, int, int, int, int]] = {
    "swa": (64, 64, 0, 64, 0),
    "csa": (64, 64, 64, 64, 256),
    "hca": (64, 64, 128, 2, 128),
}
# --mode dense: (cached keys per request, page) of the paged dense decode (DeepSeek-V3 shapes; --small: tiny).
DENSE_SHAPE = (4096, 64)
SMALL_DENSE_SHAPE = (256, 16)
# --mode v32: (list entries a token, cache page, cache rows the lists pick from) of DeepSeek-V3.2's sparse decode
# (--small: tiny); 128 query heads (16 with --small), DeepSeek-V3.2's.
V32_SHAPE = (2048, 64, 16384)
SMALL_V32_SHAPE = (64, 16, 256)
MODE_CHOICES = (*sorted(MODES), "dense", "v32")
NOISE_OPS = ("matmul", "memset", "alloc", "alloc_cross")
DEFAULT_REPLAYS = 10_000
SMALL_REPLAYS = 40
INDEX_HEADS = 64  # DeepSeek-V4 indexer heads (16 with --small)


@dataclass(frozen=True)
class StressConfig:
    """Everything one stress run depends on (see ``add_arguments`` for the meaning of each field)."""

    mode: str = "csa"
    batches: tuple[int, ...] = (48, 7, 96, 1)
    heads: int = 64
    s_q: int = 1
    streams: int = 2
    graphs: int = 4
    replays: int = DEFAULT_REPLAYS
    variants: int = 3
    seed: int = 0
    indexer: bool = True
    fp8: bool = True
    splits: tuple[int | None, ...] = (None, 3)
    batch_invariant: bool = False
    noise_mm: int = 2048
    check_every: int = 250
    share_metadata: bool = False
    share_pool: bool = False
    inject_flip: int | None = None
    use_graphs: bool = True
    cpu: bool = False
    topk: int = 128
    page: int = 256
    extra_topk: int = 512
    extra_page: int = 64
    extra_pool: int = 2048
    index_heads: int = INDEX_HEADS
    indexer_select: str | None = None  # the indexer's select path; None: the one it picks
    index_k: str = "fp8"  # the indexer's index-K rows: "fp8" (132 bytes) or "mxfp4" (68 bytes)
    seqlen: int = DENSE_SHAPE[0]  # dense: cached keys per request (variants draw shorter lengths)
    pool: int = 0  # v32: cache rows the index lists pick from
    out_buffers: bool = False  # each replayed decode writes a caller's out (NaN-filled right before the call)
    fp8_tensor: bool = False  # dense: per-tensor FP8 rows (576 codes, descale_k) instead of FP8 V3.2

    @property
    def dense(self) -> bool:
        """The paged dense decode (``--mode dense``) instead of the sparse decode."""
        return self.mode == "dense"

    @property
    def v32(self) -> bool:
        """DeepSeek-V3.2's sparse decode (``--mode v32``): a 576-wide q, run by the dense decode's kernels."""
        return self.mode == "v32"

    @property
    def dense_kernels(self) -> bool:
        """The dense decode's kernels and metadata run the step (``--splits`` then sets program slots)."""
        return self.mode in ("dense", "v32")

    @property
    def uses_indexer(self) -> bool:
        """The compressed-row indices come from the lightning indexer captured in the same graph."""
        return self.indexer and self.mode == "csa"

    @property
    def index_k_layout(self) -> str:
        """Byte layout of the index-K cache: MXFP4 rows page-split, as SGLang's and vLLM's DeepSeek-V4 caches store
        them; FP8 rows with each row's scale after its codes."""
        return "paged" if self.index_k == "mxfp4" else "rows"

    def batch_of(self, graph: int) -> int:
        return self.batches[0] if self.share_metadata else self.batches[graph % len(self.batches)]

    def splits_of(self, graph: int) -> int | None:
        return self.splits[0] if self.share_metadata else self.splits[graph % len(self.splits)]


@dataclass(frozen=True)
class Replay:
    """One scheduled replay: which graph, with which input variant, on which streams, after which noise."""

    index: int
    round: int
    graph: int
    variant: int
    stream: int
    check_stream: int
    noise: tuple[tuple[str, int], ...]  # (op, size): matmul/memset/alloc/alloc_cross before the replay


@dataclass(frozen=True)
class Mismatch:
    """One output of one replay that differs from the eager run of the same inputs."""

    replay: int
    graph: int
    variant: int
    round: int
    stream: int
    check_stream: int
    tensor: str
    count: int
    numel: int
    first: tuple[int, ...]
    actual: float
    expected: float

    def describe(self) -> str:
        return (
            f"MISMATCH graph {self.graph} replay {self.replay} (round {self.round}, variant {self.variant}, "
            f"replay stream {self.stream}, check stream {self.check_stream}): {self.tensor}: {self.count} of "
            f"{self.numel} elements differ; first at {list(self.first)}: got {self.actual!r}, "
            f"expected {self.expected!r}"
        )


@dataclass
class StressReport:
    """Outcome of a run: every mismatch, the error that stopped it (if any) and what ran."""

    replays: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    error: str | None = None
    noise_ops: dict[str, int] = field(default_factory=dict)
    graphs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if self.mismatches else 0


# ------------------------------------------------------------------------------------------------ pure parts
def config_from_args(args: argparse.Namespace) -> StressConfig:
    """Resolve presets and defaults into a :class:`StressConfig`; raises ValueError naming a bad option."""
    small = bool(args.small)
    seqlen, pool = 0, 0
    if args.mode == "dense":
        seqlen, page = SMALL_DENSE_SHAPE if small else DENSE_SHAPE
        topk, extra_topk, extra_page, extra_pool = 0, 0, 0, 0
        seqlen = args.seqlen if args.seqlen is not None else seqlen
    elif args.mode == "v32":
        topk, page, pool = SMALL_V32_SHAPE if small else V32_SHAPE
        extra_topk, extra_page, extra_pool = 0, 0, 0
    elif args.mode in MODES:
        topk, page, extra_topk, extra_page, extra_pool = (SMALL_MODES if small else MODES)[args.mode]
    else:
        raise ValueError(f"--mode: expected one of {list(MODE_CHOICES)}, got {args.mode!r}")
    if args.mode != "dense" and args.seqlen is not None:
        raise ValueError("--seqlen: the cached keys per request of --mode dense only")
    if args.fp8_tensor and (args.mode != "dense" or args.bf16):
        raise ValueError("--fp8-tensor: the per-tensor FP8 rows of --mode dense (not with --bf16)")
    if args.mode in ("dense", "v32"):
        if args.batch_invariant:
            raise ValueError(f"--batch-invariant: the DeepSeek-V4 sparse decode's mode; --mode {args.mode} has none")
        if args.indexer_select != "auto":
            raise ValueError(f"--indexer-select: CSA layers only; --mode {args.mode} has no indexer")
    batches = tuple(args.batch) if args.batch else ((2, 3) if small else (48, 7, 96, 1))
    replays = args.replays if args.replays is not None else (SMALL_REPLAYS if small else DEFAULT_REPLAYS)
    graphs = args.graphs if args.graphs is not None else (2 if small else 4)
    # Forced splits make the combine run; batch-invariant mode needs a count that divides the tiles per token.
    default_splits: tuple[int | None, ...] = (None, 2) if args.batch_invariant else (None, 3)
    try:
        splits = tuple(None if s in ("auto", "0") else int(s) for s in args.splits) if args.splits else default_splits
    except ValueError:
        raise ValueError(f"--splits: expected 'auto' or positive integers, got {args.splits}") from None
    cfg = StressConfig(
        mode=args.mode,
        batches=batches,
        heads=args.heads if args.heads is not None else (16 if small else 128 if args.mode == "v32" else 64),
        s_q=args.s_q,
        streams=args.streams,
        graphs=graphs,
        replays=replays,
        variants=args.variants,
        seed=args.seed,
        indexer=not args.no_indexer,
        fp8=not args.bf16,
        fp8_tensor=bool(args.fp8_tensor),
        splits=splits,
        batch_invariant=args.batch_invariant,
        noise_mm=args.noise_mm if args.noise_mm is not None else (256 if small else 2048),
        check_every=args.check_every,
        share_metadata=args.share_metadata,
        share_pool=args.share_pool,
        inject_flip=args.inject_flip,
        use_graphs=not args.no_graph and not args.cpu,
        cpu=args.cpu,
        topk=topk,
        page=page,
        extra_topk=extra_topk,
        extra_page=extra_page,
        extra_pool=extra_pool,
        index_heads=16 if small else INDEX_HEADS,
        indexer_select=None if args.indexer_select == "auto" else args.indexer_select,
        index_k=args.index_k,
        seqlen=seqlen,
        pool=pool,
        out_buffers=args.out_buffers,
    )
    validate_config(cfg)
    return cfg


def validate_config(cfg: StressConfig) -> None:
    if cfg.mode not in MODE_CHOICES:
        raise ValueError(f"--mode: expected one of {list(MODE_CHOICES)}, got {cfg.mode!r}")
    if cfg.dense and cfg.seqlen < 1:
        raise ValueError(f"--seqlen: expected a positive integer, got {cfg.seqlen}")
    if not cfg.batches or min(cfg.batches) < 1:
        raise ValueError(f"--batch: expected sizes >= 1, got {list(cfg.batches)}")
    if cfg.streams < 2 and not cfg.cpu:
        raise ValueError(f"--streams: the stress needs at least 2 streams, got {cfg.streams}")
    if cfg.streams < 1:  # --cpu: one queue, but the schedule still draws each replay's stream
        raise ValueError(f"--streams: expected a positive integer, got {cfg.streams}")
    if cfg.cpu and cfg.use_graphs:  # the command line never sets both; a StressConfig built in Python can
        raise ValueError("use_graphs: --cpu runs the decode eagerly through the interpreter, with no CUDA graph")
    if cfg.share_pool and not cfg.use_graphs:
        without = "--cpu" if cfg.cpu else "--no-graph"
        raise ValueError(f"--share-pool: the pool the graphs are captured into; {without} captures no graph")
    for name in ("graphs", "replays", "variants", "check_every", "noise_mm", "s_q", "heads"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(cfg, name)}")
    from wavemla.tools.bench import MAX_HEADS, MAX_SPARSE_S_Q  # the decodes' limits, as wavemla bench checks them

    if cfg.heads > MAX_HEADS:
        raise ValueError(f"--heads: expected 1..{MAX_HEADS} query heads, got {cfg.heads}")
    if not cfg.dense_kernels and cfg.s_q > MAX_SPARSE_S_Q:
        raise ValueError(f"--s-q: --mode {cfg.mode} takes 1..{MAX_SPARSE_S_Q} query tokens a request, got {cfg.s_q}")
    if any(s is not None and s < 1 for s in cfg.splits):
        raise ValueError(f"--splits: expected 'auto' or positive integers, got {list(cfg.splits)}")
    if cfg.index_k not in INDEX_K_FORMATS:
        raise ValueError(f"--index-k: expected one of {list(INDEX_K_FORMATS)}, got {cfg.index_k!r}")
    if cfg.index_k != "fp8" and not cfg.uses_indexer:
        without = "--no-indexer" if cfg.mode == "csa" else f"--mode {cfg.mode}"
        raise ValueError(f"--index-k: the format of the CSA indexer's cache; {without} runs no indexer")
    if cfg.indexer_select is not None and not cfg.uses_indexer:
        without = "--no-indexer" if cfg.mode == "csa" else f"--mode {cfg.mode}"
        raise ValueError(f"--indexer-select: the CSA indexer's select path; {without} runs no indexer")
    from wavemla.kernels.indexer import SPREAD_MAX_TOKENS  # not at import: --cpu picks the interpreter first

    if cfg.indexer_select == "spread" and max(cfg.batches) * cfg.s_q > SPREAD_MAX_TOKENS:
        raise ValueError(
            f"--indexer-select: 'spread' takes at most {SPREAD_MAX_TOKENS} query tokens, got batch "
            f"{max(cfg.batches)} x s_q {cfg.s_q}"
        )
    if cfg.inject_flip is not None and not 0 <= cfg.inject_flip < cfg.replays:
        raise ValueError(f"--inject-flip: expected a replay index in [0, {cfg.replays}), got {cfg.inject_flip}")


def schedule(cfg: StressConfig) -> list[Replay]:
    """The seeded replay order: rounds in which every graph replays once (shuffled), each on a random stream and
    checked on a random stream, preceded by 0-3 noise operations; ``cfg.replays`` replays in total."""
    rng = random.Random(cfg.seed)
    max_bytes = max(1 << 13, cfg.noise_mm * cfg.noise_mm * 4)  # allocations up to one noise matrix pair
    out: list[Replay] = []
    rnd = 0
    while len(out) < cfg.replays:
        order = list(range(cfg.graphs))
        rng.shuffle(order)
        for g in order:
            if len(out) == cfg.replays:
                break
            noise = tuple((rng.choice(NOISE_OPS), rng.randrange(1 << 12, max_bytes)) for _ in range(rng.randrange(4)))
            out.append(
                Replay(
                    index=len(out),
                    round=rnd,
                    graph=g,
                    variant=rng.randrange(cfg.variants),
                    stream=rng.randrange(cfg.streams),
                    check_stream=rng.randrange(cfg.streams),
                    noise=noise,
                )
            )
        rnd += 1
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of ``t`` as an integer tensor of the same element size (NaN payloads and -0 compare exactly)."""
    import torch

    if not t.is_floating_point():
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def compare_into(actual: torch.Tensor, expected: torch.Tensor, counts: torch.Tensor, values: torch.Tensor) -> None:
    """Bitwise comparison without a host sync: ``counts [2]`` int64 <- (differing elements, flat index of the first),
    ``values [2]`` float64 <- (actual, expected) at that index (element 0 when nothing differs)."""
    import torch

    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise ValueError(f"compare: {actual.dtype}{list(actual.shape)} vs {expected.dtype}{list(expected.shape)}")
    ne = (_bits(actual) != _bits(expected)).reshape(-1)
    first = ne.to(torch.uint8).argmax().view(1)  # the first True (argmax returns the first maximum)
    counts.copy_(torch.cat([ne.sum().view(1), first]))
    values.copy_(
        torch.cat([actual.reshape(-1).gather(0, first).double(), expected.reshape(-1).gather(0, first).double()])
    )


def first_difference(actual: torch.Tensor, expected: torch.Tensor) -> tuple[int, tuple[int, ...], float, float] | None:
    """``(differing elements, index of the first, actual, expected)`` of a bitwise comparison, None when equal."""
    import torch

    if actual.numel() == 0 and expected.numel() == 0 and actual.shape == expected.shape:
        return None
    counts = torch.zeros(2, dtype=torch.int64, device=actual.device)
    values = torch.zeros(2, dtype=torch.float64, device=actual.device)
    compare_into(actual, expected, counts, values)
    n, flat = (int(x) for x in counts.tolist())
    if n == 0:
        return None
    a, e = values.tolist()
    return n, _unravel(flat, tuple(actual.shape)), a, e


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


# --------------------------------------------------------------------------------------------------- inputs
@dataclass
class GraphCase:
    """One graph's world: read-only tensors, the static buffers the graph reads, input variants and their eager
    outputs, its metadata, and (once captured) the graph and the outputs it writes."""

    index: int
    batch: int
    splits: int | None
    fixed: dict[str, torch.Tensor]
    static: dict[str, torch.Tensor]
    variants: list[dict[str, torch.Tensor]]
    expected: list[dict[str, torch.Tensor]] = field(default_factory=list)
    meta: Any = None
    graph: Any = None
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    plan_note: str = ""


def _dtypes(cfg: StressConfig) -> tuple[torch.dtype, torch.dtype]:
    """(q dtype, indexer q dtype): bf16 on a GPU; fp16 and fp32 under the interpreter (its bf16 tl.dot is wrong)."""
    import torch

    if cfg.cpu:
        return torch.float16, torch.float32
    return torch.bfloat16, torch.bfloat16


def build_case(cfg: StressConfig, graph: int, device: torch.device | str) -> GraphCase:
    """Inputs of graph ``graph``: caches (one poisoned spare block each), sink, and ``cfg.variants`` input sets.

    Main indices are each request's window slots, shuffled, ~10% set to -1 in variants > 0; ``topk_length`` is drawn
    in ``[0, topk]``. Without the indexer the extra indices are picked from the request's compressed pool the same
    way. With it (CSA) the graph runs the indexer on the variant's ``q_idx``, ``weights`` and ``n_comp`` and feeds its
    output to the decode; the compressed KV cache and the index-K cache (FP8 or MXFP4 rows, ``cfg.index_k``) then
    share one block table and page size.
    """
    import torch

    from wavemla.reference.fp8 import page_views, quantize_model1
    from wavemla.reference.indexer import quantize_index_k
    from wavemla.testing import _to_device, make_sparse_decode_inputs

    b = cfg.batch_of(graph)
    q_dtype, idx_dtype = _dtypes(cfg)
    seed = cfg.seed * 1000 + graph
    if cfg.dense:
        return _dense_case(cfg, graph, b, seed, q_dtype, device)
    if cfg.v32:
        return _v32_case(cfg, graph, b, seed, q_dtype, device)
    gen = torch.Generator().manual_seed(seed)
    dev_gen = torch.Generator(device=device).manual_seed(seed)  # bulk values are drawn where they live
    with_extra = cfg.extra_topk > 0 and not cfg.uses_indexer
    base = make_sparse_decode_inputs(
        batch=b,
        s_q=cfg.s_q,
        h_q=cfg.heads,
        topk=cfg.topk,
        page=cfg.page,
        extra_topk=cfg.extra_topk if with_extra else 0,
        extra_page=cfg.extra_page,
        extra_pool=cfg.extra_pool if with_extra else None,
        fp8=cfg.fp8,
        dtype=q_dtype,
        device=device,
        sink=True,
        seed=seed,
    )
    fixed: dict[str, torch.Tensor] = {"kv_cache": _req(base, "kv_cache")}
    fixed["attn_sink"] = _req(base, "attn_sink")
    if with_extra:
        fixed["extra_kv_cache"] = _req(base, "extra_kv_cache")
    if cfg.uses_indexer:
        pages = cfg.extra_pool // cfg.extra_page
        nb = b * pages + 1  # one spare block nothing points at: poisoned
        table = torch.randperm(nb, generator=gen)[: b * pages].view(b, pages).to(torch.int32)
        rows = torch.randn((nb, cfg.extra_page, 1, 512), generator=dev_gen, device=device)
        spare = torch.ones(nb, dtype=torch.bool)
        spare[table.flatten().long()] = False
        spare = spare.to(device)
        if cfg.fp8:
            comp = quantize_model1(rows.to(q_dtype))
            data, scales = page_views(comp)
            data[spare] = 0xFF
            scales[spare] = 0xFF
        else:
            comp = rows.to(q_dtype)
            comp[spare] = float("nan")
        index_k = quantize_index_k(
            torch.randn((nb, cfg.extra_page, 128), generator=dev_gen, device=device),
            layout=cfg.index_k_layout,
            fmt=cfg.index_k,
        )
        # 0xFF reads as NaN in both formats (FP8: e4m3 NaN codes and a NaN fp32 scale; MXFP4: e8m0 exponent 255)
        index_k[spare] = 0xFF
        fixed["extra_kv_cache"] = _to_device(comp, device)
        fixed["index_k_cache"] = index_k.to(device)
        fixed["block_table"] = table.to(device)

    variants = [_variant(cfg, base, b, v, gen, q_dtype, idx_dtype, device) for v in range(cfg.variants)]
    static = {k: t.clone() for k, t in variants[0].items()}
    return GraphCase(index=graph, batch=b, splits=cfg.splits_of(graph), fixed=fixed, static=static, variants=variants)


def _dense_case(
    cfg: StressConfig, graph: int, b: int, seed: int, q_dtype: torch.dtype, device: torch.device | str
) -> GraphCase:
    """Inputs of a dense graph: every request owns ``cfg.seqlen`` keys' worth of pages in a shuffled block table
    (unreferenced rows poisoned); the variants change q and the lengths (variant 0: every request full, the others
    drawn in ``[0, seqlen]``, so requests end mid-page, are empty or full)."""
    import torch

    from wavemla.testing import make_dense_decode_inputs

    gen = torch.Generator().manual_seed(seed)
    base = make_dense_decode_inputs(
        lengths=[cfg.seqlen] * b,
        s_q=cfg.s_q,
        h_q=cfg.heads,
        page=cfg.page,
        fp8="tensor" if cfg.fp8_tensor else cfg.fp8,
        dtype=q_dtype,
        device=device,
        seed=seed,
    )
    fixed = {"k_cache": base["k_cache"], "block_table": base["block_table"]}
    if cfg.fp8_tensor:
        fixed["descale_k"] = base["descale_k"]
    variants = []
    for v in range(cfg.variants):
        q = torch.randn((b, cfg.s_q, cfg.heads, 576), generator=gen).clamp(-1.0, 1.0).to(q_dtype).to(device)
        lengths = torch.full((b,), cfg.seqlen) if v == 0 else torch.randint(0, cfg.seqlen + 1, (b,), generator=gen)
        variants.append({"q": q, "cache_seqlens": lengths.to(torch.int32).to(device)})
    static = {k: t.clone() for k, t in variants[0].items()}
    return GraphCase(index=graph, batch=b, splits=cfg.splits_of(graph), fixed=fixed, static=static, variants=variants)


def _v32_case(
    cfg: StressConfig, graph: int, b: int, seed: int, q_dtype: torch.dtype, device: torch.device | str
) -> GraphCase:
    """Inputs of a DeepSeek-V3.2 graph: a cache of ``cfg.pool`` rows in pages of ``cfg.page`` (FP8 V3.2 records, or
    576-wide rows with ``--bf16``), one poisoned spare page nothing lists, and a sink in graphs 1 and 2 of every four;
    the variants change q, the lists (variant 0: ``topk`` distinct valid rows a token; the others: ~10% of the entries
    -1, out of range or at either end of int32) and the per-request ``topk_length`` (variant 0: ``topk``; the others
    drawn in ``[0, topk]``, so tokens see no row, some or all)."""
    import torch

    from wavemla.reference.fp8_v32 import quantize_v32

    gen = torch.Generator().manual_seed(seed)
    blocks = cfg.pool // cfg.page + 1  # the last page is the spare one
    rows = torch.randn((blocks, cfg.page, 1, 576), generator=gen)
    cache = quantize_v32(rows) if cfg.fp8 else rows.to(q_dtype)
    if cfg.fp8:
        cache[-1] = 0xFF  # e4m3 NaN codes, NaN scales and NaN rope
    else:
        cache[-1] = float("nan")
    fixed = {"kv_cache": cache.to(device)}
    if graph % 4 in (1, 2):  # crossed with --splits' cycle of two: planned and forced graphs, with and without
        fixed["attn_sink"] = torch.linspace(-2.0, 2.0, cfg.heads).to(device)
    slots = cfg.pool
    junk = torch.tensor([-1, slots + cfg.page, 2**31 - 1, -(2**31)], dtype=torch.int32)
    variants = []
    for v in range(cfg.variants):
        q = torch.randn((b, cfg.s_q, cfg.heads, 576), generator=gen).clamp(-1.0, 1.0).to(q_dtype).to(device)
        keys = torch.rand((b, cfg.s_q, slots), generator=gen)
        idx = keys.argsort(dim=-1)[..., : cfg.topk].to(torch.int32)  # distinct rows, in no order
        length = torch.full((b,), cfg.topk, dtype=torch.int32)
        if v:
            bad = torch.rand(idx.shape, generator=gen) < 0.1
            idx = torch.where(bad, junk[torch.randint(0, len(junk), idx.shape, generator=gen)], idx)
            length = torch.randint(0, cfg.topk + 1, (b,), generator=gen, dtype=torch.int32)
        variants.append({"q": q, "indices": idx.to(device), "topk_length": length.to(device)})
    static = {k: t.clone() for k, t in variants[0].items()}
    return GraphCase(index=graph, batch=b, splits=cfg.splits_of(graph), fixed=fixed, static=static, variants=variants)


def _req(d: dict[str, torch.Tensor | None], key: str) -> torch.Tensor:
    t = d.get(key)
    if t is None:
        raise KeyError(key)
    return t


def _shuffled(idx: torch.Tensor, gen: torch.Generator, drop: float) -> torch.Tensor:
    """Entries permuted along the last axis (summation order changes, the set does not) and ``drop`` of them -1."""
    import torch

    cpu = idx.cpu()
    perm = torch.argsort(torch.rand(cpu.shape, generator=gen), dim=-1)
    out = torch.gather(cpu, -1, perm)
    out[torch.rand(cpu.shape, generator=gen) < drop] = -1
    return out.to(idx.device)


def _variant(
    cfg: StressConfig,
    base: dict[str, torch.Tensor | None],
    b: int,
    v: int,
    gen: torch.Generator,
    q_dtype: torch.dtype,
    idx_dtype: torch.dtype,
    device: torch.device | str,
) -> dict[str, torch.Tensor]:
    import torch

    def ints(lo: int, hi: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int32).to(device)

    drop = 0.0 if v == 0 else 0.1
    q = torch.randn((b, cfg.s_q, cfg.heads, 512), generator=gen).clamp(-1.0, 1.0).to(q_dtype).to(device)
    out = {
        "q": q,
        "indices": _shuffled(_req(base, "indices"), gen, drop),
        "topk_length": ints(0 if v else cfg.topk, cfg.topk, (b,)),
    }
    if cfg.uses_indexer:
        h = cfg.index_heads
        out["q_idx"] = torch.randn((b, cfg.s_q, h, 128), generator=gen).to(idx_dtype).to(device)
        out["weights"] = (torch.randn((b, cfg.s_q, h), generator=gen) * (128**-0.5 * h**-0.5)).to(device)
        # Some requests see fewer rows than top-k (-1 padding), the rest more (the selection runs).
        out["n_comp"] = ints(1, cfg.extra_pool, (b,))
    elif cfg.extra_topk > 0:
        out["extra_indices"] = _shuffled(_req(base, "extra_indices"), gen, drop)
        out["extra_topk_length"] = ints(0 if v else cfg.extra_topk, cfg.extra_topk, (b,))
    return out


def decode_step(
    cfg: StressConfig, fixed: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], meta: Any
) -> dict[str, torch.Tensor]:
    """What a graph holds: (CSA) the lightning indexer, then the sparse decode, or the paged dense decode (causal
    for s_q > 1, FlashMLA's MTP semantics); returns every output tensor."""
    import torch

    from wavemla.api import dense_mla_decode, sparse_mla_decode

    q = inputs["q"]
    # the caller's buffer (vLLM allocates its output inside the captured forward); NaN: an unwritten element shows
    buf = torch.full((*q.shape[:3], 512), float("nan"), dtype=q.dtype, device=q.device) if cfg.out_buffers else None
    if cfg.dense:
        out, lse = dense_mla_decode(
            inputs["q"],
            fixed["k_cache"],
            fixed["block_table"],
            inputs["cache_seqlens"],
            causal=cfg.s_q > 1,
            metadata=meta,
            out=buf,
            descale_k=fixed.get("descale_k"),
        )
        return {"out": out, "lse": lse}
    if cfg.v32:
        out, lse = sparse_mla_decode(
            inputs["q"],
            fixed["kv_cache"],
            inputs["indices"],
            topk_length=inputs["topk_length"],
            attn_sink=fixed.get("attn_sink"),
            metadata=meta,
            out=buf,
        )
        return {"out": out, "lse": lse}

    outs: dict[str, torch.Tensor] = {}
    extra: dict[str, Any] = {}  # keyword arguments of sparse_mla_decode
    if "q_idx" in inputs:
        from wavemla.indexer_glue import sparse_decode_extra_args
        from wavemla.kernels.indexer import lightning_indexer

        idx, length = lightning_indexer(
            inputs["q_idx"],
            inputs["weights"],
            fixed["index_k_cache"],
            fixed["block_table"],
            inputs["n_comp"],
            cfg.extra_topk,
            max_n_comp=cfg.extra_pool,
            select=cfg.indexer_select,
            index_k_layout=cfg.index_k_layout,
        )
        outs["indexer_indices"], outs["indexer_length"] = idx, length
        args = sparse_decode_extra_args(idx, length)
        extra = {
            "extra_kv_cache": fixed["extra_kv_cache"],
            "extra_indices": args["extra_indices_in_kvcache"],
            "extra_topk_length": args["extra_topk_length"],
        }
    elif "extra_indices" in inputs:
        extra = {
            "extra_kv_cache": fixed["extra_kv_cache"],
            "extra_indices": inputs["extra_indices"],
            "extra_topk_length": inputs["extra_topk_length"],
        }
    out, lse = sparse_mla_decode(
        inputs["q"],
        fixed["kv_cache"],
        inputs["indices"],
        topk_length=inputs["topk_length"],
        attn_sink=fixed["attn_sink"],
        metadata=meta,
        batch_invariant=True if cfg.batch_invariant else None,  # None: WAVEMLA_BATCH_INVARIANT decides
        out=buf,
        **extra,
    )
    outs["out"], outs["lse"] = out, lse
    return outs


@contextlib.contextmanager
def _splits(n: int | None, dense: bool = False) -> Iterator[None]:
    """Force ``WAVEMLA_NUM_SPLITS`` (tokens cut into pieces: the combine kernel runs) or, for the dense decode,
    ``WAVEMLA_TARGET_CTAS`` (``n`` program slots, each walking several requests' keys; requests cut between them are
    merged by the combine); None: the planner decides."""
    from wavemla import config

    if n is None:
        yield
        return
    with config.override(**{"WAVEMLA_TARGET_CTAS" if dense else "WAVEMLA_NUM_SPLITS": n}):
        yield


# ----------------------------------------------------------------------------------------------- the device
class _Streams:
    """The streams and events of a run; on the CPU (interpreter) every operation is a no-op on one queue."""

    def __init__(self, device: torch.device, n: int) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self.device = device
        self.streams: list[Any] = [torch.cuda.Stream(device) for _ in range(n)] if self.cuda else [None] * n

    def use(self, i: int) -> contextlib.AbstractContextManager[Any]:
        import torch

        return torch.cuda.stream(self.streams[i]) if self.cuda else contextlib.nullcontext()

    def record(self, i: int) -> Any:
        import torch

        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record(self.streams[i])
        return event

    def wait(self, i: int, event: Any) -> None:
        if self.cuda and event is not None:
            self.streams[i].wait_event(event)

    def mark_used(self, t: torch.Tensor, i: int) -> None:
        """Tell the caching allocator that stream ``i`` uses ``t`` (its memory is not reused before that work ends)."""
        if self.cuda:
            t.record_stream(self.streams[i])

    def synchronize(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize(self.device)


class _Noise:
    """Unrelated work between replays: matmuls and memsets on per-stream buffers, and allocator churn (tensors
    filled with 0xFF, some allocated on another stream and handed over: the using stream waits for the allocating
    one, and ``record_stream`` keeps the block until the user is done)."""

    def __init__(self, cfg: StressConfig, streams: _Streams) -> None:
        import torch

        self.streams = streams
        dev = streams.device
        dtype = torch.float32 if cfg.cpu else torch.bfloat16
        n = cfg.noise_mm
        self.mats = []
        self.scratch = []
        for i in range(len(streams.streams)):
            with streams.use(i):
                self.mats.append((torch.randn(n, n, device=dev).to(dtype), torch.randn(n, n, device=dev).to(dtype)))
                self.scratch.append(torch.empty(1 << 22, dtype=torch.uint8, device=dev))
        streams.synchronize()
        self.held: list[tuple[int, torch.Tensor]] = []  # (round allocated, tensor), freed two rounds later
        self.counts = dict.fromkeys(NOISE_OPS, 0)

    def run(self, op: str, size: int, stream: int, rnd: int) -> None:
        import torch

        s = self.streams
        n_streams = len(s.streams)
        if op == "matmul":
            a, b = self.mats[stream]
            torch.mm(a, b)  # result freed at once: its block returns to this stream's pool
        elif op == "memset":
            self.scratch[stream][: min(size, self.scratch[stream].numel())].fill_(size & 0xFF)
        elif op == "alloc":
            t = torch.empty(size, dtype=torch.uint8, device=s.device)
            t.fill_(0xFF)
            self.held.append((rnd, t))
        elif op == "alloc_cross":
            other = (stream + 1) % n_streams
            with s.use(other):
                t = torch.empty(size, dtype=torch.uint8, device=s.device)
            # The allocator hands out a block once the work queued on its own stream no longer needs it, not once
            # that work has run: `other` may still be reading the block's last tenant. The handover waits for it.
            s.wait(stream, s.record(other))
            t.fill_(0xFF)  # used on `stream`, allocated on `other`
            s.mark_used(t, stream)
            self.held.append((rnd, t))
        else:
            raise ValueError(f"unknown noise op {op!r}")
        self.counts[op] += 1

    def release(self, rnd: int) -> None:
        self.held = [(r, t) for r, t in self.held if r > rnd - 2]


# -------------------------------------------------------------------------------------------------- the run
def _setup(cfg: StressConfig, device: torch.device, streams: _Streams, log: Any) -> list[GraphCase]:
    import torch

    from wavemla.api import MLAMetadata

    shared = MLAMetadata() if cfg.share_metadata else None
    pool = torch.cuda.graph_pool_handle() if (cfg.share_pool and cfg.use_graphs) else None
    cases = []
    for g in range(cfg.graphs):
        case = build_case(cfg, g, device)
        case.meta = shared if shared is not None else MLAMetadata()
        with _splits(case.splits, cfg.dense_kernels):
            # Eager reference outputs, each on fresh metadata (same plan: the planner is a pure function) and without
            # a caller's out (--out-buffers): an element the replays leave at its NaN fill differs from them.
            for variant in case.variants:
                outs = decode_step(replace(cfg, out_buffers=False), case.fixed, variant, MLAMetadata())
                case.expected.append({k: t.clone() for k, t in outs.items()})
            if cfg.use_graphs:
                # Warm up on a side stream (plans, compiles, allocates the split workspace), then capture.
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    decode_step(cfg, case.fixed, case.static, case.meta)
                torch.cuda.current_stream(device).wait_stream(side)
                torch.cuda.synchronize(device)
                case.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(case.graph, pool=pool):
                    case.outputs = decode_step(cfg, case.fixed, case.static, case.meta)
                torch.cuda.synchronize(device)
            else:
                decode_step(cfg, case.fixed, case.static, case.meta)  # plan the metadata now
        if cfg.dense_kernels:
            d = case.meta.dense_plan
            case.plan_note = (
                f"graph {g}: b={case.batch} program slots={'auto' if case.splits is None else case.splits} "
                f"BLOCK_H={d.config.block_h} BLOCK_N={d.config.block_n} parts={d.num_parts} programs={d.programs} "
                f"combine={'yes' if d.num_parts > 1 else 'no'}"
                + (f" sink={'yes' if 'attn_sink' in case.fixed else 'no'}" if cfg.v32 else "")
            )
            log(case.plan_note)
            cases.append(case)
            continue
        p = case.meta.plan
        case.plan_note = (
            f"graph {g}: b={case.batch} splits={'auto' if case.splits is None else case.splits} "
            f"BLOCK_H={p.block_h} BLOCK_N={p.block_n} units/program={p.units_per_part} programs={p.programs} "
            f"combine={'yes' if p.needs_combine else 'no'}"
            + (f" indexer in graph (select={cfg.indexer_select or 'auto'})" if cfg.uses_indexer else "")
        )
        log(case.plan_note)
        cases.append(case)
    streams.synchronize()
    return cases


def run_stress(cfg: StressConfig, log: Any = print) -> StressReport:
    """Run the stress described by ``cfg``; prints progress and every mismatch through ``log``."""
    import torch

    validate_config(cfg)
    report = StressReport()
    if not cfg.cpu and not torch.cuda.is_available():
        report.error = "no CUDA device (use --cpu for an interpreter run of the harness)"
        return report
    t0 = time.perf_counter()
    try:  # the device query and stream creation can fail with a CUDA error as well
        device = torch.device("cpu") if cfg.cpu else torch.device("cuda", torch.cuda.current_device())
        streams = _Streams(device, cfg.streams)
        cases = _setup(cfg, device, streams, log)
        report.graphs = [c.plan_note for c in cases]
        _loop(cfg, cases, streams, report, log)
    except Exception as exc:  # CUDA errors (RuntimeError), Triton's compile and resource errors: exit 2, never 1
        report.error = f"{type(exc).__name__}: {exc}"
    report.seconds = time.perf_counter() - t0
    return report


def _loop(cfg: StressConfig, cases: list[GraphCase], streams: _Streams, report: StressReport, log: Any) -> None:
    import torch

    device = streams.device
    plan = schedule(cfg)
    keys = list(cases[0].expected[0])
    counts = torch.zeros((len(plan), len(keys), 2), dtype=torch.int64, device=device)
    values = torch.zeros((len(plan), len(keys), 2), dtype=torch.float64, device=device)
    noise = _Noise(cfg, streams)
    done: list[Any] = [None] * len(cases)
    checked = 0
    for r in plan:
        case = cases[r.graph]
        with streams.use(r.stream):
            streams.wait(r.stream, done[r.graph])
            for op, size in r.noise:
                noise.run(op, size, r.stream, r.round)
            for k, t in case.variants[r.variant].items():
                case.static[k].copy_(t)
            if case.graph is not None:
                case.graph.replay()
                outputs = case.outputs
            else:
                outputs = decode_step(cfg, case.fixed, case.static, case.meta)
                for t in outputs.values():
                    streams.mark_used(t, r.check_stream)
            if cfg.inject_flip == r.index:
                # Self-test: one flipped bit in one element must be reported as exactly one mismatch.
                bits = _bits(outputs["out"]).view(-1)
                bits[:1].bitwise_xor_(1)
            replayed = streams.record(r.stream)
        with streams.use(r.check_stream):
            streams.wait(r.check_stream, replayed)
            for j, k in enumerate(keys):
                compare_into(outputs[k], case.expected[r.variant][k], counts[r.index, j], values[r.index, j])
            done[r.graph] = streams.record(r.check_stream)
        report.replays += 1
        last_in_round = r.index + 1 == len(plan) or plan[r.index + 1].round != r.round
        if last_in_round:
            noise.release(r.round)
            if (r.round + 1) % cfg.check_every == 0 or r.index + 1 == len(plan):
                streams.synchronize()
                _collect(plan[checked : r.index + 1], keys, cases, counts, values, report, log)
                checked = r.index + 1
                log(f"  {report.replays} replays, {len(report.mismatches)} mismatch(es)")
    report.noise_ops = dict(noise.counts)


def _collect(
    replays: Sequence[Replay],
    keys: list[str],
    cases: list[GraphCase],
    counts: torch.Tensor,
    values: torch.Tensor,
    report: StressReport,
    log: Any,
) -> None:
    if not replays:
        return
    lo, hi = replays[0].index, replays[-1].index + 1
    c = counts[lo:hi].cpu()
    v = values[lo:hi].cpu()
    for i, j in (c[:, :, 0] > 0).nonzero().tolist():
        r = replays[i]
        ref = cases[r.graph].expected[r.variant][keys[j]]
        m = Mismatch(
            replay=r.index,
            graph=r.graph,
            variant=r.variant,
            round=r.round,
            stream=r.stream,
            check_stream=r.check_stream,
            tensor=keys[j],
            count=int(c[i, j, 0]),
            numel=ref.numel(),
            first=_unravel(int(c[i, j, 1]), tuple(ref.shape)),
            actual=float(v[i, j, 0]),
            expected=float(v[i, j, 1]),
        )
        report.mismatches.append(m)
        log(m.describe())


def summary(cfg: StressConfig, report: StressReport) -> str:
    if cfg.dense:
        cache = "per-tensor FP8" if cfg.fp8_tensor else "FP8 V3.2" if cfg.fp8 else "row"
        shape = f"mode=dense h={cfg.heads} s_q={cfg.s_q} {cache} caches, {cfg.seqlen} keys per request"
    elif cfg.v32:
        cache = "FP8 V3.2" if cfg.fp8 else "576-wide row"
        shape = (
            f"mode=v32 h={cfg.heads} s_q={cfg.s_q} {cache} cache, {cfg.topk} list entries a token of {cfg.pool} rows"
        )
    else:
        shape = f"mode={cfg.mode} h={cfg.heads} s_q={cfg.s_q} {'FP8 MODEL1' if cfg.fp8 else 'row'} caches"
        if cfg.uses_indexer:
            shape += f", {cfg.index_k.upper()} index-K rows ({cfg.index_k_layout} layout)"
    how = "CUDA graphs" if cfg.use_graphs else ("eager, interpreter" if cfg.cpu else "eager")
    if cfg.out_buffers:
        shape += ", out= buffers"
    lines = [
        f"wavemla stress: {report.replays} replays of {cfg.graphs} graph(s) on {cfg.streams} stream(s) ({how}), "
        f"{shape}, seed {cfg.seed}, {report.seconds:.1f} s",
        *(f"  {g}" for g in report.graphs),
        "  noise: " + ", ".join(f"{k} {v}" for k, v in report.noise_ops.items()),
    ]
    if report.error is not None:
        lines.append(f"  ERROR: {report.error}")
    lines.append(
        f"  result: {'FAIL' if report.exit_code else 'PASS'} "
        f"({len(report.mismatches)} mismatching output(s) in "
        f"{len({m.replay for m in report.mismatches})} of {report.replays} replay(s))"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        default="csa",
        choices=MODE_CHOICES,
        help="DSV4 layer type (default csa), dense: the paged dense decode (DeepSeek-V3 shapes: d_qk 576, page "
        f"{DENSE_SHAPE[1]}), or v32: DeepSeek-V3.2's sparse decode ({V32_SHAPE[0]} list entries a token over "
        f"{V32_SHAPE[2]} cache rows, 128 heads)",
    )
    parser.add_argument(
        "--seqlen",
        type=int,
        default=None,
        help=f"dense: cached keys per request (default {DENSE_SHAPE[0]}; {SMALL_DENSE_SHAPE[0]} with --small); "
        "variants draw shorter lengths",
    )
    parser.add_argument(
        "--batch", type=int, nargs="+", default=None, help="requests per graph, cycled over graphs (default 48 7 96 1)"
    )
    parser.add_argument(
        "--heads", type=int, default=None, help="query heads (default 64, --mode v32 128; 16 with --small)"
    )
    parser.add_argument("--s-q", type=int, default=1, help="query tokens per request (default 1)")
    parser.add_argument("--streams", type=int, default=2, help="replay streams (>= 2, default 2; --cpu: >= 1)")
    parser.add_argument("--graphs", type=int, default=None, help="captured graphs (default 4; 2 with --small)")
    parser.add_argument(
        "--replays",
        type=int,
        default=None,
        help=f"replays in total (default {DEFAULT_REPLAYS}; {SMALL_REPLAYS} --small)",
    )
    parser.add_argument("--variants", type=int, default=3, help="input sets per graph (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true", help="tiny shapes for compute-sanitizer runs")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 row caches instead of FP8 MODEL1 (dense and v32: instead of FP8 V3.2)",
    )
    parser.add_argument(
        "--fp8-tensor",
        action="store_true",
        help="dense: per-tensor FP8 rows (an engine's fp8 KV cache: 576 e4m3 codes, descale_k) instead of FP8 V3.2",
    )
    parser.add_argument("--no-indexer", action="store_true", help="CSA: random compressed indices, no indexer")
    parser.add_argument(
        "--splits",
        nargs="+",
        default=None,
        help="WAVEMLA_NUM_SPLITS per graph, cycled ('auto': the planner); default: auto 3 (auto 2 with "
        "--batch-invariant, where the count must divide the tiles per token), so the combine runs; with --mode "
        "dense or v32 the program slots (WAVEMLA_TARGET_CTAS) instead",
    )
    parser.add_argument("--batch-invariant", action="store_true", help="decode with batch_invariant=True")
    parser.add_argument("--noise-mm", type=int, default=None, help="noise matmul size (default 2048; 256 --small)")
    parser.add_argument("--check-every", type=int, default=250, help="rounds between host checks (default 250)")
    parser.add_argument("--no-graph", action="store_true", help="eager calls on the streams instead of graphs")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="run the harness eagerly through Triton's interpreter (slow at the default batches: add --small)",
    )
    parser.add_argument(
        "--share-metadata",
        action="store_true",
        help="negative control: every graph shares one metadata (one split workspace); with --splits 3 the "
        "overlapping replays race on it and mismatches are expected",
    )
    parser.add_argument(
        "--share-pool",
        action="store_true",
        help="negative control: every graph is captured into one memory pool, so temporaries of graphs replayed "
        "at the same time on different streams alias; mismatches are expected (graphs only: a usage error with "
        "--no-graph or --cpu)",
    )
    parser.add_argument(
        "--indexer-select",
        default="auto",
        choices=INDEXER_SELECTS,
        help="CSA: the lightning indexer's top-k select path (default auto: the one it picks; spread takes at most "
        "64 query tokens); a usage error where no graph runs the indexer (other modes, --no-indexer)",
    )
    parser.add_argument(
        "--index-k",
        default="fp8",
        choices=INDEX_K_FORMATS,
        help="CSA: the index-K rows the indexer reads: fp8 (default; 132 bytes, each row's scale after its codes) or "
        "mxfp4 (68 bytes, page-split, as SGLang's DeepSeek-V4 cache holds them)",
    )
    parser.add_argument(
        "--inject-flip", type=int, default=None, metavar="REPLAY", help="self-test: flip one output bit of a replay"
    )
    parser.add_argument(
        "--out-buffers",
        action="store_true",
        help="each replayed decode call writes a caller's out buffer (NaN-filled right before the call, inside the "
        "graph), as vLLM's DeepSeek-V4 decode passes its output; the eager references write none, so an element "
        "left unwritten is a mismatch",
    )


def run(args: argparse.Namespace) -> int:
    if args.cpu:
        from wavemla import config

        config.use_triton_interpreter()
    try:
        cfg = config_from_args(args)
    except ValueError as exc:
        print(f"wavemla stress: {exc}", file=sys.stderr)
        return 2
    print(
        f"wavemla stress: mode={cfg.mode} batch per graph={[cfg.batch_of(g) for g in range(cfg.graphs)]} "
        f"h={cfg.heads} graphs={cfg.graphs} "
        f"streams={cfg.streams} replays={cfg.replays} variants={cfg.variants} seed={cfg.seed}"
    )
    report = run_stress(cfg)
    print(summary(cfg, report))
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    from wavemla.cli import summary

    parser = argparse.ArgumentParser(prog="python -m wavemla.tools.stress", description=summary(__doc__))
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
