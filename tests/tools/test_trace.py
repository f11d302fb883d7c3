"""Tests for ``wavemla trace``: classification, interval math, trace errors, slope fits and the CLI."""

from __future__ import annotations

import argparse
import doctest
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wavemla import cli
from wavemla.tools import trace, trace_rules
from wavemla.tools.trace import StepSpec, TraceInput, analyze, fit_line, interval_stats, profile_trace
from wavemla.tools.trace_rules import RuleSet, build_ruleset, default_rules, load_rules

DATA = Path(__file__).parent / "data"
DOCS = Path(__file__).parents[2] / "docs" / "trace.md"
RULES = RuleSet(default_rules())

# -------------------------------------------------------------------------------------- classification

FLASHMLA = (
    "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, "
    "cutlass::bfloat16_t, 512>, true, SharedStorageMLA<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, "
    "cutlass::bfloat16_t, 512> > >"
    "(Flash_fwd_mla_params)"
)


def deepgemm(gemm_type: int) -> str:
    return (
        "void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 4096u, 7168u, 256u, 128u, 128u, 128u, 1u, 5u, 128u, "
        "1u, 1u, "
        f"(deep_gemm::GemmType){gemm_type}, false, (deep_gemm::KernelType)1>(float*, int*, unsigned int, "
        "CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap)"
    )


NAMES = [
    # attention
    pytest.param(FLASHMLA, "attention", id="flashmla-splitkv"),
    pytest.param(
        "void flash::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, 512, 64, 8>(Flash_fwd_mla_params)",
        "attention",
        id="flashmla-combine",
    ),
    pytest.param(
        "void sm90::decode::sparse_fp8::flash_fwd_splitkv_mla_fp8_sparse_kernel<64, true>(DecodingParams)",
        "attention",
        id="flashmla-sparse-fp8",
    ),
    pytest.param(
        "void flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<KernelTraits, Params>(Params)",
        "attention",
        id="flashinfer-mla",
    ),
    pytest.param(
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u>(Params)",
        "attention",
        id="flashinfer-decode",
    ),
    # cuDNN's fused attention under torch's scaled_dot_product_attention (transformers serve on an H100)
    pytest.param(
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x192_4x1x1_cga1x1x1_kernel0_0",
        "attention",
        id="cudnn-sdpa-sm90",
    ),
    pytest.param(
        "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x256_4x1x1_cga1x1x1_kernel0_0",
        "attention",
        id="cudnn-sdpa-sm80",
    ),
    pytest.param("_fwd_grouped_kernel_stage1", "attention", id="triton-sglang-stage1"),
    pytest.param("_fwd_kernel_stage2", "attention", id="triton-sglang-stage2"),
    # vLLM's DeepSeek-V4 Triton kernels (vllm/v1/attention/ops/deepseek_v4_ops/cache_utils.py and the layer's SM80
    # decode): cache writes and index lists are attention, the indexer's picks mapped to slots are the indexer
    pytest.param("quantize_and_insert_k_kernel", "attention", id="vllm-dsv4-cache-write"),
    pytest.param("_dequantize_and_gather_k_kernel", "attention", id="vllm-dsv4-gather"),
    pytest.param("_combine_topk_swa_indices_kernel", "attention", id="vllm-dsv4-prefill-lists"),
    pytest.param("_build_flashinfer_mixed_sparse_indices_kernel", "attention", id="vllm-dsv4-mixed-lists"),
    pytest.param("_dsv4_sm80_sparse_attn_split_kernel", "attention", id="vllm-dsv4-sm80-split"),
    pytest.param("_compute_global_topk_indices_and_lens_kernel", "indexer", id="vllm-dsv4-global-topk"),
    pytest.param("_pack_global_topk_ragged_kernel", "indexer", id="vllm-dsv4-rocm-pack-topk"),
    pytest.param("_compute_topk_lens_kernel", "indexer", id="vllm-dsv4-rocm-topk-lens"),
    pytest.param("_upcast_logits_kernel", "indexer", id="vllm-indexer-upcast"),
    pytest.param("fill_short_context_topk_indices", "indexer", id="vllm-dsv4-short-context"),
    pytest.param("_fused_kv_compress_norm_rope_insert_sparse_attn", "attention", id="vllm-dsv4-compress-insert"),
    # SGLang's DeepSeek-V4 Triton kernels, by the names in its source (kernels/ops/attention/dsv4,
    # kernels/ops/kvcache, kernels/ops/layernorm): the decode's combine and paged decode, per-step metadata, cache
    # writes and prefill dequantization are attention; the FP4 indexer's scores, packing, cache and picks are the
    # indexer; hash routing is MoE; the hyper-connection kernels are norm / elementwise
    pytest.param("_combine_splitk_kernel_8_optimized", "attention", id="sglang-dsv4-combine"),
    pytest.param("_combine", "attention", id="sglang-dsv4-sm100-combine"),
    pytest.param("_paged_decode_split_kernel", "attention", id="sglang-dsv4-paged-decode"),
    pytest.param("_init_compressed_attn_metadata_kernel", "attention", id="sglang-dsv4-metadata"),
    pytest.param("_causal_swa_page_indices_kernel", "attention", id="sglang-dsv4-swa-pages"),
    pytest.param("_set_k_and_s_triton_kernel", "attention", id="sglang-dsv4-row-write"),
    pytest.param("_swa_scatter_kernel", "attention", id="sglang-dsv4-window-scatter"),
    pytest.param("_kv_norm_rope_fp8_store", "attention", id="sglang-dsv4-kv-store"),
    pytest.param("_copy_packed_rows", "attention", id="sglang-dsv4-window-copy"),
    pytest.param("_dequantize_k_cache_paged_kernel", "attention", id="sglang-dsv4-dequant"),
    pytest.param("_fused_dsa_decode_metadata_kpool_kernel", "attention", id="sglang-dsa-metadata"),
    pytest.param("_fp4_index_logits_paged_kernel", "indexer", id="sglang-dsv4-fp4-scores"),
    pytest.param("_store_fp4_index_k_cache_kernel", "indexer", id="sglang-dsv4-index-k-write"),
    pytest.param("_index_k_rope_pack_kernel", "indexer", id="sglang-dsv4-index-k-pack"),
    pytest.param("_flat_selection_slots_kernel", "indexer", id="sglang-dsv4-slots"),
    pytest.param("_kpool_softmax_rotate_write_cache_kernel", "indexer", id="sglang-dsa-kpool"),
    pytest.param("transform_index_page_table_decode_kernel", "indexer", id="sglang-dsa-page-table"),
    pytest.param("_hash_topk_triton_kernel", "moe", id="sglang-dsv4-hash-routing"),
    pytest.param("_mask_dp_pad_topk_ids_kernel", "moe", id="sglang-dp-pad-topk-ids"),
    pytest.param("_hc_combine_norm_mxfp8_kernel", "norm_elementwise", id="sglang-dsv4-hc-norm"),
    pytest.param("_hc_mix_stats_partial_kernel", "norm_elementwise", id="sglang-dsv4-hc-stats"),
    pytest.param("_fused_norm_rope_kernel", "norm_elementwise", id="sglang-dsv4-norm-rope"),
    pytest.param("_tiled_sparse_decode_kernel_mh", "attention", id="triton-sm120-sparse"),
    pytest.param("_sparse_mla_decode_kernel", "attention", id="wavemla-sparse-decode"),
    pytest.param("_sparse_mla_decode_ws_kernel", "attention", id="wavemla-sparse-decode-ws"),
    pytest.param("_dense_mla_decode_ws_kernel", "attention", id="wavemla-dense-decode-ws"),
    pytest.param("_sparse_prefill_kernel", "attention", id="wavemla-sparse-prefill"),
    pytest.param("_sparse_prefill_combine_kernel", "attention", id="wavemla-sparse-prefill-combine"),
    pytest.param("_mla_v32_lists_kernel", "attention", id="wavemla-v32-lists"),
    pytest.param("_mla_sink_scale_kernel", "attention", id="wavemla-sink-scale"),
    pytest.param("_mla_mask_lists_kernel", "attention", id="wavemla-mask-lists"),
    pytest.param("_q_to_f16_kernel", "attention", id="wavemla-q-conversion"),
    pytest.param("_mla_combine_kernel", "attention", id="wavemla-combine"),
    pytest.param(
        "void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>()",
        "attention",
        id="kv-cache-write",
    ),
    # indexer
    pytest.param("_indexer_logits_kernel", "indexer", id="wavemla-indexer"),
    pytest.param("_decode_index_score_kernel", "indexer", id="triton-index-score"),
    pytest.param("_topk_index_kernel", "indexer", id="triton-topk-index"),
    pytest.param(
        "void deep_gemm::sm90_fp8_paged_mqa_logits<64u, 128u, 64u, 2u, 4u, 128u>(unsigned int, float*)",
        "indexer",
        id="deepgemm-paged-mqa-logits",
    ),
    pytest.param("void vllm::top_k_per_row_decode<1024>(float const*, int*)", "indexer", id="vllm-topk-per-row"),
    # moe
    pytest.param("fused_moe_kernel", "moe", id="triton-fused-moe"),
    pytest.param("void moe_align_block_size_kernel<int>(int const*, int*)", "moe", id="moe-align"),
    pytest.param("void vllm::moe::topkGatingSoftmax<8, 256, 4, 16, int>(float const*)", "moe", id="topk-gating"),
    pytest.param("_fwd_kernel_ep_scatter_2", "moe", id="ep-scatter"),
    # DeepSeek's grouped (noaux_tc) routing: TRT-LLM's two-kernel path (vLLM's copy sits in vllm::moe::) and its
    # fused kernel (FlashInfer's too)
    pytest.param(
        "void tensorrt_llm::kernels::topk_with_k2_kernel<float>(float*, float*, long, long, long)", "moe", id="topk-k2"
    ),
    pytest.param(
        "void tensorrt_llm::kernels::group_idx_and_topk_idx_kernel<float>(float*, float const*, float*, long)",
        "moe",
        id="group-topk-idx",
    ),
    pytest.param(
        "void tensorrt_llm::kernels::deepseek_v3_topk_kernel<float, float, float, int, 256, true>()",
        "moe",
        id="deepseek-v3-topk",
    ),
    pytest.param(
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>()",
        "moe",
        id="expert-activation",
    ),
    pytest.param(
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape"
        "<cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<> > >(Params)",
        "moe",
        id="cutlass-grouped",
    ),
    # dense GEMM
    pytest.param("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "dense_gemm", id="nvjet-tst"),
    pytest.param("nvjet_hsh_192x128_64x5_2x1_v_bz_coopB_NTN", "dense_gemm", id="nvjet-hsh"),
    pytest.param(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
        "_kernel__5x_cublas",
        "dense_gemm",
        id="cublas-xmma",
    ),
    pytest.param(
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<> > >(Params)",
        "dense_gemm",
        id="cutlass-dense",
    ),
    pytest.param("_w8a8_block_fp8_matmul", "dense_gemm", id="triton-w8a8-matmul"),
    pytest.param(
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>()",
        "dense_gemm",
        id="cutlass-kernel2",
    ),
    pytest.param(
        "cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_void_bf16_128x128x64_1x1x1_0_tnn_align8",
        "dense_gemm",
        id="cutlass3x",
    ),
    # communication
    pytest.param(
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "communication",
        id="nccl-allreduce",
    ),
    pytest.param("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", id="nccl-ag"),
    pytest.param(
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        "communication",
        id="custom-allreduce",
    ),
    pytest.param(
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<RMSNorm, bf16>()",
        "communication",
        id="fused-allreduce-rmsnorm",
    ),
    pytest.param("void deep_ep::internode_ll::dispatch<false, 7168>(void*)", "communication", id="deepep-dispatch"),
    # norm / elementwise
    pytest.param("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, float, int)", "norm_elementwise", id="rms"),
    pytest.param("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>()", "norm_elementwise", id="add-rms"),
    pytest.param("rmsnorm_kernel", "norm_elementwise", id="rmsnorm"),
    pytest.param(
        "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>()",
        "norm_elementwise",
        id="fi-rmsnorm",
    ),
    pytest.param("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm_elementwise", id="inductor-red"),
    pytest.param(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        "norm_elementwise",
        id="aten-elementwise",
    ),
    # quantization
    pytest.param("_per_token_group_quant_fp8", "quantization", id="triton-group-quant"),
    pytest.param("void scaled_quantize_kernel<cutlass::float_e4m3_t, cutlass::bfloat16_t>(void*)", "quantization"),
    pytest.param("void per_token_group_quant_8bit_kernel<__nv_bfloat16, c10::Float8_e4m3fn>()", "quantization"),
    # sampling
    pytest.param(
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
        "unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, "
        "long, 4>)",
        "sampling",
        id="aten-argmax",
    ),
    pytest.param(
        "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)1>()",
        "sampling",
        id="flashinfer-sampling",
    ),
    # SGLang's MoE token permutation around DeepEP (python/sglang/srt/layers/moe/ep_moe/kernels.py): local Triton
    # kernels, not collectives; and the same file's permutation without DeepEP
    pytest.param("deepep_permute_triton_kernel", "moe", id="sglang-deepep-permute"),
    pytest.param("deepep_post_reorder_triton_kernel", "moe", id="sglang-deepep-unpermute"),
    pytest.param("deepep_compute_src2dst_triton_kernel", "moe", id="sglang-deepep-src2dst"),
    pytest.param("pre_reorder_triton_kernel", "moe", id="sglang-ep-pre-reorder"),
    pytest.param("post_reorder_triton_kernel", "moe", id="sglang-ep-post-reorder"),
    pytest.param("compute_src2dst_triton_kernel", "moe", id="sglang-ep-src2dst"),
    pytest.param("compute_seg_indptr_triton_kernel", "moe", id="sglang-ep-seg-indptr"),
    # DeepEP's own kernels, in namespace deep_ep (csrc/kernels/*.cu and the elastic JIT kernels), stay communication
    pytest.param(
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, int)",
        "communication",
        id="deepep-notify",
    ),
    pytest.param(
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int)",
        "communication",
        id="deepep-layout",
    ),
    pytest.param(
        "void deep_ep::elastic::dispatch_impl<true, 3, false, false, 132, 4, 14, 8, 7168, 56, 256, 256, 8, 1, 0, "
        "100000000000>(void*)",
        "communication",
        id="deepep-elastic-dispatch",
    ),
    # vLLM's SiLU-and-multiply + FP8 quantization between the two masked DeepGEMM expert GEMMs (Triton in
    # vllm/model_executor/layers/fused_moe/batched_deep_gemm_moe.py, CUDA in csrc/quantization/activation_kernels.cu)
    pytest.param("_silu_mul_fp8_quant_deep_gemm", "moe", id="vllm-masked-moe-act-triton"),
    pytest.param(
        "void vllm::silu_mul_fp8_quant_deep_gemm_kernel<c10::Float8_e4m3fn, 4, long, 64, false, 128, 3>("
        "__nv_bfloat16 const*, c10::Float8_e4m3fn*, float*, int const*, int, int, long, long, long, long, long, long, "
        "long, long, long, long)",
        "moe",
        id="vllm-masked-moe-act-cuda",
    ),
    # The DSA indexer's top-k: vLLM's kernels (csrc/sampler.cu, names camel-cased) and sgl-kernel's
    # (sgl-kernel/csrc/elementwise/topk.cu, whose plain top-k kernel is named only by its parameter struct)
    pytest.param(
        "void vllm::topKPerRowDecode<512>(float const*, int const*, int*, int, int, int)",
        "indexer",
        id="vllm-topk-per-row-decode",
    ),
    pytest.param(
        "void vllm::topKPerRowPrefill<512, true>(float const*, int const*, int const*, int*, int, int, int, int)",
        "indexer",
        id="vllm-topk-per-row-prefill",
    ),
    pytest.param(
        "(anonymous namespace)::topk_kernel((anonymous namespace)::FastTopKParams)",
        "indexer",
        id="sgl-kernel-fast-topk",
    ),
    # trtllm-gen batched GEMMs of FlashInfer's TRT-LLM MoE: routed ("dynBatch") expert GEMMs, named bmm_*
    pytest.param(
        "bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s8_et64x8_m64x8x32_cga1x1x1_16dp256b_TN_transOut_noShflA_dsFp8_schedS_bN_"
        "ldgsts_clmp_dynBatch_sm100a",
        "moe",
        id="trtllm-gen-moe-fc1",
    ),
    pytest.param(
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x64x256_s3_et128x64_m128x64x32_cga1x1x1_16dp256b_TN_transOut_schedS_biasM_bN_"
        "ldgsts_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
        "moe",
        id="trtllm-gen-moe-mxfp4",
    ),
    # vLLM's MLA gather of cached KV rows for a chunked prefill's context (csrc/cache_kernels.cu)
    pytest.param(
        "void vllm::gather_and_maybe_dequant_cache<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1, 576, "
        "8>(unsigned char const*, __nv_bfloat16*, int const*, int const*, int const*, int, int, long, long, "
        "float const*, int const*)",
        "attention",
        id="vllm-mla-context-gather",
    ),
    # Sampling keeps its top-k
    pytest.param(
        "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, "
        "unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int)",
        "sampling",
        id="aten-topk",
    ),
    # unknown
    pytest.param("my_fused_mystery_kernel", "other", id="unknown"),
]


@pytest.mark.parametrize(("name", "component"), NAMES)
def test_classify_real_kernel_names(name: str, component: str) -> None:
    assert RULES.classify(name) == component, RULES.match(name)


@pytest.mark.parametrize(
    ("gemm_type", "component"),
    [
        pytest.param(0, "dense_gemm", id="0-normal"),
        pytest.param(1, "moe", id="1-m-grouped-contiguous"),
        pytest.param(2, "moe", id="2-m-grouped-masked"),
        pytest.param(3, "moe", id="3-k-grouped-contiguous"),
        pytest.param(4, "dense_gemm", id="4-batched"),
        pytest.param(5, "moe", id="5-m-grouped-contiguous-psum"),
        # deep_gemm/include/deep_gemm/common/types.cuh: KGroupedContiguousWithPsumLayout = 6
        pytest.param(6, "moe", id="6-k-grouped-contiguous-psum"),
        pytest.param(7, "other", id="7-unknown-listed"),
        pytest.param(12, "other", id="12-not-read-as-1"),
    ],
)
def test_deepgemm_split_by_gemm_type(gemm_type: int, component: str) -> None:
    assert RULES.classify(deepgemm(gemm_type)) == component


def deepgemm_named(gemm_type: str) -> str:
    return (
        "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 64u, 128u, 128u, 8u, 5u, 1u, "
        f"deep_gemm::GemmType::{gemm_type}>(__nv_bfloat16*, float*, int*, unsigned int)"
    )


@pytest.mark.parametrize(
    ("gemm_type", "component"),
    [
        # DeepGEMM v1 (deep_gemm/include/deep_gemm/scheduler.cuh): Normal, GroupedContiguous, GroupedMasked
        pytest.param("Normal", "dense_gemm", id="v1-normal"),
        pytest.param("GroupedContiguous", "moe", id="v1-grouped-contiguous"),
        pytest.param("GroupedMasked", "moe", id="v1-grouped-masked"),
        # current names
        pytest.param("MGroupedMasked", "moe", id="m-grouped-masked"),
        pytest.param("KGroupedContiguousWithPsumLayout", "moe", id="k-grouped-psum"),
        pytest.param("Batched", "dense_gemm", id="batched"),
        # a name this table does not know is listed, not guessed dense by "gemm"
        pytest.param("SomethingNew", "other", id="unknown-name"),
    ],
)
def test_deepgemm_gemm_type_by_enum_name(gemm_type: str, component: str) -> None:
    name = deepgemm_named(gemm_type)
    assert RULES.classify(name) == component, RULES.match(name)


def test_rules_are_named_uniquely_and_documented() -> None:
    names = [r.name for r in default_rules()]
    assert len(names) == len(set(names))
    text = DOCS.read_text()
    missing = [n for n in names if f"`{n}`" not in text]
    assert not missing, f"docs/trace.md lacks rules {missing}"


def test_rule_validation_names_the_rule() -> None:
    with pytest.raises(ValueError, match=r"rule 'bad'.*invalid regular expression"):
        trace_rules.Rule(name="bad", component="moe", pattern="(unclosed")
    with pytest.raises(ValueError, match=r"lower_snake_case"):
        trace_rules.Rule(name="bad", component="MoE", pattern="x")


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_user_rules_take_precedence_and_add_components(suffix: str) -> None:
    rules = build_ruleset([DATA / f"extra_rules{suffix}"])
    assert rules.classify("my_fused_mystery_kernel") == "moe"
    argmax = NAMES[[p.id for p in NAMES].index("aten-argmax")].values[0]
    assert rules.classify(argmax) == "postprocess"
    assert rules.classify("argmaxops_lowercase") == "sampling"  # the user rule is case-sensitive
    assert rules.components[-2:] == ("postprocess", "other")
    assert rules.classify(FLASHMLA) == "attention"  # defaults still follow


def test_user_rules_can_replace_defaults(tmp_path: Path) -> None:
    path = tmp_path / "only.json"
    path.write_text(json.dumps({"rules": [{"component": "attention", "pattern": "mla"}], "replace_defaults": True}))
    rules = build_ruleset([path])
    assert rules.classify(FLASHMLA) == "attention"
    assert rules.classify("fused_moe_kernel") == "other"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{", r"not valid JSON", id="garbage"),
        pytest.param("[" * 100_000 + "]" * 100_000, r"nested too deeply", id="deeply-nested"),
        pytest.param('{"rules": []}', r"non-empty list", id="empty-list"),
        pytest.param('{"rules": [{"component": "moe"}]}', r"rule #1: 'component' and 'pattern'", id="no-pattern"),
        pytest.param('{"rules": [{"component": "moe", "pattern": "[x"}]}', r"invalid regular expression", id="regex"),
        pytest.param('{"rules": [{"component": "moe", "pattern": "x", "color": 1}]}', r"unknown key", id="rule-key"),
        pytest.param('{"rule": []}', r"unknown key", id="file-key"),
        pytest.param('{"rules": [{"component": "m", "pattern": "x"}], "replace_defaults": 1}', r"true or false"),
    ],
)
def test_bad_rules_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "rules.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        load_rules(path)
    assert str(path) in str(err.value)


# --------------------------------------------------------------------------------------- interval math


@pytest.mark.parametrize(
    ("intervals", "busy", "concurrent", "total"),
    [
        pytest.param([], 0.0, 0.0, 0.0, id="none"),
        pytest.param([(0, 10)], 10.0, 0.0, 10.0, id="one"),
        pytest.param([(0, 10), (10, 20)], 20.0, 0.0, 20.0, id="touching-is-not-overlap"),
        pytest.param([(0, 10), (2, 5)], 10.0, 3.0, 13.0, id="nested"),
        pytest.param([(0, 10), (0, 10), (0, 10)], 10.0, 10.0, 30.0, id="identical-x3"),
        pytest.param([(5, 15), (0, 10), (30, 31)], 16.0, 5.0, 21.0, id="unsorted-with-gap"),
        pytest.param([(0, 0), (3, 3)], 0.0, 0.0, 0.0, id="zero-length"),
    ],
)
def test_interval_stats(intervals: list[tuple[float, float]], busy: float, concurrent: float, total: float) -> None:
    stats = interval_stats([s for s, _ in intervals], [e for _, e in intervals])
    assert (stats.busy, stats.concurrent, stats.total) == (busy, concurrent, total)


def test_interval_stats_matches_a_brute_force_grid() -> None:
    rng = np.random.default_rng(7)
    start = rng.integers(0, 1000, size=200)
    end = start + rng.integers(0, 60, size=200)
    cover = np.zeros(1100, dtype=int)
    for s, e in zip(start, end, strict=True):
        cover[s:e] += 1
    stats = interval_stats(start, end)
    assert stats.busy == (cover >= 1).sum()
    assert stats.concurrent == (cover >= 2).sum()


# ------------------------------------------------------------------------------------------ hand-built traces


def test_overlap_across_streams() -> None:
    p = profile_trace(DATA / "overlap_streams.json", 8, RULES, StepSpec())
    # attention on streams 7 and 13: [0,100] ∪ [50,120] ∪ [150,200]; NCCL on stream 20: [90,160]
    assert p.busy_ms == pytest.approx(0.200)
    assert p.kernel_sum_ms == pytest.approx(0.290)
    assert p.concurrent_ms == pytest.approx(0.080)
    assert p.components["attention"].busy_ms == pytest.approx(0.170)
    assert p.components["attention"].kernel_sum_ms == pytest.approx(0.220)
    assert p.components["communication"].busy_ms == pytest.approx(0.070)
    assert p.component_overlap_ms == pytest.approx(0.040)
    assert p.idle_ms == pytest.approx(0.0, abs=1e-9)
    assert p.streams == 3
    assert p.uncorrelated_kernels == 4  # correlation ids without any launch event in the trace


def test_graph_launched_kernels_and_annotations() -> None:
    p = profile_trace(DATA / "graph_decode_bs4.json", 4, RULES, StepSpec())
    expected = {
        "attention": 0.060,
        "moe": 0.100,
        "dense_gemm": 0.040,
        "communication": 0.080,
        "memcpy": 0.010,
        "sampling": 0.010,
        "other": 0.015,
        "indexer": 0.0,
        "norm_elementwise": 0.0,
        "quantization": 0.0,
    }
    assert {c: t.busy_ms for c, t in p.components.items()} == pytest.approx(expected)
    # The 400 µs and 200 µs GPU annotations are not kernel time: busy is the kernel union only.
    assert p.busy_ms == pytest.approx(0.235)
    assert p.kernel_sum_ms == pytest.approx(0.315)
    assert p.concurrent_ms == pytest.approx(0.080)
    assert p.idle_ms == pytest.approx(0.010)
    assert p.graph_kernels == 3
    assert p.uncorrelated_kernels == 2  # NCCL without correlation, memcpy whose launch is not in the trace
    assert p.unclassified == {"my_fused_mystery_kernel": (1, 15.0)}
    assert p.steps == 1 and p.step_source == "whole"


def test_gz_reads_like_json() -> None:
    plain = profile_trace(DATA / "graph_decode_bs4.json", 4, RULES, StepSpec())
    packed = profile_trace(DATA / "graph_decode_bs4.json.gz", 4, RULES, StepSpec())
    assert packed.path.endswith(".json.gz")
    assert {**packed.__dict__, "path": "", "notes": ()} == {**plain.__dict__, "path": "", "notes": ()}
    assert [n.replace(packed.path, plain.path) for n in packed.notes] == list(plain.notes)


def test_step_marker_windows_kernels() -> None:
    p = profile_trace(DATA / "graph_decode_bs4.json", 4, RULES, StepSpec(marker=r"^decode_step$"))
    assert p.step_source == "marker" and p.steps == 1
    assert p.busy_ms == pytest.approx(0.235)
    assert p.span_ms == pytest.approx(0.400)  # the annotated step
    assert p.idle_ms == pytest.approx(0.165)


def _two_stream_steps(pid: Any = 0) -> dict[str, Any]:
    """Two decode steps, each an expert GEMM on stream 7 beside an all-reduce on stream 20, inside one
    ``record_function("decode_step")``: Kineto writes that range's GPU copy once per stream, the two copies with one
    External id (and no args.device). ``pid``: that of the GPU events (a merged SGLang profile relabels it)."""
    events: list[dict[str, Any]] = []
    for step in range(2):
        t, ext = 1000.0 * step, step + 1
        kernel = {"ph": "X", "cat": "kernel", "pid": pid}
        events += [
            {"ph": "X", "cat": "user_annotation", "name": "decode_step", "pid": 99, "tid": 99, "ts": t - 50, "dur": 10},
            {**kernel, "name": "fused_moe_kernel", "tid": 7, "ts": t, "dur": 100, "args": {"device": 0, "stream": 7}},
            {**kernel, "name": "ncclDevKernel_AllReduce", "tid": 20, "ts": t + 20, "dur": 50, "args": {"device": 0}},
        ]
        annotation = {"ph": "X", "cat": "gpu_user_annotation", "name": "decode_step", "pid": pid}
        events += [
            {**annotation, "tid": 7, "ts": t - 0.001, "dur": 100.002, "args": {"External id": ext}},
            {**annotation, "tid": 20, "ts": t + 20 - 0.001, "dur": 50.002, "args": {"External id": ext}},
        ]
    return {"traceEvents": events}


def test_step_marker_copies_on_two_streams_are_one_step(tmp_path: Path) -> None:
    p = profile_trace(_write(tmp_path / "tp_bs8.json", _two_stream_steps()), 8, RULES, StepSpec(marker="decode_step"))
    assert p.steps == 2
    assert p.components["moe"].busy_ms == pytest.approx(0.100)
    assert p.components["communication"].busy_ms == pytest.approx(0.050)
    assert p.span_ms == pytest.approx(0.100, abs=1e-5)
    # Without External ids the stream-20 copy still lies inside the stream-7 one: nested, the same step.
    data = _two_stream_steps()
    for e in data["traceEvents"]:
        if e["cat"] == "gpu_user_annotation":
            del e["args"]
    assert profile_trace(_write(tmp_path / "no_ids.json", data), 8, RULES, StepSpec(marker="decode_step")).steps == 2
    # ... while copies without ids that only overlap each other are separate ranges.
    for e in data["traceEvents"]:
        if e["cat"] == "gpu_user_annotation" and e["tid"] == 20:
            e["dur"] = 200.0
    assert profile_trace(_write(tmp_path / "no_ids2.json", data), 8, RULES, StepSpec(marker="decode_step")).steps == 4


def _gpu_step(name: str, ts: float, dur: float, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"External id": ext}}  # fmt: skip


def _gpu_kernel(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {"device": 0}}


def test_nested_step_markers_are_one_step(tmp_path: Path) -> None:
    """A regex that matches an outer range and one nested in it (or a range and its copy on another stream without
    an External id) finds one step, not two: a kernel can only be in one step."""
    events = []
    for t, ext in ((0.0, 1), (1000.0, 3)):
        events += [
            _gpu_step("decode_step", t, 100, ext),
            _gpu_step("decode_step_mtp", t + 40, 40, ext + 1),
            _gpu_kernel("fused_moe_kernel", t + 10, 50),
        ]
    p = profile_trace(_write(tmp_path / "nested.json", {"traceEvents": events}), 8, RULES, StepSpec(marker="step"))
    assert p.steps == 2
    assert p.components["moe"].busy_ms == pytest.approx(0.050)
    assert p.span_ms == pytest.approx(0.100)
    # The same on the CPU timeline (its markers only give the count), per host thread.
    cpu = [
        {**e, "cat": "user_annotation", "pid": 9, "tid": 9, "args": {}} if e["cat"] == "gpu_user_annotation" else e
        for e in events
    ]
    p = profile_trace(_write(tmp_path / "nested_cpu.json", {"traceEvents": cpu}), 8, RULES, StepSpec(marker="step"))
    assert p.steps == 2


def test_kernel_running_past_its_step_widens_the_span(tmp_path: Path) -> None:
    """A kernel that starts inside a step and ends after its marker is counted whole; the span covers it, so busy
    never exceeds the span and idle = span - busy."""
    events = [_gpu_step("decode_step", 0, 100, 1), _gpu_kernel("fused_moe_kernel", 50, 150)]
    p = profile_trace(_write(tmp_path / "past.json", {"traceEvents": events}), 8, RULES, StepSpec(marker="decode_step"))
    assert p.busy_ms == pytest.approx(0.150)
    assert p.span_ms == pytest.approx(0.200)
    assert p.idle_ms == pytest.approx(0.050)


def test_step_marker_in_a_merged_sglang_profile(tmp_path: Path) -> None:
    """SGLang's profile merger prefixes every pid with the rank ("[TP00] 0"); kernels keep args.device, GPU
    annotations have none: they are on the device of the kernels with their pid."""
    path = _write(tmp_path / "merged.json", _two_stream_steps(pid="[TP00] 0"))
    p = profile_trace(path, 8, RULES, StepSpec(marker="decode_step"))
    assert p.devices == ("0",) and p.steps == 2
    assert p.components["moe"].busy_ms == pytest.approx(0.100)


def test_cpu_step_markers_in_a_merged_profile_count_per_rank(tmp_path: Path) -> None:
    """A merged two-rank profile whose step markers are on the CPU only: each device counts the markers of its own
    rank (the label SGLang's merger puts before every pid), not every rank's."""
    events: list[dict[str, Any]] = []
    for rank, steps in ((0, 2), (1, 3)):
        label = f"[TP{rank:02d}]"
        for step in range(steps):
            t = 1000.0 * step
            events += [
                {"ph": "X", "cat": "user_annotation", "name": "decode_step", "pid": f"{label} 4242", "tid": 1,
                 "ts": t - 50, "dur": 10},
                {"ph": "X", "cat": "kernel", "name": "fused_moe_kernel", "pid": f"{label} {rank}", "tid": 7, "ts": t,
                 "dur": 100, "args": {"device": rank}},
            ]  # fmt: skip
    path = _write(tmp_path / "merged_cpu.json", {"traceEvents": events})
    p = profile_trace(path, 8, RULES, StepSpec(marker="decode_step"))
    assert p.devices == ("0", "1") and p.steps == 2.5  # (2 + 3) / 2 devices, not (5 + 5) / 2
    assert p.components["moe"].busy_ms == pytest.approx(0.100)  # 500 µs over 5 steps, not over 10
    assert any("[TP00] 2, [TP01] 3" in n for n in p.notes)
    one = profile_trace(path, 8, RULES, StepSpec(marker="decode_step"), device="1")
    assert one.steps == 3 and one.components["moe"].busy_ms == pytest.approx(0.100)
    # Unlabelled pids (one process's trace): every CPU marker counts for every device, as before. (Each rank's
    # markers keep a thread of their own: on one thread the two ranks' identical ranges would be one range.)
    for e in events:
        if e["cat"] != "kernel":
            e["tid"] = 1 + int(str(e["pid"])[3:5])
        e["pid"] = int(str(e["pid"]).split()[1]) if e["cat"] == "kernel" else 4242
    plain = profile_trace(_write(tmp_path / "plain_cpu.json", {"traceEvents": events}), 8, RULES,
                          StepSpec(marker="decode_step"))  # fmt: skip
    assert plain.steps == 5 and plain.components["moe"].busy_ms == pytest.approx(0.050)


def test_step_marker_that_matches_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"graph_decode_bs4.json: no annotation matches --step-marker"):
        profile_trace(DATA / "graph_decode_bs4.json", 4, RULES, StepSpec(marker="prefill"))


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        pytest.param("garbage.json", r"garbage.json: not valid JSON \(line 1, column 1", id="garbage"),
        pytest.param("empty.json", r"empty.json: empty file", id="empty-file"),
        pytest.param("no_events.json", r"no_events.json: the trace holds no events", id="no-events"),
        pytest.param("no_kernels.json", r"no_kernels.json: no GPU kernel events", id="no-kernels"),
        pytest.param("missing_dur.json", r"missing_dur.json: event #1 \('fused_moe_kernel'\): field 'dur' is missing"),
        pytest.param("does_not_exist.json", r"does_not_exist.json: no such file", id="missing-file"),
    ],
)
def test_bad_traces_are_clear_errors(fixture: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profile_trace(DATA / fixture, 1, RULES, StepSpec())


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param({"schemaVersion": 1}, r"no 'traceEvents' list", id="not-a-trace"),
        pytest.param({"traceEvents": [1, 2]}, r"event #0 is not an object", id="event-not-object"),
        pytest.param(
            {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1}]},
            r"event #0 \('k'\): field 'ts' is not a number \('soon'\)",
            id="ts-not-number",
        ),
        pytest.param(
            {"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1}]},
            r"event #0 \(category 'kernel'\): field 'name' is missing",
            id="no-name",
        ),
        pytest.param(
            {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -4}]},
            r"negative duration",
            id="negative-dur",
        ),
    ],
)
def test_malformed_events(tmp_path: Path, payload: Any, message: str) -> None:
    path = _write(tmp_path / "bad.json", payload)
    with pytest.raises(ValueError, match=message) as err:
        profile_trace(path, 1, RULES, StepSpec())
    assert str(path) in str(err.value)


def test_cut_off_traces(tmp_path: Path) -> None:
    text = (DATA / "graph_decode_bs4.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"cut.json: not valid JSON .*ends early"):
        profile_trace(cut, 1, RULES, StepSpec())
    packed = (DATA / "graph_decode_bs4.json.gz").read_bytes()
    cut_gz = tmp_path / "cut.json.gz"
    cut_gz.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ValueError, match=r"cut.json.gz: corrupt or truncated gzip"):
        profile_trace(cut_gz, 1, RULES, StepSpec())


def test_deeply_nested_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(ValueError, match=r"deep.json: not a JSON trace \(nested too deeply"):
        profile_trace(path, 1, RULES, StepSpec())


def test_bare_event_list_and_old_kineto_categories(tmp_path: Path) -> None:
    # The Chrome "JSON array" form and pre-2.0 Kineto categories ("Kernel", "Memcpy").
    events = [
        {"ph": "X", "cat": "Kernel", "name": "fused_moe_kernel", "pid": 0, "tid": 7, "ts": 0, "dur": 30},
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pinned -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 40,
            "dur": 5,
        },
    ]
    p = profile_trace(_write(tmp_path / "old.json", events), 2, RULES, StepSpec())
    assert p.components["moe"].busy_ms == pytest.approx(0.030)
    assert p.components["memcpy"].busy_ms == pytest.approx(0.005)
    assert p.idle_ms == pytest.approx(0.010)


# -------------------------------------------------------------------------------- synthetic decode set

BASE_TS = 1_718_000_000_000.0  # µs since the epoch, as Kineto writes them
LAYERS = 3
STEPS = 4
# Per layer: (kernel name, component, a µs, b µs per request, stream). NCCL runs beside the MoE GEMM on
# stream 20 and is always shorter, so it never adds busy time.
PER_LAYER = [
    (FLASHMLA, "attention", 20.0, 3.0, 7),
    ("_indexer_logits_kernel", "indexer", 5.0, 0.5, 7),
    (
        "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, float, int)",
        "norm_elementwise",
        2.0,
        0.0,
        7,
    ),
    (deepgemm(1), "moe", 40.0, 0.25, 7),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "dense_gemm", 10.0, 0.125, 7),
]
COMM = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "communication",
    8.0,
    0.0625,
)
PER_STEP = [
    (NAMES[[p.id for p in NAMES].index("aten-argmax")].values[0], "sampling", 3.0, 0.03125, 7),
]


def expected_ms(component: str, batch: float) -> float:
    """Ground truth per decode step, in ms."""
    us = sum(LAYERS * (a + b * batch) for _, c, a, b, _ in PER_LAYER if c == component)
    us += sum(a + b * batch for _, c, a, b, _ in PER_STEP if c == component)
    if component == "communication":
        us += LAYERS * (COMM[2] + COMM[3] * batch)
    if component == "memcpy":
        us += 1.0
    return us / 1000.0


def expected_busy_ms(batch: float) -> float:
    return sum(expected_ms(c, batch) for c in RULES.components if c != "communication")


def decode_trace(
    batch: int,
    steps: int = STEPS,
    devices: tuple[int, ...] = (0,),
    scale: tuple[float, ...] = (1.0,),
    host_us: float = 0.0,
) -> dict[str, Any]:
    """A Kineto-style trace: ``steps`` decode steps with GPU and CPU step annotations after one prefill;
    ``host_us``: the GPU idles that long after each layer (the host has not launched the next one yet)."""
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    corr = 0

    def kernel(name: str, device: int, ts: float, dur: float, stream: int, cat: str = "kernel") -> None:
        nonlocal corr
        corr += 1
        args = {"device": device, "context": 1, "stream": stream, "correlation": corr}
        events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur})
        events[-1]["args"] = args
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9})
        events[-1].update(ts=BASE_TS - 1000.0 + corr, dur=1.0, args={"correlation": corr})

    for device, k in zip(devices, scale, strict=True):
        t = BASE_TS
        kernel(
            "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>(Flash_fwd_params)",
            device,
            t,
            5000,
            7,
        )
        t += 6000
        for _ in range(steps):
            step_start = t
            for _ in range(LAYERS):
                for name, component, a, b, stream in PER_LAYER:
                    dur = k * (a + b * batch)
                    if component == "moe":
                        kernel(COMM[0], device, t, k * (COMM[2] + COMM[3] * batch), 20)
                    kernel(name, device, t, dur, stream)
                    t += dur + 1.0
                t += host_us
            for name, _, a, b, stream in PER_STEP:
                dur = k * (a + b * batch)
                kernel(name, device, t, dur, stream)
                t += dur + 1.0
            kernel("Memcpy DtoH (Device -> Pinned)", device, t, k * 1.0, 7, cat="gpu_memcpy")
            t += k * 1.0
            marker = {"ph": "X", "cat": "gpu_user_annotation", "name": "decode_step", "pid": device, "tid": 7}
            events.append({**marker, "ts": step_start, "dur": t - step_start, "args": {}})
            if device == devices[0]:
                cpu = {"ph": "X", "cat": "user_annotation", "name": "decode_step", "pid": 9, "tid": 9}
                events.append({**cpu, "ts": step_start - 500, "dur": 100, "args": {}})
            t += 50.0
    return {"schemaVersion": 1, "traceEvents": events}


BATCHES = (8, 16, 32, 64)


@pytest.fixture
def decode_set(tmp_path: Path) -> list[Path]:
    paths = []
    for b in BATCHES:
        path = tmp_path / f"dsv4_decode_bs{b}.pt.trace.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(decode_trace(b), f)
        paths.append(path)
    return paths


def test_fit_recovers_known_slopes(decode_set: list[Path]) -> None:
    inputs = trace.resolve_inputs([str(p) for p in decode_set])
    assert [t.batch for t in inputs] == list(BATCHES)
    report = analyze(inputs, StepSpec(marker="^decode_step$"))
    for p in report.profiles:
        assert p.steps == STEPS
        for c in RULES.components:
            assert p.components[c].busy_ms == pytest.approx(expected_ms(c, p.batch), rel=1e-9, abs=1e-9), c
        assert p.busy_ms == pytest.approx(expected_busy_ms(p.batch), rel=1e-9)
        assert p.concurrent_ms == pytest.approx(expected_ms("communication", p.batch), rel=1e-9)
        assert p.components["attention"].kernels == LAYERS
    fit = report.fit
    assert fit is not None and fit.batches == BATCHES and fit.n_points == len(BATCHES)
    for c in RULES.components:
        truth_b = expected_ms(c, 1.0) - expected_ms(c, 0.0)
        assert fit.components[c].slope_ms_per_request == pytest.approx(truth_b, abs=1e-9), c
        assert fit.components[c].intercept_ms == pytest.approx(expected_ms(c, 0.0), abs=1e-7), c
    assert fit.components["attention"].slope_ms_per_request == pytest.approx(LAYERS * 3.0 / 1000)
    assert fit.components["attention"].r2 == pytest.approx(1.0)
    assert fit.components["norm_elementwise"].r2 is None  # flat: nothing to explain
    assert fit.components["memcpy"].slope_ms_per_request == 0.0  # exactly, not float noise of the timestamps
    assert fit.busy.slope_ms_per_request == pytest.approx(expected_busy_ms(1.0) - expected_busy_ms(0.0), abs=1e-9)
    assert fit.driver == "attention"
    assert fit.driver_share == pytest.approx(LAYERS * 3.0 / (1000 * fit.busy.slope_ms_per_request))
    # Straight lines: the marginal cost between the two largest batches is the fitted slope, nothing bends.
    assert fit.top_batches == BATCHES[-2:] and fit.top_slopes is not None and fit.top_driver == "attention"
    for c in RULES.components:
        assert fit.top_slopes[c] == pytest.approx(fit.components[c].slope_ms_per_request, abs=1e-9), c
    assert fit.top_busy == pytest.approx(fit.busy.slope_ms_per_request, abs=1e-9)
    top = trace.report_to_dict(report)["fit"]["top"]
    assert top["batches"] == list(BATCHES[-2:]) and top["driver"] == "attention" and top["saturating"] == []
    assert "at the top of the range" in trace.format_report(report)


def test_host_bound_steps_are_named(tmp_path: Path) -> None:
    """Steps whose GPU idles more than it works (waiting on the host) get a note: the span's slope, not the busy
    time's, is what a step takes. The span fit is in the JSON either way."""
    paths = []
    for b in BATCHES:
        path = tmp_path / f"host_bs{b}.json"
        path.write_text(json.dumps(decode_trace(b, host_us=5000.0)))
        paths.append(path)
    report = analyze(trace.resolve_inputs([str(p) for p in paths]), StepSpec(marker="^decode_step$"))
    fit = report.fit
    assert fit is not None and trace.host_bound(report)
    assert all(p.idle_ms > p.busy_ms for p in report.profiles)
    # the host's gaps are the same at every batch: the span rises exactly as the busy time does, LAYERS·5 ms higher
    assert fit.span.slope_ms_per_request == pytest.approx(fit.busy.slope_ms_per_request, abs=1e-9)
    assert fit.span.intercept_ms - fit.busy.intercept_ms == pytest.approx(LAYERS * 5.0, rel=0.01)
    text = trace.format_report(report)
    assert re.search(r"host-bound: the GPU idles \d+-\d+% of each step's span", text), text
    doc = trace.report_to_dict(report)["fit"]
    assert doc["host_bound"] is True
    assert doc["span"]["slope_ms_per_request"] == pytest.approx(fit.span.slope_ms_per_request)


def test_gpu_bound_steps_get_no_host_note(decode_set: list[Path]) -> None:
    report = analyze(trace.resolve_inputs([str(p) for p in decode_set]), StepSpec(marker="^decode_step$"))
    assert not trace.host_bound(report) and "host-bound" not in trace.format_report(report)
    assert trace.report_to_dict(report)["fit"]["host_bound"] is False


def test_fit_from_fits_the_larger_batches_only(decode_set: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``fit_from``: the fit is that of the traces from that batch size up; the breakdown keeps every trace."""
    inputs = trace.resolve_inputs([str(p) for p in decode_set])
    spec = StepSpec(marker="^decode_step$")
    part = analyze(inputs, spec, fit_from=16)
    alone = analyze([t for t in inputs if t.batch is not None and t.batch >= 16], spec)
    assert [p.batch for p in part.profiles] == list(BATCHES)  # every trace in the breakdown
    assert part.fit is not None and alone.fit is not None
    assert part.fit.batches == BATCHES[1:] and part.fit.n_points == len(BATCHES) - 1
    assert part.fit == alone.fit
    assert trace.report_to_dict(part)["fit"]["batches"] == list(BATCHES[1:])
    with pytest.raises(ValueError, match="2 or more batch sizes"):
        analyze(inputs, spec, fit_from=64)  # one batch size left
    with pytest.raises(ValueError, match="--fit-from: expected a batch size >= 1, got 0"):
        analyze(inputs, spec, fit_from=0)
    assert run_cli([*(str(p) for p in decode_set), "--step-marker", "^decode_step$", "--fit-from", "32"]) == 0
    assert "2 traces, batch sizes 32, 64" in capsys.readouterr().out


def test_step_kernel_count_gives_the_same_steps(tmp_path: Path) -> None:
    data = decode_trace(16)
    prefill = "flash_fwd_kernel<"
    data["traceEvents"] = [e for e in data["traceEvents"] if prefill not in e.get("name", "")]
    path = _write(tmp_path / "run_b16.json", data)
    spec = StepSpec(kernel="flash_fwd_splitkv_mla", kernels_per_step=LAYERS)
    p = profile_trace(path, 16, RULES, spec)
    assert p.steps == STEPS and p.step_source == "kernel" and not p.notes
    assert p.components["attention"].busy_ms == pytest.approx(expected_ms("attention", 16))
    odd = profile_trace(path, 16, RULES, StepSpec(kernel="flash_fwd_splitkv_mla", kernels_per_step=5))
    assert odd.steps == pytest.approx(LAYERS * STEPS / 5)
    assert any("not a multiple" in n for n in odd.notes)


def test_cpu_step_markers_only_count(tmp_path: Path) -> None:
    data = decode_trace(16)
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "gpu_user_annotation"]
    p = profile_trace(_write(tmp_path / "cpu_b16.json", data), 16, RULES, StepSpec(marker="decode_step"))
    assert p.steps == STEPS
    assert any("only on the CPU timeline" in n for n in p.notes)
    # No GPU ranges to window by, so the 5 ms prefill kernel before the steps is counted.
    assert p.components["attention"].busy_ms == pytest.approx(expected_ms("attention", 16) + 5.0 / STEPS)


def test_devices_are_averaged_and_selectable(tmp_path: Path) -> None:
    path = _write(tmp_path / "tp2_bs32.json", decode_trace(32, devices=(0, 1), scale=(1.0, 2.0)))
    both = profile_trace(path, 32, RULES, StepSpec(marker="decode_step"))
    assert both.devices == ("0", "1") and both.steps == STEPS
    assert both.components["moe"].busy_ms == pytest.approx(1.5 * expected_ms("moe", 32))
    one = profile_trace(path, 32, RULES, StepSpec(marker="decode_step"), device="1")
    assert one.components["moe"].busy_ms == pytest.approx(2.0 * expected_ms("moe", 32))
    with pytest.raises(ValueError, match=r"--device 3 not in the trace"):
        profile_trace(path, 32, RULES, StepSpec(), device="3")


# --------------------------------------------------------------------------------------------- fitting


def test_fit_line_matches_polyfit_on_noisy_points() -> None:
    x = [1, 8, 16, 32, 64, 80]
    y = [2.0, 3.1, 4.2, 5.9, 9.8, 11.5]
    line = fit_line(x, y)
    b, a = np.polyfit(x, y, 1)
    assert (line.intercept_ms, line.slope_ms_per_request) == pytest.approx((a, b))
    residual = np.asarray(y) - (a + b * np.asarray(x))
    r2 = 1 - (residual**2).sum() / ((np.asarray(y) - np.mean(y)) ** 2).sum()
    assert line.r2 == pytest.approx(r2) and line.r2 < 1.0


def test_fit_line_reports_its_rms_residual() -> None:
    x = [1, 8, 16, 32, 64, 80]
    y = [2.0, 3.1, 4.2, 5.9, 9.8, 11.5]
    line = fit_line(x, y)
    b, a = np.polyfit(x, y, 1)
    residual = np.asarray(y) - (a + b * np.asarray(x))
    assert line.rms_ms == pytest.approx(float(np.sqrt((residual**2).mean())))
    assert line.mean_ms == pytest.approx(float(np.mean(y)))
    assert line.rel_rms == pytest.approx(line.rms_ms / line.mean_ms)
    flat = fit_line([1, 2], [0.0, 0.0])  # a component that never ran
    assert flat.r2 is None and flat.rel_rms is None


def _profile_of(b: int, times: dict[str, float]) -> trace.TraceProfile:
    """A one-step profile at batch ``b`` whose components take ``times`` (ms; the others 0), one after another."""
    comps = {c: trace.ComponentTime(0.0, 0.0, 0.0) for c in RULES.components}
    for c, ms in times.items():
        comps[c] = trace.ComponentTime(ms, ms, 10.0)
    busy = sum(times.values())
    return trace.TraceProfile(
        path=f"bs{b}.json", batch=b, steps=1.0, step_source="kernel", devices=("0",), streams=1, kernels=12,
        busy_ms=busy, kernel_sum_ms=busy, concurrent_ms=0.0, component_overlap_ms=0.0, span_ms=busy,
        idle_ms=0.0, graph_kernels=12, uncorrelated_kernels=0, components=comps, unclassified={}, notes=(),
    )  # fmt: skip


def test_a_nearly_flat_component_is_named_and_its_rms_given() -> None:
    """Weights read once: a component's time moves a few percent over the batches, so its R² measures the noise; the
    report says so and gives the line's RMS residual instead."""
    batches = [16, 32, 48, 64, 96, 128]
    wobble = [0.0015, -0.001, 0.002, -0.0018, 0.0012, -0.0005]  # ms, about 2% of 0.09

    # the dense GEMMs' line moves 6% of their mean over b = 16..128
    profiles = [
        _profile_of(b, {"dense_gemm": 0.088 + 0.00005 * b + wobble[i], "attention": 0.02 + 0.0003 * b})
        for i, b in enumerate(batches)
    ]
    fit = trace.fit_slopes(profiles)
    gemm, attention = fit.components["dense_gemm"], fit.components["attention"]
    assert gemm.r2 is not None and gemm.r2 < 0.95 and trace.nearly_flat(gemm, fit.batches)
    assert gemm.rel_rms is not None and gemm.rel_rms < 0.02
    assert attention.r2 == pytest.approx(1.0) and not trace.nearly_flat(attention, fit.batches)
    report = trace.TraceReport(
        profiles=tuple(profiles), fit=fit, components=tuple(RULES.components), rules=RULES, spec=StepSpec()
    )
    text = trace.format_report(report)
    assert re.search(r"dense_gemm: nearly flat \(\d+\.\d% change over the batches", text), text
    assert "R² " in text and "RMS of the points" in text and "attention: nearly flat" not in text
    doc = trace.report_to_dict(report)["fit"]["components"]
    assert doc["dense_gemm"]["nearly_flat"] is True and doc["attention"]["nearly_flat"] is False
    assert doc["dense_gemm"]["rel_rms"] == pytest.approx(gemm.rel_rms, rel=1e-6)


def test_top_of_range_slope_names_a_saturating_component() -> None:
    """A component whose time levels off (MoE while routed-expert coverage saturates) gets a poor line: the report
    gives the marginal cost between the two largest batches beside the fit and flags it."""
    batches = [1, 16, 32, 64, 96, 128]

    def profile(b: int) -> trace.TraceProfile:
        # touched experts x a fixed cost each
        return _profile_of(b, {"moe": 4.0 * (1 - (1 - 6 / 256) ** b), "attention": 0.02 + 0.0005 * b})

    fit = trace.fit_slopes([profile(b) for b in batches])
    moe, top = fit.components["moe"], fit.top_slopes
    assert fit.driver == "moe" and moe.r2 is not None and moe.r2 < 0.95
    assert fit.top_batches == (96, 128) and top is not None
    assert top["moe"] == pytest.approx((profile(128).busy_ms - profile(96).busy_ms - 32 * 0.0005) / 32)
    assert top["moe"] < 0.5 * moe.slope_ms_per_request and trace.saturating(moe, top["moe"])
    assert not trace.saturating(fit.components["attention"], top["attention"])


def test_fit_needs_two_batch_sizes() -> None:
    with pytest.raises(ValueError, match=r"need at least 2 distinct batch sizes"):
        fit_line([32, 32], [1.0, 1.1])
    with pytest.raises(ValueError, match=r"2 or more batch sizes.*--no-fit"):
        analyze([TraceInput(DATA / "graph_decode_bs4.json", 4), TraceInput(DATA / "graph_decode_bs4.json.gz", 4)])
    with pytest.raises(ValueError, match=r"batch size unknown for .*overlap_streams.json"):
        analyze([TraceInput(DATA / "graph_decode_bs4.json", 4), TraceInput(DATA / "overlap_streams.json", None)])


def test_two_batch_sizes_with_repeated_traces_do_not_claim_r2_is_one(tmp_path: Path) -> None:
    """Two batch sizes but three traces: the line passes through the two batches' means, not through every point,
    so R² is not 1 by construction and the table must not say it is."""
    inputs = [
        TraceInput(_write(tmp_path / f"t{i}.json", [_gpu_kernel("fused_moe_kernel", 0, dur)]), batch)
        for i, (batch, dur) in enumerate(((8, 100), (8, 120), (16, 300)))
    ]
    report = analyze(inputs)
    assert report.fit is not None and report.fit.busy.r2 is not None and report.fit.busy.r2 < 0.999
    text = trace.format_report(report)
    assert "R² is 1 by construction" not in text
    assert "mean times of the two batch sizes" in text
    two = analyze(inputs[1:])
    assert "R² is 1 by construction" in trace.format_report(two)


def test_field_investigation_numbers() -> None:
    # bs32 → bs80: attention 13.1 → 51.2 ms, MoE 15.1 → 15.9 ms per step.
    attention = fit_line([32, 80], [13.1, 51.2])
    moe = fit_line([32, 80], [15.1, 15.9])
    assert attention.slope_ms_per_request == pytest.approx(38.1 / 48)
    assert moe.slope_ms_per_request == pytest.approx(0.8 / 48)


# ---------------------------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    ("name", "batch"),
    [
        ("dsv4_decode_bs80.pt.trace.json.gz", 80),
        ("run-batch-32.json", 32),
        ("profile_b80.json", 80),
        ("batch_size64-TP-0-DP-0-PP-0-EP-0.trace.json.gz", 64),
        ("bs_16_tp8_b4.json", 16),  # bs wins over a bare b
        ("1718000000-TP-0-DP-0-PP-0-EP-0.trace.json.gz", None),
        ("decode_bf16.json", None),
    ],
)
def test_batch_from_name(name: str, batch: int | None) -> None:
    assert trace.batch_from_name(name) == batch


def test_spelled_out_batch_in_the_directory_wins_over_a_bare_b_in_the_file_name(tmp_path: Path) -> None:
    # torch.profiler's tensorboard_trace_handler names a file <host>_<pid>.<ns>.pt.trace.json.gz
    run = tmp_path / "prof" / "bs32"
    run.mkdir(parents=True)
    (run / "b200-node-3_4242.1718000000123456789.pt.trace.json.gz").write_text("{}")
    (tmp_path / "b16").mkdir()
    (tmp_path / "b16" / "rank0.json").write_text("{}")
    got = trace.resolve_inputs([str(run), str(tmp_path / "b16")])
    assert [t.batch for t in got] == [32, 16]


def test_batch_from_name_ambiguous() -> None:
    with pytest.raises(ValueError, match=r"several batch sizes"):
        trace.batch_from_name("cmp_bs32_vs_bs80.json")


def test_resolve_inputs(tmp_path: Path) -> None:
    bs32 = tmp_path / "bs32"
    bs32.mkdir()
    for name in ("rank0.trace.json.gz", "rank1.json", "notes.txt"):
        (bs32 / name).write_text("{}")
    odd = tmp_path / "weird=name.json"
    odd.write_text("{}")
    got = trace.resolve_inputs([str(bs32), f"{odd}=80", str(odd)])
    assert [(Path(t.path).name, t.batch) for t in got] == [
        ("rank0.trace.json.gz", 32),  # from the directory name
        ("rank1.json", 32),
        ("weird=name.json", 80),
        ("weird=name.json", None),  # an existing path is never split at '='
    ]
    got = trace.resolve_inputs([str(bs32), str(odd)], batches=[8, 16])
    assert [t.batch for t in got] == [8, 8, 16]
    with pytest.raises(ValueError, match=r"--batch takes one value or one per TRACE"):
        trace.resolve_inputs([str(bs32), str(odd)], batches=[1, 2, 3])
    with pytest.raises(ValueError, match=r"no_such.json: no such file"):
        trace.resolve_inputs([str(tmp_path / "no_such.json")])
    with pytest.raises(ValueError, match=r"holds no .json"):
        (tmp_path / "empty_dir").mkdir()
        trace.resolve_inputs([str(tmp_path / "empty_dir")])


def test_step_spec_validation() -> None:
    with pytest.raises(ValueError, match=r"exclusive"):
        StepSpec(marker="a", kernel="b")
    with pytest.raises(ValueError, match=r"--kernels-per-step needs --step-kernel"):
        StepSpec(kernels_per_step=43)
    with pytest.raises(ValueError, match=r"--step-kernel: invalid regular expression"):
        StepSpec(kernel="(")


# ------------------------------------------------------------------------------------- CLI and outputs


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wavemla trace")
    trace.add_arguments(parser)
    return trace.run(parser.parse_args(argv))


def test_cli_table_json_png(decode_set: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json, out_png = tmp_path / "slope.json", tmp_path / "slope.png"
    assert {p.parent for p in decode_set} == {tmp_path}
    rc = run_cli(
        [
            str(tmp_path),
            "--step-marker",
            "decode_step",
            "--json",
            str(out_json),
            "--png",
            str(out_png),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert re.search(r"slope driver: attention — 0\.0090 ms per extra request", text)
    assert "bs=8" in text and "bs=64" in text
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "wavemla.trace/1"
    assert set(doc) == {
        "schema",
        "units",
        "components",
        "steps",
        "traces",
        "batches",
        "fit",
        "unclassified",
        "rules",
        "scopes",
    }
    assert doc["scopes"] == [] and doc["traces"][0]["scoped_kernels"] == 0
    assert doc["components"] == list(RULES.components)
    assert [t["batch"] for t in doc["traces"]] == list(BATCHES)
    assert doc["traces"][0]["steps"] == STEPS
    assert doc["fit"]["driver"]["component"] == "attention"
    assert doc["fit"]["components"]["attention"]["slope_ms_per_request"] == pytest.approx(0.009)
    assert doc["fit"]["components"]["norm_elementwise"]["r2"] is None
    assert doc["batches"][0]["components"]["moe"] == pytest.approx(expected_ms("moe", 8), abs=1e-6)
    assert doc["unclassified"] == []
    # A second run over the directory skips the report the first run wrote into it.
    assert run_cli([str(tmp_path), "--step-marker", "decode_step", "--json", "-"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [t["path"] for t in again["traces"]] == [t["path"] for t in doc["traces"]]


def test_cli_json_to_stdout_and_unclassified(capsys: pytest.CaptureFixture[str]) -> None:
    rc = run_cli([f"{DATA / 'graph_decode_bs4.json'}", f"{DATA / 'overlap_streams.json'}=8", "--json", "-"])
    assert rc == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["unclassified"] == [{"name": "my_fused_mystery_kernel", "kernels": 1, "total_ms": 0.015}]
    assert "whole trace counted as one step" in captured.err


def test_cli_names_what_a_kernel_called_kernel_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kernels Triton named after a function called ``kernel`` (vLLM 0.34's DeepSeek-V4 kernel classes) are listed
    with the hint that only --scope can sort them."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "kernel", "ts": 0.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "fused_moe_kernel", "ts": 10.0, "dur": 20.0},
    ]
    trace = _write(tmp_path / "vllm_bs8.json", {"traceEvents": events})
    assert run_cli([str(trace), "--no-fit"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+0\.005 ms\s+1×\s+kernel$", out, re.M)
    assert "'kernel' is the name Triton gives every kernel function called kernel" in out
    events[0]["name"] = "my_fused_mystery_kernel"
    assert run_cli([str(_write(trace, {"traceEvents": events})), "--no-fit"]) == 0
    assert "'kernel' is the name" not in capsys.readouterr().out


def test_cli_names_a_kernel_called_kernel_as_kineto_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kineto's trace writer spells an activity named ``kernel`` as ``Kernel``."""
    events = [{"ph": "X", "cat": "kernel", "name": "Kernel", "ts": 0.0, "dur": 5.0}]
    assert run_cli([str(_write(tmp_path / "vllm_bs8.json", {"traceEvents": events})), "--no-fit"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+0\.005 ms\s+1×\s+Kernel$", out, re.M)
    assert "'kernel' is the name Triton gives every kernel function called kernel" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["garbage.json=4", "graph_decode_bs4.json"], r"garbage.json: not valid JSON", id="garbage"),
        pytest.param(["graph_decode_bs4.json"], r"2 or more batch sizes", id="one-batch"),
        pytest.param(["overlap_streams.json", "graph_decode_bs4.json"], r"batch size unknown", id="no-batch"),
        pytest.param(["graph_decode_bs4.json", "--rules", "garbage.json"], r"garbage.json: not valid JSON"),
        pytest.param(["graph_decode_bs4.json", "--step-marker", "("], r"--step-marker: invalid regular"),
        pytest.param([], r"no trace given", id="no-trace"),
    ],
)
def test_cli_user_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(DATA / a) if a.split("=")[0].endswith(".json") else a for a in argv]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert err.startswith("wavemla trace: error: ") and "Traceback" not in err


@pytest.mark.parametrize("name", ["plot", "plot-dir", "plot.txt"], ids=["no-suffix", "a-directory", "txt"])
def test_cli_png_writes_the_file_named_or_refuses_naming_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """matplotlib adds ``.png`` to a name without a suffix: ``--png plot`` writes ``plot`` itself, ``--png DIR`` is
    refused (not written as ``DIR.png`` beside it, reported as ``DIR``), and a format matplotlib cannot write is an
    error naming ``--png``."""
    pytest.importorskip("matplotlib")
    path = tmp_path / name
    if name == "plot-dir":
        path.mkdir()
    code = run_cli([f"{DATA / 'graph_decode_bs4.json'}", "--no-fit", "--png", str(path)])
    out, err = capsys.readouterr()
    assert not (tmp_path / f"{name}.png").exists()
    if name == "plot":
        assert code == 0 and f"wrote {path}" in out and path.read_bytes()[:4] == b"\x89PNG"
    else:
        assert code == 2 and f"wrote {path}" not in out
        assert err.splitlines()[-1].startswith(f"wavemla trace: error: --png {path}: "), err


def test_cli_no_fit_single_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "p.png"
    assert run_cli([str(DATA / "overlap_streams.json"), "--no-fit", "--png", str(png)]) == 2  # needs batch sizes
    assert "--png needs batch sizes" in capsys.readouterr().err and not png.exists()
    assert run_cli([str(DATA / "overlap_streams.json"), "--no-fit"]) == 0
    out = capsys.readouterr().out
    assert "bs=?" in out and "slope driver" not in out


def test_cli_list_rules_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--list-rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(default_rules())
    assert lines[0].split()[:3] == ["1", default_rules()[0].name, default_rules()[0].component]
    assert run_cli(["--explain", deepgemm(2)]) == 0
    assert "moe (rule 'deepgemm-grouped', default)" in capsys.readouterr().out


def test_cli_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert cli.COMMANDS["trace"][0] == "wavemla.tools.trace"
    monkeypatch.setattr(cli, "COMMANDS", {"trace": cli.COMMANDS["trace"]})  # other verbs are not under test here
    shutil.copy(DATA / "graph_decode_bs4.json", tmp_path / "a_bs4.json")
    shutil.copy(DATA / "graph_decode_bs4.json", tmp_path / "a_bs8.json")
    assert cli.main(["trace", str(tmp_path / "a_bs4.json"), str(tmp_path / "a_bs8.json")]) == 0


# ------------------------------------------------------------------------------------ real H200 layer traces

# Captured on an H200 by `wavemla layer-bench --mode csa --batch 1 32 64 --context 8192 --reps 3 --profile-steps 2`:
# one CSA decoder layer per trace, each trace 2 back-to-back replays of the whole-layer CUDA graph, committed as
# written, with the rules file and the layer_bench.json of the same run (docs/trace.md, "Real H200 traces in the
# tests"). layer_bench.LAYER_RULES has grown rules for the kernels left unclassified here (test_layer_bench.py).
H200 = DATA / "h200_layer_csa"
H200_RULES = DATA / "h200_layer_rules.json"
H200_BENCH = DATA / "h200_layer_bench.json"
H200_BATCHES = (1, 32, 64)
H200_STEPS = 2
H200_STEP_KERNEL = "^_sparse_mla_decode(_ws)?_kernel$"  # layer_bench.STEP_KERNEL (that module imports torch)
CUB_SCAN_INIT = (
    "void at_cuda_detail::cub::detail::scan::DeviceScanInitKernel<at_cuda_detail::cub::ScanTileState<int, true> >"
    "(at_cuda_detail::cub::ScanTileState<int, true>, int)"
)
CUB_SCAN = (
    "void at_cuda_detail::cub::detail::scan::DeviceScanKernel<at_cuda_detail::cub::detail::scan::policy_hub<int, "
    "int, int, unsigned int, std::plus<int> >::Policy1000, int const*, int*, at_cuda_detail::cub::ScanTileState<int, "
    "true>, std::plus<int>, at_cuda_detail::cub::NullType, unsigned int, int, false, at_cuda_detail::cub::NullType>"
    "(int const*, int*, at_cuda_detail::cub::ScanTileState<int, true>, int, std::plus<int>, "
    "at_cuda_detail::cub::NullType, unsigned int)"
)
EXP2 = "exp2_kernel_vectorized4_kernel"  # the ATen jiterator's name for torch.exp2: no namespace, no component
# GPU busy time per layer step, ms (union of kernel intervals; one stream, so also the plain kernel sum)
H200_BUSY_MS = {1: 0.531068359, 32: 2.564199707, 64: 3.421245605}
H200_R2 = {
    "attention": 0.944,
    "indexer": 0.946,
    "moe": 0.938,
    "dense_gemm": 0.988,
    "communication": None,
    "norm_elementwise": 0.993,
    "quantization": 0.445,
    "sampling": None,
    "memcpy": 0.742,
    "other": 0.761,
}


@pytest.fixture(scope="module")
def h200_report() -> trace.TraceReport:
    return analyze(trace.resolve_inputs([str(H200)]), StepSpec(kernel=H200_STEP_KERNEL), build_ruleset([H200_RULES]))


def h200_layer_ms() -> dict[int, float]:
    """layer-bench's whole-layer time per batch (median of CUDA-event-timed graph replays, L2 flushed), in ms."""
    doc = json.loads(H200_BENCH.read_text())
    return {rec["batch"]: rec["layer"]["median_us"] / 1000 for rec in doc["modes"]["csa"]["batches"]}


def test_h200_bench_file_is_the_run_of_the_traces() -> None:
    doc = json.loads(H200_BENCH.read_text())
    assert doc["env"]["gpu"] == "NVIDIA H200" and doc["args"]["modes"] == ["csa"]
    assert doc["args"]["context"] == 8192 and doc["args"]["profile_steps"] == H200_STEPS
    assert doc["args"]["batches"] == list(H200_BATCHES)
    traces = [rec["trace"] for rec in doc["modes"]["csa"]["batches"]]
    assert traces == [f"csa/layer_bs{b}.json.gz" for b in H200_BATCHES]
    assert sorted(p.name for p in H200.iterdir()) == sorted(Path(t).name for t in traces)


def test_h200_every_kernel_classified_but_three(h200_report: trace.TraceReport) -> None:
    assert [p.batch for p in h200_report.profiles] == list(H200_BATCHES)
    for p in h200_report.profiles:
        # the same three kernels in every trace, each once per step, under 1% of the busy time
        assert set(p.unclassified) == {CUB_SCAN_INIT, CUB_SCAN, EXP2}, p.path
        assert all(count == H200_STEPS for count, _ in p.unclassified.values())
        assert p.components["other"].busy_ms < 0.01 * p.busy_ms
        per_step = {c: t.kernels for c, t in p.components.items() if t.kernels}
        # attention: split + combine; indexer: score, 2 histogram passes, count, compact; moe: softplus, top-k,
        # 2 × (grouped-GEMM setup + grouped GEMM), SiLU. At batch 1 three small copies of kv_write run as memcpy
        # kernels; at 32 and 64 they and a few more copies are ATen copy kernels (norm_elementwise).
        common = {"attention": 2, "indexer": 5, "moe": 7, "dense_gemm": 11, "quantization": 1, "other": 3}
        tail = {"norm_elementwise": 102, "memcpy": 3} if p.batch == 1 else {"norm_elementwise": 111}
        assert per_step == {**common, **tail}, p.path
    assert [name for name, _, _ in h200_report.unclassified()] == [CUB_SCAN, EXP2, CUB_SCAN_INIT]  # longest first
    assert [count for _, count, _ in h200_report.unclassified()] == [len(H200_BATCHES) * H200_STEPS] * 3


def test_h200_unclassified_kernels_belong_to_moe_and_kv_write() -> None:
    # Where the three sit in each step's kernel order: exp2 between ceil and the FP8 cast (kv_write's
    # 2^ceil(log2(amax/448)) scale), the cub scans between the router's top-k and the first grouped GEMM (the
    # cumsum of expert counts into grouped-GEMM offsets). So layer-bench's rules, not the defaults, claim them.
    landmarks = [
        ("l", "log2_kernel_cuda"),
        ("c", "ceil_kernel_cuda"),
        ("e", EXP2),
        ("f", "float8_copy_kernel"),
        ("A", "_sparse_mla_decode_kernel"),
        ("T", "gatherTopK"),
        ("S", "DeviceScan"),
        ("G", "GroupProblemShape"),
    ]
    for b in H200_BATCHES:
        events = trace.load_events(H200 / f"layer_bs{b}.json.gz")
        kernels = sorted((e["ts"], e["name"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
        order = "".join(tag for _, name in kernels for tag, key in landmarks if key in name)
        assert order == "lcefATSSGG" * H200_STEPS, b


@pytest.mark.parametrize(
    "spec",
    [StepSpec(kernel=H200_STEP_KERNEL), StepSpec(marker=r"^layer_step$")],
    ids=["step-kernel", "layer_step-marker"],
)
def test_h200_two_steps_per_trace(spec: StepSpec, h200_report: trace.TraceReport) -> None:
    rules = build_ruleset([H200_RULES])
    for by_kernel in h200_report.profiles:
        p = profile_trace(by_kernel.path, by_kernel.batch, rules, spec)
        assert p.steps == H200_STEPS and p.step_source == spec.source and not p.notes
        # every kernel is a graph replay's, on one stream, and each marker range holds a whole step
        assert p.kernels == by_kernel.kernels and p.graph_kernels == p.kernels
        assert p.uncorrelated_kernels == 0 and p.streams == 1 and p.concurrent_ms == 0.0
        assert p.busy_ms == pytest.approx(by_kernel.busy_ms, rel=1e-12)
        # the kernel count's span also holds the ~4.4 µs between the two replays, the marker ranges do not
        assert 0.0 <= by_kernel.span_ms - p.span_ms < 0.003


def test_h200_default_step_rule_is_the_whole_trace(h200_report: trace.TraceReport) -> None:
    # No automatic step detection: without --step-kernel / --step-marker the trace is one step (and says so).
    rules = build_ruleset([H200_RULES])
    for by_kernel in h200_report.profiles:
        p = profile_trace(by_kernel.path, by_kernel.batch, rules, StepSpec())
        assert p.steps == 1 and p.step_source == "whole"
        assert p.busy_ms == pytest.approx(H200_STEPS * by_kernel.busy_ms, rel=1e-12)
        assert any("whole trace counted as one step" in n for n in p.notes)


def test_h200_fit_names_moe_the_slope_driver(h200_report: trace.TraceReport) -> None:
    fit = h200_report.fit
    assert fit is not None and fit.batches == H200_BATCHES and fit.n_points == len(H200_BATCHES)
    assert fit.driver == "moe"
    assert fit.components["moe"].slope_ms_per_request == pytest.approx(0.040134, abs=1e-6)
    assert fit.busy.slope_ms_per_request == pytest.approx(0.045773, abs=1e-6)
    assert fit.driver_share == pytest.approx(0.8768, abs=1e-4)
    # between b = 32 and 64 MoE still adds the most, at about half its fitted slope (experts touched: 116 -> 162)
    assert fit.top_batches == (32, 64) and fit.top_driver == "moe" and fit.top_slopes is not None
    assert fit.top_slopes["moe"] == pytest.approx(0.0227, abs=1e-4)
    assert fit.top_busy == pytest.approx(0.0268, abs=1e-4)
    slopes = {c: f.slope_ms_per_request for c, f in fit.components.items()}
    # next after moe: norm_elementwise, about half of it the MoE counting sort's one-hot cumsum (2 → 81 µs from
    # batch 1 to 64), which only layer-bench's newer rules send to moe
    assert sorted(slopes, key=slopes.__getitem__, reverse=True)[:5] == [
        "moe",
        "norm_elementwise",
        "indexer",
        "attention",
        "dense_gemm",
    ]
    # R² over three points; moe's is the lowest of the big ones: its cost follows the experts touched (6, 116, 162)
    assert {c: None if f.r2 is None else round(f.r2, 3) for c, f in fit.components.items()} == H200_R2


def test_h200_busy_against_the_measured_layer_time(h200_report: trace.TraceReport) -> None:
    measured = h200_layer_ms()
    for p in h200_report.profiles:
        assert p.batch is not None
        layer = measured[p.batch]
        assert p.busy_ms == pytest.approx(H200_BUSY_MS[p.batch], abs=1e-8)
        # Idle inside the span: ~0.42 µs between each of the 134-140 kernels of a graph replay, whatever the batch.
        assert p.idle_ms == pytest.approx(0.0627, abs=0.002)
        # busy leaves out those gaps, so it stays below the event-timed replay: by 3.8-7.9% here
        assert 0.90 * layer < p.busy_ms < layer
        # The span (busy + idle) is the figure comparable to the timer, which times other replays of the graph:
        # after an L2 flush, without the profiler, median of 3. They agree within +2.7% (b=1) and -5.1% (b=64).
        assert p.span_ms == pytest.approx(layer, rel=0.06)
        assert p.span_ms == pytest.approx(p.busy_ms + p.idle_ms, rel=1e-12)


def test_h200_cli_on_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json, out_png = tmp_path / "csa_slope.json", tmp_path / "csa_slope.png"
    argv = [str(H200), "--step-kernel", H200_STEP_KERNEL, "--rules", str(H200_RULES)]
    assert run_cli([*argv, "--json", str(out_json), "--png", str(out_png)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # no notes: every trace has its steps
    text = captured.out
    assert re.search(r"^component\s+bs=1\s+bs=32\s+bs=64\s", text, re.M)
    assert re.search(r"^busy \(union, all\)\s+0\.531\s+2\.564\s+3\.421\s", text, re.M)
    assert "slope driver: moe — 0.0401 ms per extra request, 87.7% of the busy-time slope" in text
    assert "top 3 of 3 by time" in text and EXP2 in text and "add rules for them" in text
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(out_json.read_text())
    assert [(Path(t["path"]).name, t["batch"], t["steps"]) for t in doc["traces"]] == [
        (f"layer_bs{b}.json.gz", b, H200_STEPS) for b in H200_BATCHES
    ]
    assert [t["busy_ms"] for t in doc["traces"]] == [pytest.approx(H200_BUSY_MS[b], abs=1e-8) for b in H200_BATCHES]
    assert doc["fit"]["driver"]["component"] == "moe"
    assert {c: v["r2"] for c, v in doc["fit"]["components"].items()} == {
        c: None if r2 is None else pytest.approx(r2, abs=5e-4) for c, r2 in H200_R2.items()
    }
    assert {u["name"] for u in doc["unclassified"]} == {CUB_SCAN_INIT, CUB_SCAN, EXP2}
    assert sorted(p.name for p in H200.iterdir()) == [f"layer_bs{b}.json.gz" for b in H200_BATCHES]  # wrote nothing


# ------------------------------------------------------------------------- scopes: the launching host range

GEMM = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"  # cuBLAS: dense_gemm by name
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"  # noqa: E501


def scoped_trace(steps: int = 2) -> dict[str, Any]:
    """Host ranges on thread 1 (an attention module holding a matmul and a softmax, then an MLP holding a
    matmul) launch kernels; a CUDA graph launched inside the attention module replays two more; a launch on thread
    2 falls inside the attention range's times but not its thread."""
    events: list[dict[str, Any]] = []
    corr = 0

    def host(cat: str, name: str, ts: float, dur: float, tid: int = 1) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur})

    def launch(name: str, ts: float, gpu_ts: float, tid: int = 1, launcher: str = "cudaLaunchKernel",
               replays: int = 1) -> None:  # fmt: skip
        nonlocal corr
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": launcher, "pid": 100, "tid": tid, "ts": ts,
                       "dur": 2.0, "args": {"correlation": corr}})  # fmt: skip
        for r in range(replays):
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": gpu_ts + 20.0 * r,
                           "dur": 10.0, "args": {"device": 0, "stream": 7, "correlation": corr}})  # fmt: skip

    for step in range(steps):
        t = BASE_TS + 1000.0 * step
        host("user_annotation", "decode_step", t, 900.0)
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "decode_step", "pid": 0, "tid": 7,
                       "ts": t + 50.0, "dur": 800.0, "args": {}})  # fmt: skip
        host("python_function", "nn.Module: DeepseekV4Attention_0", t + 10.0, 300.0)
        host("python_function", "transformers/.../modeling_deepseek_v4.py(730): eager_attention_forward", t + 20, 200)
        host("cpu_op", "aten::matmul", t + 30.0, 20.0)
        launch(GEMM, t + 35.0, t + 100.0)
        host("cpu_op", "aten::softmax", t + 60.0, 20.0)
        launch(SOFTMAX, t + 65.0, t + 120.0)
        launch(GEMM, t + 240.0, t + 140.0, launcher="cudaGraphLaunch", replays=2)  # in the module, after the core
        launch(GEMM, t + 70.0, t + 200.0, tid=2)  # another thread, inside the module's times
        host("python_function", "nn.Module: DeepseekV4MLP_0", t + 400.0, 100.0)
        launch(GEMM, t + 420.0, t + 300.0)
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7,
                       "ts": t + 320.0, "dur": 5.0, "args": {"device": 0, "stream": 7, "correlation": 0}})  # fmt: skip
        host("cuda_runtime", "cudaMemcpyAsync", t + 80.0, 1.0)  # inside the core's range; copies stay memcpy
        events[-1]["args"] = {"correlation": 0}
    return {"traceEvents": events}


def _scoped(tmp_path: Path, *scopes: str) -> trace.TraceProfile:
    path = tmp_path / "scoped_bs4.json"
    path.write_text(json.dumps(scoped_trace()))
    report = analyze(trace.resolve_inputs([str(path)]), StepSpec(marker="^decode_step$"), fit=False,
                     scopes=[trace.Scope.parse(s) for s in scopes])  # fmt: skip
    return report.profiles[0]


def test_without_scopes_names_decide(tmp_path: Path) -> None:
    p = _scoped(tmp_path)
    kernels = {c: t.kernels for c, t in p.components.items() if t.kernels}
    assert kernels == {"dense_gemm": 5, "sampling": 1, "memcpy": 1}  # per step; the softmax rule says sampling
    assert p.scoped_kernels == 0


def test_scope_takes_the_kernels_its_host_range_launched(tmp_path: Path) -> None:
    p = _scoped(tmp_path, "attention=eager_attention_forward")
    kernels = {c: t.kernels for c, t in p.components.items() if t.kernels}
    # the core's GEMM and softmax; not the graph launched after the core, the other thread's launch, the MLP's GEMM
    assert kernels == {"attention": 2, "dense_gemm": 4, "memcpy": 1}
    assert p.scoped_kernels == 2 * 2 and not p.notes
    assert p.components["attention"].busy_ms == pytest.approx(2 * 10.0 / 1000)


def test_scope_takes_a_graphs_replayed_kernels_and_the_first_scope_wins(tmp_path: Path) -> None:
    p = _scoped(tmp_path, "moe=DeepseekV4MLP", "attention=nn\\.Module: DeepseekV4Attention", "indexer=aten::softmax")
    kernels = {c: t.kernels for c, t in p.components.items() if t.kernels}
    # the module holds the core and the graph (2 replays); the softmax is inside both: the earlier scope wins
    assert kernels == {"attention": 4, "moe": 1, "dense_gemm": 1, "memcpy": 1}


def test_scope_that_matches_nothing_is_noted(tmp_path: Path) -> None:
    p = _scoped(tmp_path, "attention=FlashAttention")
    assert p.scoped_kernels == 0
    assert len(p.notes) == 1 and "--scope attention=FlashAttention matches no host range" in p.notes[0]
    assert "with_stack=True" in p.notes[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("attention", r"expected COMPONENT=REGEX"),
        ("attention=", r"expected COMPONENT=REGEX"),
        ("=x", r"empty component"),
        ("attention=[x", r"--scope attention: invalid regular expression"),
    ],
)
def test_bad_scopes_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trace.Scope.parse(text)


def test_scope_component_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"--scope kv=x: unknown component 'kv'; components: attention, "):
        _scoped(tmp_path, "kv=x")
    path = tmp_path / "scoped_bs4.json"
    assert run_cli([str(path), "--no-fit", "--step-marker", "decode_step", "--scope", "kv=x"]) == 2
    assert "unknown component 'kv'" in capsys.readouterr().err
    assert run_cli([str(path), "--no-fit", "--step-marker", "decode_step", "--scope", "attention=forward$",
                    "--json", "-"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["scopes"] == [{"component": "attention", "pattern": "forward$"}]
    assert doc["traces"][0]["scoped_kernels"] == 4
    assert doc["traces"][0]["components"]["attention"]["kernels"] == 2


# ------------------------------------------------------------------- a stack we did not write: transformers

HF = DATA / "h200_hf_dsv4_eager"
HF_STEPS = DATA / "h200_hf_dsv4_steps.json"


def test_h200_transformers_traces_read_unchanged() -> None:
    """Real traces of a stack we did not write: transformers' DeepSeek-V4 (4 layers, DSV4-Flash attention sizes,
    random weights) decoding on the H200 with its own eager attention, no CUDA graphs, one stream; read with the
    built-in rules and the step marker alone (benchmarks/experiments/hf_dsv4_trace.py --stack, cut to 2 steps by
    trim_trace.py, which kept the host ranges of HF_SCOPES)."""
    report = analyze(trace.resolve_inputs([str(HF)]), StepSpec(marker="^layer_step$"))
    measured = json.loads(HF_STEPS.read_text())["step_us"]
    assert [p.batch for p in report.profiles] == [1, 64]
    for p in report.profiles:
        assert (p.steps, p.streams, p.graph_kernels, p.uncorrelated_kernels) == (2, 1, 0, 0)
        # the per-step span within 5% of the CUDA-event times of the same two steps (-1.0% at both)
        mean_ms = sum(measured[str(p.batch)]) / len(measured[str(p.batch)]) / 1000
        assert abs(p.span_ms / mean_ms - 1) < 0.05, (p.batch, p.span_ms, mean_ms)
        # eager attention runs as cuBLAS GEMMs and ATen softmax and elementwise kernels: nothing is named attention
        assert p.components["attention"].kernels == 0
        assert (p.components["dense_gemm"].kernels, p.components["moe"].kernels) == (119, 16)
        # MoE routing's histogram and scan are generic ATen/cub kernels: left to a --rules file, under 1% of busy
        assert sorted(name.split("<")[0].split("::")[-1] for name in p.unclassified) == [
            "DeviceScanInitKernel", "DeviceScanKernel", "kernelHistogram1D",
        ]  # fmt: skip
        assert p.components["other"].busy_ms < 0.01 * p.busy_ms
        assert p.idle_ms > 2 * p.busy_ms  # the host sets the pace
    assert trace.host_bound(report) and "host-bound: the GPU idles" in trace.format_report(report)


HF_SERVE = DATA / "h100_hf_serve"
HF_SERVE_RECORD = DATA / "h100_hf_serve.json"


def test_h100_transformers_serve_traces_read_unchanged() -> None:
    """Real traces of a serving engine we did not write: transformers serve with continuous batching (its own
    scheduler, paged cache and torch attention) serving a DeepSeek-V3-architecture model (4 layers, random weights)
    at 1, 16 and 64 concurrent streams on an H100, cut to 3 decode steps by a kernel launched once a step; read with
    the built-in rules (benchmarks/experiments/hf_serve_trace.py, then trim_trace.py --step-kernel)."""
    record = json.loads(HF_SERVE_RECORD.read_text())
    step = StepSpec(kernel="^" + re.escape(record["step_kernel"]) + "$")
    report = analyze(trace.resolve_inputs([str(HF_SERVE)]), step)
    assert [p.batch for p in report.profiles] == [1, 16, 64]
    for p in report.profiles:
        assert (p.steps, p.graph_kernels, p.uncorrelated_kernels) == (3, 0, 0)
        # attention is cuDNN's fused SDPA kernel, one a layer and step (kernels are per step)
        assert p.components["attention"].kernels == 4
        # MoE routing's histogram and scan are generic ATen/cub kernels: left to a --rules file, under 2% of busy
        assert sorted(name.split("<")[0].split("::")[-1] for name in p.unclassified) == [
            "DeviceScanInitKernel", "DeviceScanKernel", "kernelHistogram1D",
        ]  # fmt: skip
        assert p.components["other"].busy_ms < 0.02 * p.busy_ms
        # the 3 kept steps keep the GPU busy as the 24 profiled steps of the uncut trace did, within 5%
        whole = record["whole_traces"][str(p.batch)]
        assert abs(p.busy_ms / whole["busy_ms"] - 1) < 0.05, (p.batch, p.busy_ms, whole["busy_ms"])
        assert p.idle_ms > 20 * p.busy_ms  # the engine's host side sets the pace
    assert trace.host_bound(report)
    fit = trace.report_to_dict(report)["fit"]["components"]["attention"]
    assert fit["r2"] > 0.99 and fit["slope_ms_per_request"] > 0


# the Python frames of transformers' DeepSeek-V4 that hold each component's kernels (hf_dsv4_trace.STACK_SCOPES)
HF_SCOPES = (
    "attention=eager_attention_forward",
    r"indexer=nn\.Module: DeepseekV4Indexer_",
    r"moe=nn\.Module: DeepseekV4SparseMoeBlock_",
)


def test_h200_transformers_traces_scoped_by_python_frames() -> None:
    """The same real traces with --scope: the frames give eager attention its cuBLAS GEMMs and ATen softmax, and the
    MoE block its routing kernels, so the slope driver is attention (the field story's finding, on a stack we did
    not write), where by names alone it is norm/elementwise."""
    scopes = [trace.Scope.parse(s) for s in HF_SCOPES]
    report = analyze(trace.resolve_inputs([str(HF)]), StepSpec(marker="^layer_step$"), scopes=scopes)
    bs1, bs64 = report.profiles
    for p in report.profiles:
        assert p.scoped_kernels > 0 and p.unclassified == {}
        assert p.components["dense_gemm"].kernels == 75  # 44 GEMMs a step went to attention, indexer and MoE scopes
    assert bs1.components["attention"].busy_ms < 0.2 < 13.0 < bs64.components["attention"].busy_ms
    assert bs64.components["attention"].busy_ms > 0.7 * bs64.busy_ms
    driver = trace.report_to_dict(report)["fit"]["driver"]
    assert driver["component"] == "attention" and driver["share_of_busy_slope"] > 0.8
    by_names = analyze(trace.resolve_inputs([str(HF)]), StepSpec(marker="^layer_step$"))
    assert trace.report_to_dict(by_names)["fit"]["driver"]["component"] == "norm_elementwise"


# --------------------------------------------------------------------------------------------- hygiene


def test_docstring_examples() -> None:
    for module in (trace, trace_rules):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_no_environment_reads() -> None:
    for module in (trace, trace_rules):
        source = Path(module.__file__ or "").read_text()
        assert "environ" not in source and "getenv" not in source, module.__name__


def test_step_copy_on_a_side_stream_reaching_into_the_next_step(tmp_path: Path) -> None:
    """A step's copy on a side stream (an all-reduce queued behind the next step's kernels) reaches past the next
    step's start: the next step, whose copy lies inside that extent but on another stream, is still a step."""
    events = [
        _gpu_step("decode_step", 0, 100, 1),
        _gpu_kernel("fused_moe_kernel", 10, 50),
        {**_gpu_step("decode_step", 20, 1480, 1), "tid": 20},
        {**_gpu_kernel("ncclDevKernel_AllReduce", 1400, 100), "tid": 20},
        _gpu_step("decode_step", 1000, 100, 2),
        _gpu_kernel("fused_moe_kernel", 1010, 50),
    ]
    p = profile_trace(_write(tmp_path / "side.json", {"traceEvents": events}), 8, RULES, StepSpec(marker="decode_step"))
    assert p.steps == 2
    # An inner range matched by the regex is still part of its step on the same stream.
    events.append(_gpu_step("decode_step_mtp", 1040, 40, 3))
    p = profile_trace(_write(tmp_path / "side2.json", {"traceEvents": events}), 8, RULES, StepSpec(marker="step"))
    assert p.steps == 2


@pytest.mark.parametrize("option", ["--json", "--png"])
def test_cli_an_empty_output_name_is_refused(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty ``--json`` or ``--png`` is not taken for none: the file would silently not be written."""
    assert run_cli([str(DATA / "graph_decode_bs4.json"), "--no-fit", option, ""]) == 2
    assert f"wavemla trace: error: {option}: expected a file name" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--json", "--png"])
def test_cli_a_blank_output_name_is_refused(
    option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--json`` or ``--png`` of blanks is refused as ``wavemla plan --png`` refuses it, not written as a file
    named by spaces."""
    monkeypatch.chdir(tmp_path)
    assert run_cli([str(DATA / "graph_decode_bs4.json"), "--no-fit", option, "  "]) == 2
    assert f"wavemla trace: error: {option}: expected a file name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["..png", "plot."], ids=["dots-then-png", "trailing-dot"])
def test_cli_png_name_matplotlib_reads_no_suffix_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A name matplotlib finds no suffix in (it splits like ``os.path.splitext``: leading dots are no suffix) is
    written as PNG under that very name, as ``wavemla plan --png`` does, not as ``NAME.png``."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    code = run_cli([f"{DATA / 'graph_decode_bs4.json'}", "--no-fit", "--png", name])
    out = capsys.readouterr().out
    assert code == 0 and f"wrote {name}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
