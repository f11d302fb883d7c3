"""Kernel-name rules that sort GPU kernels into decode components for ``wavemla trace``.

A rule is ``(name, component, pattern)``; ``pattern`` is a Python regular expression searched (not matched) in
the demangled kernel name, case-insensitively unless the rule says otherwise. Rules are tried in order and the
first match wins, so specific rules sit above generic ones:

- wavemla's own Triton kernels first (their prefixes are ours and cannot collide);
- communication before norms, so a fused all-reduce + RMSNorm kernel counts as communication;
- the DeepGEMM rules read the ``(deep_gemm::GemmType)N`` template argument, because DeepGEMM uses one
  kernel name for dense and grouped GEMMs: 0 Normal and 4 Batched are dense, 1/2/3/5/6 (M-grouped
  contiguous, M-grouped masked, K-grouped contiguous, M- and K-grouped contiguous with psum layout) are
  grouped, i.e. MoE experts; spelled by name, any ``Grouped`` type is grouped (DeepGEMM v1 named them
  ``GroupedContiguous`` / ``GroupedMasked``);
- the indexer before attention and MoE before sampling, since all three use ``topk`` in kernel names;
- GEMM rules after the MoE rules (grouped GEMMs are MoE), quantization and elementwise last.

Events whose category is ``gpu_memcpy`` / ``gpu_memset`` are ``memcpy`` whatever their name; a kernel no rule
matches is ``other`` and is listed by total time so a rule can be added for it.

User rules come from a JSON or TOML file and are tried before the defaults (or replace them)::

    {"rules": [{"component": "attention", "pattern": "^my_decode_kernel", "name": "my-attn"}],
     "replace_defaults": false}

>>> rules = RuleSet(default_rules())
>>> rules.classify("void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8>>()")
'attention'
>>> rules.classify("void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 7168u, (deep_gemm::GemmType)1, false>()")
'moe'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Reported in this order; rules may add components, which go before "other".
COMPONENTS: tuple[str, ...] = (
    "attention",
    "indexer",
    "moe",
    "dense_gemm",
    "communication",
    "norm_elementwise",
    "quantization",
    "sampling",
    "memcpy",
    "other",
)
OTHER = "other"
MEMCPY = "memcpy"

_COMPONENT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Rule:
    """One classification rule: kernels whose name contains a match of ``pattern`` belong to ``component``."""

    name: str
    component: str
    pattern: str
    case_sensitive: bool = False
    source: str = "default"
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"rule {self.name!r} ({self.source})"
        if not _COMPONENT_NAME.match(self.component):
            raise ValueError(f"{where}: component {self.component!r} must be lower_snake_case, e.g. 'attention'")
        if not self.pattern:
            raise ValueError(f"{where}: empty pattern")
        try:
            compiled = re.compile(self.pattern, 0 if self.case_sensitive else re.IGNORECASE)
        except re.error as e:
            raise ValueError(f"{where}: invalid regular expression {self.pattern!r}: {e}") from None
        object.__setattr__(self, "regex", compiled)

    def matches(self, kernel_name: str) -> bool:
        return self.regex.search(kernel_name) is not None


def _rule(name: str, component: str, *alternatives: str) -> Rule:
    return Rule(name=name, component=component, pattern="|".join(alternatives))


# The name patterns follow FlashMLA / FlashInfer / DeepGEMM kernel names, SGLang and vLLM Triton kernels,
# cuBLAS (nvjet), CUTLASS and NCCL names as they appear in Kineto traces of DeepSeek decode.
_DEFAULT_RULES: tuple[Rule, ...] = (
    # wavemla's own Triton kernels: _sparse_mla_*, _mla_*, _sparse_prefill_* and _indexer_* prefixes, and the sparse
    # decode's q conversion (_q_to_f16_kernel, launched before the split kernel for 64-head plans). The sparse
    # prefill's names must be taken here: the elementwise rule's "fill_kernel" would take "_sparse_prefill_kernel".
    _rule("wavemla-indexer", "indexer", r"(?:^|[^a-z0-9])_indexer_"),
    _rule(
        "wavemla-attention",
        "attention",
        r"(?:^|[^a-z0-9])_sparse_mla_",
        r"(?:^|[^a-z0-9])_mla_",
        r"(?:^|[^a-z0-9])_sparse_prefill_",
        r"(?:^|[^a-z0-9])_q_to_f16_kernel",
    ),
    # Collectives: NCCL/RCCL, custom and fused all-reduce (incl. all-reduce + RMSNorm), DeepEP dispatch and
    # combine (by its namespace: SGLang's deepep_* Triton kernels only permute tokens locally, and are MoE)
    _rule("nccl", "communication", r"nccl", r"rccl", r"mscclpp"),
    _rule(
        "collective",
        "communication",
        r"all_?reduce",
        r"cross_device_reduce",
        r"all_?gather",
        r"reduce_?scatter",
        r"all_?to_?all",
        r"lamport",
    ),
    _rule("deepep", "communication", r"deep_ep::", r"internode_ll::", r"intranode::", r"internode::"),
    # DeepGEMM: the paged MQA-logits kernels serve the DSA lightning indexer; GEMMs split by GemmType.
    _rule("deepgemm-mqa-logits", "indexer", r"mqa_logits", r"clean_logits"),
    _rule(
        "deepgemm-grouped",
        "moe",
        r"\(deep_gemm::GemmType\)\s*[12356](?![0-9])",
        r"deep_gemm::GemmType::[a-z]*Grouped",
    ),
    _rule(
        "deepgemm-dense",
        "dense_gemm",
        r"\(deep_gemm::GemmType\)\s*[04](?![0-9])",
        r"deep_gemm::GemmType::(?:Normal|Batched)\b",
    ),
    # A GemmType this table does not know: leave it in "other" so it is listed, not silently guessed.
    _rule("deepgemm-unknown-type", OTHER, r"\(deep_gemm::GemmType\)\s*[0-9]+", r"deep_gemm::GemmType::"),
    # DSA sparse indexer: score, top-k selection and the Hadamard rotation of its q/k.
    _rule(
        "indexer",
        "indexer",
        r"indexer",
        r"index_score",
        r"_topk_index",
        # vLLM's top-k kernels are camel-cased (topKPerRowDecode, topKPerRowPrefill); sgl-kernel's plain one is
        # named topk_kernel and known by its FastTopKParams argument
        r"top_?k_?per_?row",
        r"topk_transform",
        r"fast_?topk",
        r"hadamard",
        r"fp8_index",
        # vLLM's DeepSeek-V4: the CSA layer's top-k picks mapped to global cache slots (and packed, on ROCm), with
        # their count; the indexer's logits upcast; the picks of a context shorter than top-k (every row)
        r"global_topk",
        r"compute_topk_lens",
        r"_upcast_logits_kernel",
        r"short_context_topk",
        # SGLang's DeepSeek-V4 FP4 indexer (kernels/ops/attention/dsv4/fp4_indexer.py and
        # kvcache/dsv4_fp4_index_k_cache.py): its score kernels, q and k packing, index-K cache writes and gathers,
        # and the picks mapped to slots; the DSA index-K pool (srt/layers/attention/dsa/kpool_fp8_index.py) and its
        # picks mapped to page tables
        r"index_logits",
        r"fp4_index",
        r"(?:^|[^a-z0-9])index_[kq]_",
        r"selection_slots",
        r"kpool_(?!kernel)",
        r"transform_index_page_table",
    ),
    # Attention: FlashMLA, FlashInfer, Triton decode attention (SGLang/vLLM), TRT-LLM FMHA, cuDNN SDPA, KV-cache writes.
    _rule(
        "attention",
        "attention",
        r"flash_?mla",
        r"flash_fwd",
        r"flash::",
        r"\bsm\d+::(?:decode|prefill|fwd)",
        r"_mla_",
        r"\bmla\b",
        r"batchmla",
        r"flashinfer::.*(?:attention|decode|prefill|mla)",
        r"batch(?:decode|prefill)with",
        r"single(?:decode|prefill)with",
        r"merge_?state",
        r"attention",
        r"attn",
        r"mha",
        # cuDNN's fused attention, which PyTorch's scaled_dot_product_attention runs on its cuDNN backend
        # (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_...)
        r"sdpa",
        r"_fwd_grouped_kernel_stage",
        r"_fwd_kernel_stage",
        r"sparse_decode",
        r"reshape_and_cache",
        r"concat_and_cache",
        r"store_kvcache",
        # vLLM's MLA read of cached KV rows for a chunked prefill's context (csrc/cache_kernels.cu); its "dequant"
        # would make it quantization
        r"gather_and_maybe_dequant_cache",
        r"kv_?compress",
        r"compressor",
        # vLLM's DeepSeek-V4 cache kernels (above quantization and sampling, whose `quant` / `topk` they contain):
        # the FP8 row write, the gather and decode of rows for sparse prefill, and the window + compressed index
        # lists of a sparse call
        r"quantize_and_insert_k",
        r"dequantize_and_gather_k",
        r"topk_swa_indices",
        r"mixed_sparse_indices",
        # SGLang's DeepSeek-V4 (kernels/ops/attention/dsv4, kernels/ops/kvcache): the Triton decode's split-K combine,
        # the paged decode over the unified KV pool, the per-step attention metadata and index lists, the cache row
        # writes (FP8 rows and scales, the window scatter, the normalized and rotated KV store, window row copies)
        # and the row dequantization for prefill. `_set_k_and_s_triton_kernel` is also the name of SGLang's DSA
        # (V3.2) index-K cache write; here it counts as the V4 main cache's.
        r"combine_splitk",
        r"^_combine$",
        r"paged_decode",
        r"attn_metadata",
        r"compressed_indices",
        r"low_ratio_metadata",
        r"swa_page_indices",
        r"page_table_positions",
        r"small_page_table",
        r"dsa_(?:decode|draft_extend|target_verify)_metadata",
        r"set_k_and_s_triton",
        r"swa_scatter",
        r"scatter_loc",
        r"kv_norm_rope",
        r"packed_rows",
        r"dequantize_k_cache",
        r"dequant_requant",
        r"cast_kv",
    ),
    # MoE: routing/gating, token permutation, fused and grouped expert GEMMs, the expert activation.
    _rule(
        "moe",
        "moe",
        r"moe",
        r"expert",
        r"topk_?gating",
        r"topk_softmax",
        r"grouped_topk",
        r"gating",
        r"router",
        r"routing",
        r"grouped_?gemm",
        r"group_gemm",
        r"groupproblemshape",
        r"ep_scatter",
        r"ep_gather",
        r"expandinputrows",
        r"count_and_sort",
        r"align_block_size",
        r"act_and_mul",
        r"silu_and_mul",
        r"gelu_and_mul",
        r"swiglu",
        # DeepSeek-V4's hash routing (SGLang: hash_topk) and SGLang's masking of padded tokens' expert ids
        r"hash_topk",
        r"dp_pad_topk_ids",
        # SGLang's token permutation for expert parallelism (layers/moe/ep_moe/kernels.py), with and without DeepEP
        r"deepep_",
        r"_reorder_triton",
        r"src2dst",
        r"seg_indptr",
        # vLLM's SiLU-and-multiply + FP8 quantization between the masked DeepGEMM expert GEMMs (its "deep_gemm"
        # would make it a dense GEMM), and trtllm-gen's routed batched GEMMs (bmm_*_dynBatch_*) of FlashInfer's
        # TRT-LLM MoE
        r"silu_mul_fp8_quant",
        r"\bbmm_\w*_dynbatch",
        # DeepSeek's grouped (noaux_tc) routing, once a layer: TRT-LLM's two kernels (vLLM's copies sit in vllm::moe::)
        # and its fused one, also in FlashInfer; their "topk" would otherwise make them sampling
        r"topk_with_k2",
        r"group_idx_and_topk_idx",
        r"deepseek_v3_topk",
    ),
    # Dense GEMM: cuBLAS (nvjet, xmma, gemv), CUTLASS, Triton / inductor matmuls, ROCm Tensile.
    _rule(
        "dense-gemm",
        "dense_gemm",
        r"nvjet",
        # CUTLASS GEMM kernels; not any kernel templated on a cutlass:: type (FlashMLA, quantizers are)
        r"cutlass::device_kernel",
        r"cutlass::kernel",
        r"cutlass3x",
        r"cutlass_\d+_tensorop",
        r"xmma",
        r"gemm",
        r"gemv",
        r"matmul",
        r"cublas",
        r"splitkreduce",
        r"scaled_mm",
        r"triton_tem_",
        r"\bbmm",
        r"cijk_",
    ),
    # Norms, and DeepSeek-V4's hyper-connection kernels named hc_* (SGLang's kernels/ops/layernorm/mhc*.py and
    # hc_combine_norm.py, one of which also quantizes its output)
    _rule(
        "norm",
        "norm_elementwise",
        r"rms_?norm",
        r"layer_?norm",
        r"norm_kernel",
        r"group_?norm",
        r"(?:^|[^a-z0-9])hc_",
    ),
    _rule(
        "quantization",
        "quantization",
        r"quant",
        r"fp8_",
        r"_fp8",
        r"float8",
        r"mxfp",
        r"nvfp4",
        r"e4m3",
        r"e2m1",
        r"ue8m0",
    ),
    # Sampling after MoE and the indexer: its top-k / softmax names would otherwise catch their kernels.
    _rule(
        "sampling",
        "sampling",
        r"sampling",
        r"sampler",
        r"argmax",
        r"top_?k",
        r"top_?p",
        r"min_?p",
        r"multinomial",
        r"gumbel",
        r"exponential_",
        r"penalt",
        r"softmax",
        r"radixsort",
    ),
    _rule(
        "elementwise",
        "norm_elementwise",
        r"elementwise",
        r"reduce_kernel",
        r"catarray",
        r"copy_kernel",
        r"fill_kernel",
        r"index_select",
        r"indexselect",
        r"gather",
        r"scatter",
        r"rotary",
        r"rope",
        r"embedding",
        r"sinkhorn",
        r"mhc_",
        r"hyper_?conn",
        r"triton_(?:poi|red|per)_",
        r"at::native::",
    ),
    _rule("memcpy-kernel", "memcpy", r"memcpy", r"memset"),
)


def default_rules() -> list[Rule]:
    """The built-in ordered rule list (a fresh list; the rules themselves are immutable)."""
    return list(_DEFAULT_RULES)


class RuleSet:
    """Ordered rules with a per-name cache; :meth:`classify` returns the first matching rule's component."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        extra = [r.component for r in self.rules if r.component not in COMPONENTS]
        self.components: tuple[str, ...] = (
            *COMPONENTS[:-1],
            *dict.fromkeys(extra),
            OTHER,
        )
        self._cache: dict[str, Rule | None] = {}

    def match(self, kernel_name: str) -> Rule | None:
        """The first rule whose pattern occurs in ``kernel_name``, or None."""
        try:
            return self._cache[kernel_name]
        except KeyError:
            pass
        found = next((r for r in self.rules if r.matches(kernel_name)), None)
        self._cache[kernel_name] = found
        return found

    def classify(self, kernel_name: str) -> str:
        """The component of a kernel (``"other"`` when no rule matches)."""
        rule = self.match(kernel_name)
        return OTHER if rule is None else rule.component


_RULE_KEYS = {"name", "component", "pattern", "case_sensitive"}
_FILE_KEYS = {"rules", "replace_defaults"}


def _parse_rule_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: rules file not found") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read rules file: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: rules file is not UTF-8 text") from None
    if path.suffix.lower() == ".toml":
        try:
            import tomllib  # Python >= 3.11
        except ModuleNotFoundError:
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ModuleNotFoundError:
                raise ValueError(
                    f"{path}: reading TOML needs Python 3.11+ or the 'tomli' package; write the rules as JSON"
                ) from None
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: not valid TOML: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        except RecursionError:
            raise ValueError(f"{path}: not valid JSON (nested too deeply to parse)") from None
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object with a 'rules' list")
    return data


def load_rules(path: str | Path) -> tuple[list[Rule], bool]:
    """Read user rules from a JSON or TOML file (TOML by the ``.toml`` suffix).

    The file holds ``rules`` (a list of ``{component, pattern, name?, case_sensitive?}``) and optionally
    ``replace_defaults`` (bool, default false); a bare JSON list is taken as the rule list. Returns the
    rules in file order and the ``replace_defaults`` flag. Raises ValueError naming the file and the rule
    on any problem.
    """
    path = Path(path)
    data = _parse_rule_file(path)
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_FILE_KEYS)}")
    entries = data.get("rules")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: 'rules' must be a non-empty list of {{component, pattern}} entries")
    replace = data.get("replace_defaults", False)
    if not isinstance(replace, bool):
        raise ValueError(f"{path}: 'replace_defaults' must be true or false, not {replace!r}")
    rules: list[Rule] = []
    for i, entry in enumerate(entries):
        where = f"{path}: rule #{i + 1}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object with 'component' and 'pattern', got {entry!r}")
        bad = set(entry) - _RULE_KEYS
        if bad:
            raise ValueError(f"{where}: unknown key(s) {sorted(bad)}; allowed: {sorted(_RULE_KEYS)}")
        component, pattern = entry.get("component"), entry.get("pattern")
        if not isinstance(component, str) or not isinstance(pattern, str):
            raise ValueError(f"{where}: 'component' and 'pattern' must both be strings")
        name = entry.get("name", f"user-{i + 1}")
        case_sensitive = entry.get("case_sensitive", False)
        if not isinstance(name, str) or not isinstance(case_sensitive, bool):
            raise ValueError(f"{where}: 'name' must be a string and 'case_sensitive' a boolean")
        rules.append(
            Rule(
                name=name,
                component=component,
                pattern=pattern,
                case_sensitive=case_sensitive,
                source=str(path),
            )
        )
    return rules, replace


def build_ruleset(rule_files: Iterable[str | Path] = ()) -> RuleSet:
    """User rules from each file (earlier files first), then the defaults unless a file replaces them."""
    user: list[Rule] = []
    keep_defaults = True
    for path in rule_files:
        rules, replace = load_rules(path)
        user.extend(rules)
        keep_defaults = keep_defaults and not replace
    return RuleSet(user + (default_rules() if keep_defaults else []))
