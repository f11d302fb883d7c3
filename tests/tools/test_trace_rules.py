"""Kernel names from public serving stacks that the built-in trace rules must sort into the right component."""

from __future__ import annotations

import pytest

from wavemla.tools.trace_rules import RuleSet, default_rules

RULES = RuleSet(default_rules())


def deepgemm_named(gemm_type: str) -> str:
    return (
        "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 64u, 128u, 128u, 8u, 5u, 1u, "
        f"deep_gemm::GemmType::{gemm_type}>(__nv_bfloat16*, float*, int*, unsigned int)"
    )


NAMES = [
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
]


@pytest.mark.parametrize(("name", "component"), NAMES)
def test_real_kernel_names(name: str, component: str) -> None:
    assert RULES.classify(name) == component, RULES.match(name)


def test_deepgemm_k_grouped_psum_layout_is_moe() -> None:
    # deep_gemm/include/deep_gemm/common/types.cuh: KGroupedContiguousWithPsumLayout = 6, a grouped GEMM
    name = (
        "void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 4096u, 7168u, 256u, 128u, 128u, 128u, 1u, 5u, 128u, 1u, 1u, "
        "(deep_gemm::GemmType)6, false, (deep_gemm::KernelType)1>(float*, int*, unsigned int, CUtensorMap, CUtensorMap)"
    )
    assert RULES.classify(name) == "moe", RULES.match(name)


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
