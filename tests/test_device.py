"""DeviceSpec presets, name lookup, the occupancy model, and the torch query (faked on CPU, real on GPU)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from wavemla import config
from wavemla import device as device_mod
from wavemla.device import (
    KIB,
    MIB,
    PRESETS,
    DeviceSpec,
    NoCudaDeviceError,
    current_spec,
    dependent_launch,
    fp8_decode_path,
    get_spec,
    triton_override_arch,
)

# SM counts as NVIDIA documents them (architecture whitepapers, product pages) and drivers report them.
DOCUMENTED_SMS = {
    "h100": 132,
    "h200": 132,
    "b200": 148,
    "rtx-pro-6000": 188,
    "rtx-5090": 170,
    "dgx-spark": 48,
    "rtx-4090": 128,
    "l40s": 142,
    "a100": 108,
    "rtx-3090": 82,
}
ARCH = {
    "h100": 90,
    "h200": 90,
    "b200": 100,
    "rtx-pro-6000": 120,
    "rtx-5090": 120,
    "dgx-spark": 121,
    "rtx-4090": 89,
    "l40s": 89,
    "a100": 80,
    "rtx-3090": 86,
}


# ---------------------------------------------------------------- presets


def test_preset_set() -> None:
    assert set(PRESETS) == set(DOCUMENTED_SMS)
    for key, spec in PRESETS.items():
        assert spec.name == key
        assert spec.arch == ARCH[key], key
        assert spec.num_sms == DOCUMENTED_SMS[key], key


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_is_self_consistent(name: str) -> None:
    spec = PRESETS[name]
    assert 0 < spec.smem_per_block <= spec.smem_per_sm
    # the driver reserves 1 KB per block, so one block may use exactly 1 KB less than the SM has
    assert spec.smem_per_sm - spec.smem_per_block == 1 * KIB
    assert spec.regs_per_sm == 65536 and spec.max_regs_per_thread == 255
    assert spec.max_warps_per_sm in (48, 64) and spec.max_blocks_per_sm in (16, 24, 32)
    assert spec.max_blocks_per_sm <= spec.max_warps_per_sm
    assert 1 * MIB <= spec.l2_bytes <= 256 * MIB
    assert 100 < spec.mem_gbps < 10_000
    assert 10 < spec.bf16_tflops < 5_000
    if spec.arch >= 89:
        # FP8 runs the same tensor-core datapath at half the operand width: twice the bf16 rate
        assert spec.fp8_tflops is not None
        assert spec.fp8_tflops == pytest.approx(2 * spec.bf16_tflops, rel=0.03)
    else:
        assert spec.fp8_tflops is None, "sm_80/sm_86 have no FP8 tensor cores"
    assert spec.source and spec.display_name


@pytest.mark.parametrize(
    ("arch", "smem_sm", "smem_block", "warps", "blocks"),
    [
        pytest.param(80, 167_936, 166_912, 64, 32, id="sm80"),
        pytest.param(86, 102_400, 101_376, 48, 16, id="sm86"),
        pytest.param(89, 102_400, 101_376, 48, 24, id="sm89"),
        pytest.param(90, 233_472, 232_448, 64, 32, id="sm90"),
        pytest.param(100, 233_472, 232_448, 64, 32, id="sm100"),
        pytest.param(120, 102_400, 101_376, 48, 24, id="sm120"),
        pytest.param(121, 102_400, 101_376, 48, 24, id="sm121"),
    ],
)
def test_per_arch_limits(arch: int, smem_sm: int, smem_block: int, warps: int, blocks: int) -> None:
    specs = [s for s in PRESETS.values() if s.arch == arch]
    assert specs
    for spec in specs:
        assert (spec.smem_per_sm, spec.smem_per_block) == (smem_sm, smem_block)
        assert (spec.max_warps_per_sm, spec.max_blocks_per_sm) == (warps, blocks)


def test_presets_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["h100"].num_sms = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        pytest.param({"smem_per_block": 300 * KIB}, "exceeds smem_per_sm", id="block-over-sm"),
        pytest.param({"num_sms": 0}, "num_sms", id="no-sms"),
        pytest.param({"arch": 75}, "sm_80", id="turing"),
        pytest.param({"fp8_tflops": 0.0}, "fp8_tflops", id="fp8-zero"),
        pytest.param({"max_regs_per_thread": 256}, "max_regs_per_thread", id="regs"),
        pytest.param({"name": ""}, "name", id="no-name"),
    ],
)
def test_invalid_spec_rejected(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        dataclasses.replace(PRESETS["h100"], **change)


def test_triton_target() -> None:
    from triton.backends.compiler import GPUTarget

    assert get_spec("rtx-pro-6000").triton_target() == GPUTarget("cuda", 120, 32)
    assert get_spec("gb10").triton_target() == GPUTarget("cuda", 121, 32)
    assert get_spec("h100").triton_target().arch == 90


def test_summary_names_the_numbers() -> None:
    line = get_spec("a100").summary()
    assert "sm_80" in line and "108 SMs" in line and "no fp8" in line and "40 MiB" in line


# ---------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("h200", "h200"),
        ("H200", "h200"),
        (" H100 SXM ", "h100"),
        ("b200", "b200"),
        ("rtx-pro-6000", "rtx-pro-6000"),
        ("RTX PRO 6000", "rtx-pro-6000"),
        ("rtx6000pro", "rtx-pro-6000"),
        ("rtx_pro_6000", "rtx-pro-6000"),
        ("5090", "rtx-5090"),
        ("RTX 5090", "rtx-5090"),
        ("gb10", "dgx-spark"),
        ("spark", "dgx-spark"),
        ("DGX Spark", "dgx-spark"),
        ("4090", "rtx-4090"),
        ("L40S", "l40s"),
        ("a100-sxm", "a100"),
        ("3090", "rtx-3090"),
    ],
)
def test_get_spec_aliases(alias: str, expected: str) -> None:
    assert get_spec(alias) is PRESETS[expected]


@pytest.mark.parametrize("bad", ["h300", "rtx-6000-ada", "", "sm_90"])
def test_get_spec_unknown_lists_presets(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown GPU preset") as info:
        get_spec(bad)
    for name in PRESETS:
        assert name in str(info.value)


def test_current_spec_honours_wavemla_gpu() -> None:
    with config.override(WAVEMLA_GPU="spark"):
        assert current_spec() is PRESETS["dgx-spark"]
    with config.override(WAVEMLA_GPU="RTX PRO 6000"):
        assert current_spec() is PRESETS["rtx-pro-6000"]
    with config.override(WAVEMLA_GPU="h300"), pytest.raises(ValueError, match="WAVEMLA_GPU='h300'"):
        current_spec()


# ---------------------------------------------------------------- occupancy


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_eight_warps_at_255_registers_fit_once(name: str) -> None:
    # 255 regs x 32 lanes round up to 8,192 registers per warp: 2 warps per 16K sub-partition, 8 per SM
    spec = PRESETS[name]
    occ = spec.occupancy(smem_bytes=0, regs_per_thread=255, num_warps=8)
    assert (occ.blocks, occ.limiter) == (1, "registers")
    assert spec.blocks_per_sm(0, 255, 4) == 2


@pytest.mark.parametrize(
    ("name", "blocks", "limiter"),
    [
        pytest.param("h200", 2, "smem", id="sm90-two"),
        pytest.param("b200", 2, "smem", id="sm100-two"),
        pytest.param("a100", 1, "smem", id="sm80-one"),
        pytest.param("rtx-pro-6000", 0, "smem_per_block", id="sm120-trap"),
        pytest.param("dgx-spark", 0, "smem_per_block", id="sm121-trap"),
        pytest.param("rtx-4090", 0, "smem_per_block", id="sm89"),
        pytest.param("rtx-3090", 0, "smem_per_block", id="sm86"),
    ],
)
def test_100kb_kernel(name: str, blocks: int, limiter: str) -> None:
    occ = PRESETS[name].occupancy(smem_bytes=100 * KIB, regs_per_thread=128, num_warps=4)
    assert (occ.blocks, occ.limiter) == (blocks, limiter)


@pytest.mark.parametrize(
    ("smem", "blocks"),
    [
        pytest.param(0, 8, id="none-register-limited"),  # 64 regs: 32 warps fit
        pytest.param(48 * KIB, 2, id="48K"),
        pytest.param(49 * KIB, 2, id="49K-exactly-two"),  # 2 x (49 KB + 1 KB reserved) = 100 KB
        pytest.param(49 * KIB + 1, 1, id="49K+1-rounds-to-128B"),
        pytest.param(99 * KIB, 1, id="99K-max"),
        pytest.param(99 * KIB + 1, 0, id="99K+1-over"),
        pytest.param(24 * KIB, 4, id="24K"),
        pytest.param(24 * KIB + 1, 3, id="24K+1"),
    ],
)
def test_sm120_shared_memory_granularity(smem: int, blocks: int) -> None:
    assert get_spec("rtx-pro-6000").blocks_per_sm(smem, 64, 4) == blocks


@pytest.mark.parametrize(
    ("name", "smem", "regs", "warps", "blocks", "limiter"),
    [
        pytest.param("h100", 0, 32, 1, 32, "blocks", id="sm90-1warp-block-cap"),
        pytest.param("rtx-5090", 0, 32, 1, 24, "blocks", id="sm120-1warp-block-cap"),
        pytest.param("rtx-3090", 0, 32, 1, 16, "blocks", id="sm86-1warp-block-cap"),
        pytest.param("rtx-5090", 0, 32, 32, 1, "warps", id="sm120-32warps"),
        pytest.param("h100", 0, 16, 32, 2, "warps", id="sm90-32warps"),
        pytest.param("h100", 0, 128, 4, 4, "registers", id="128regs"),
        pytest.param("h100", 0, 129, 4, 3, "registers", id="129regs-round-to-256"),
        pytest.param("h100", 0, 128, 16, 1, "registers", id="16warps-128regs"),
        pytest.param("h100", 0, 255, 16, 0, "regs_per_block", id="16warps-255regs-over-64K"),
        pytest.param("h100", 0, 224, 9, 0, "registers", id="9warps-224regs-sub-partitions"),
        pytest.param("rtx-4090", 0, 64, 8, 4, "registers", id="sm89-64regs"),
        pytest.param("rtx-4090", 0, 40, 8, 6, "registers+warps", id="sm89-40regs-tie"),
        pytest.param("h100", 0, 64, 8, 4, "registers", id="sm90-64regs"),
        pytest.param("h100", 0, 32, 2, 32, "registers+warps+blocks", id="three-way-tie"),
    ],
)
def test_blocks_per_sm(name: str, smem: int, regs: int, warps: int, blocks: int, limiter: str) -> None:
    occ = PRESETS[name].occupancy(smem, regs, warps)
    assert (occ.blocks, occ.limiter) == (blocks, limiter)
    assert PRESETS[name].blocks_per_sm(smem, regs, warps) == blocks


def test_occupancy_reason_names_the_resource() -> None:
    h200, pro = get_spec("h200"), get_spec("rtx-pro-6000")
    reason = h200.occupancy_reason(100 * KIB, 128, 4)
    assert reason.startswith("2 blocks/SM") and "shared memory" in reason and "103,424 B" in reason
    reason = pro.occupancy_reason(100 * KIB, 128, 4)
    assert reason.startswith("0 blocks/SM") and "101,376 B" in reason and "sm_120" in reason
    assert "registers" in h200.occupancy_reason(0, 255, 8)
    assert "warps" in pro.occupancy_reason(0, 32, 32)
    assert "resident blocks" in pro.occupancy_reason(0, 32, 1)
    assert "registers a block may use" in h200.occupancy_reason(0, 255, 16)


@pytest.mark.parametrize(
    ("smem", "regs", "warps", "says"),
    [
        pytest.param(0, 32, 0, r"^num_warps must be in 1\.\.32, got 0", id="no-warps"),
        pytest.param(0, 32, 33, r"^num_warps must be in 1\.\.32, got 33", id="33-warps"),
        pytest.param(0, 0, 4, r"^regs_per_thread must be in 1\.\.255, got 0", id="no-regs"),
        pytest.param(0, 256, 4, r"^regs_per_thread must be in 1\.\.255, got 256", id="256-regs"),
        pytest.param(-1, 32, 4, r"^smem_bytes must be >= 0, got -1", id="negative-smem"),
    ],
)
def test_occupancy_rejects_impossible_inputs(smem: int, regs: int, warps: int, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        get_spec("h100").blocks_per_sm(smem, regs, warps)


# ---------------------------------------------------------------- the torch query


def _override_arch(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    import triton

    monkeypatch.setattr(triton.knobs.runtime, "override_arch", value)


def _props(name: str, major: int, minor: int, sms: int, **extra: int) -> SimpleNamespace:
    return SimpleNamespace(name=name, major=major, minor=minor, multi_processor_count=sms, **extra)


def _hopper_props(name: str) -> SimpleNamespace:
    """What torch reports for a 132-SM sm_90 part (H100 SXM, H200)."""
    return _props(
        name,
        9,
        0,
        132,
        shared_memory_per_multiprocessor=233_472,
        shared_memory_per_block_optin=232_448,
        regs_per_multiprocessor=65_536,
        max_threads_per_multi_processor=2048,
        L2_cache_size=52_428_800,
    )


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, props: SimpleNamespace) -> list[Any]:
    """torch reports ``props``; Triton builds for that GPU's own architecture (no TRITON_OVERRIDE_ARCH)."""
    _override_arch(monkeypatch, None)
    seen: list[Any] = []

    def get_device_properties(device: Any = None) -> SimpleNamespace:
        seen.append(device)
        return props

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", get_device_properties)
    return seen


def test_from_torch_without_cuda_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NoCudaDeviceError, match="no CUDA device") as info:
        DeviceSpec.from_torch()
    assert isinstance(info.value, RuntimeError)
    assert "WAVEMLA_GPU" in str(info.value)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        get_spec("auto")
    with config.override(WAVEMLA_GPU=None), pytest.raises(RuntimeError, match="no CUDA device"):
        current_spec()


def test_from_torch_matches_a_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_gpu(
        monkeypatch,
        _hopper_props("NVIDIA H100 80GB HBM3"),
    )
    spec = DeviceSpec.from_torch(3)
    assert seen == [3]
    assert dataclasses.replace(spec, display_name="", source="") == dataclasses.replace(
        PRESETS["h100"], display_name="", source=""
    )
    assert spec.display_name == "NVIDIA H100 80GB HBM3"
    assert "preset 'h100'" in spec.source


def test_from_torch_prefers_driver_values(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(
        monkeypatch,
        _props(
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            12,
            0,
            188,
            shared_memory_per_multiprocessor=102_400,
            shared_memory_per_block_optin=101_376,
            regs_per_multiprocessor=65_536,
            max_threads_per_multi_processor=1536,
            L2_cache_size=100 * MIB,
        ),
    )
    spec = DeviceSpec.from_torch()
    assert spec.name == "rtx-pro-6000"
    assert spec.l2_bytes == 100 * MIB  # what the driver says wins over the preset
    assert spec.bf16_tflops == PRESETS["rtx-pro-6000"].bf16_tflops


def test_from_torch_unknown_gpu_is_estimated(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(
        monkeypatch,
        _props(
            "NVIDIA GeForce RTX 5080",
            12,
            0,
            84,
            shared_memory_per_multiprocessor=102_400,
            shared_memory_per_block_optin=101_376,
            max_threads_per_multi_processor=1536,
            L2_cache_size=64 * MIB,
            memory_clock_rate=15_001_000,
            memory_bus_width=256,
        ),
    )
    spec = DeviceSpec.from_torch()
    ref = PRESETS["rtx-5090"]
    assert spec.name == "geforce-rtx-5080"
    assert (spec.arch, spec.num_sms, spec.max_warps_per_sm, spec.max_blocks_per_sm) == (120, 84, 48, 24)
    assert spec.bf16_tflops == pytest.approx(ref.bf16_tflops * 84 / 170, abs=0.1)
    assert spec.fp8_tflops == pytest.approx(ref.fp8_tflops * 84 / 170, abs=0.1)  # type: ignore[operator]
    assert spec.mem_gbps == pytest.approx(960.1, abs=0.1)  # 2 x 15.001 GHz x 256 bit / 8
    assert "estimated" in spec.source


def test_from_torch_same_sms_other_sku_is_estimated(monkeypatch: pytest.MonkeyPatch) -> None:
    # H100 NVL has H100 SXM's 132 SMs but other clocks and memory: not the h100 preset
    _fake_gpu(monkeypatch, _props("NVIDIA H100 NVL", 9, 0, 132, L2_cache_size=50 * MIB))
    spec = DeviceSpec.from_torch()
    assert spec.name == "h100-nvl"
    assert "estimated" in spec.source
    # torch did not report shared memory, registers or threads: the arch's limits fill them
    assert (spec.smem_per_sm, spec.smem_per_block, spec.max_warps_per_sm) == (228 * KIB, 227 * KIB, 64)
    assert spec.regs_per_sm == 65_536


def test_from_torch_newer_arch_uses_nearest_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, _props("NVIDIA B300", 10, 3, 148, L2_cache_size=126 * MIB))
    spec = DeviceSpec.from_torch()
    assert (spec.arch, spec.max_blocks_per_sm, spec.smem_per_block) == (103, 32, 227 * KIB)
    assert "sm_100" in spec.source
    assert spec.bf16_tflops == PRESETS["b200"].bf16_tflops


def test_from_torch_rejects_pre_ampere(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, _props("Tesla T4", 7, 5, 40))
    with pytest.raises(RuntimeError, match="sm_80"):
        DeviceSpec.from_torch()


@pytest.mark.gpu
def test_from_torch_real_device() -> None:
    spec = DeviceSpec.from_torch()
    props = torch.cuda.get_device_properties(None)
    major, minor = torch.cuda.get_device_capability()
    assert spec.arch == (triton_override_arch() or 10 * major + minor)
    assert spec.num_sms == props.multi_processor_count
    assert spec.display_name == props.name
    assert spec.smem_per_block <= spec.smem_per_sm
    assert spec.blocks_per_sm(16 * KIB, 128, 4) >= 1
    assert spec.triton_target().arch == spec.arch


def test_triton_override_arch_parses_and_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    _override_arch(monkeypatch, None)
    assert triton_override_arch() is None
    _override_arch(monkeypatch, "sm86")
    assert triton_override_arch() == 86
    for bad in ("86", "sm_86", "ampere"):
        _override_arch(monkeypatch, bad)
        with pytest.raises(ValueError, match="TRITON_OVERRIDE_ARCH"):
            triton_override_arch()
    _override_arch(monkeypatch, "sm75")
    with pytest.raises(ValueError, match="sm80 or newer"):
        triton_override_arch()


def test_override_arch_drives_the_arch_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Triton building for sm_80 on an sm_90 GPU, e4m3 is bit-assembled and no launch is dependent."""
    monkeypatch.setattr(device_mod, "_physical_arch", lambda index: 90)
    monkeypatch.setattr(device_mod, "triton_interpreting", lambda: False)
    cuda = torch.device("cuda", 0)
    _override_arch(monkeypatch, None)
    assert (fp8_decode_path(cuda), dependent_launch(cuda)) == ("cvt", True)
    _override_arch(monkeypatch, "sm80")
    assert (fp8_decode_path(cuda), dependent_launch(cuda)) == ("bits", False)
    _override_arch(monkeypatch, "sm89")
    assert (fp8_decode_path(cuda), dependent_launch(cuda)) == ("cvt", False)


def test_device_arch_follows_the_override_and_refuses_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The architecture kernels are built for: the GPU's, or Triton's override; a CPU device has none."""
    monkeypatch.setattr(device_mod, "_physical_arch", lambda index: 90)
    _override_arch(monkeypatch, None)
    assert device_mod.device_arch(torch.device("cuda", 0)) == 90
    assert device_mod.device_arch("cuda:1") == 90
    _override_arch(monkeypatch, "sm120")
    assert device_mod.device_arch(torch.device("cuda", 0)) == 120
    with pytest.raises(ValueError, match="device"):
        device_mod.device_arch("cpu")


def test_p_scratch_follows_the_built_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sparse decode's P scratch rows (a warpgroup-MMA layout fix) go with what Triton builds, not with the GPU:
    on an H200 building along the sm_80 or sm_120 path they are not used."""
    from wavemla.kernels import sparse_decode

    monkeypatch.setattr(device_mod, "_physical_arch", lambda index: 90)
    cuda = torch.device("cuda", 0)
    _override_arch(monkeypatch, None)
    assert sparse_decode.p_scratch_elems(True, 64, 64, 1, cuda) > 0
    for arch in ("sm80", "sm120"):
        _override_arch(monkeypatch, arch)
        assert sparse_decode.p_scratch_elems(True, 64, 64, 1, cuda) == 0


def test_from_torch_under_override_arch_keeps_the_gpus_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, _hopper_props("NVIDIA H200"))
    native = DeviceSpec.from_torch()
    _override_arch(monkeypatch, "sm80")
    spec = DeviceSpec.from_torch()
    assert spec.arch == 80 and native.arch == 90
    assert dataclasses.replace(spec, arch=90, source="") == dataclasses.replace(native, source="")
    assert "built for sm_80 (TRITON_OVERRIDE_ARCH)" in spec.source
    assert spec.triton_target().arch == 80


def test_fp8_decode_path_knob() -> None:
    # CPU tensors run through Triton's interpreter, which emulates the e4m3 conversion
    assert fp8_decode_path("cpu") == "cvt"
    with config.override(WAVEMLA_FP8_DECODE="bits"):
        assert fp8_decode_path("cpu") == "bits"


def test_fp8_decode_path_by_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_mod, "_device_arch", lambda index: 86)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    cuda = torch.device("cuda", 0)
    assert fp8_decode_path(cuda) == "bits"
    with config.override(WAVEMLA_FP8_DECODE="cvt"), pytest.raises(ValueError, match="WAVEMLA_FP8_DECODE=cvt"):
        fp8_decode_path(cuda)
    monkeypatch.setattr(device_mod, "_device_arch", lambda index: 120)
    assert fp8_decode_path(cuda) == "cvt"


def test_dependent_launch_from_sm90_on_compiled_kernels_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Programmatic dependent launch (griddepcontrol) is used on sm_90 and newer; never for CPU tensors, which run
    through Triton's interpreter."""
    assert dependent_launch("cpu") is False
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(device_mod, "triton_interpreting", lambda: False)
    cuda = torch.device("cuda", 0)
    for arch, expected in ((80, False), (89, False), (90, True), (100, True), (120, True)):
        monkeypatch.setattr(device_mod, "_device_arch", lambda index, arch=arch: arch)
        assert dependent_launch(cuda) is expected, arch
    monkeypatch.setattr(device_mod, "triton_interpreting", lambda: True)
    assert dependent_launch(cuda) is False
