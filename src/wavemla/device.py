"""What the planner knows about a GPU: SMs, per-SM limits, L2, DRAM bandwidth and tensor-core rates.

:class:`DeviceSpec` holds one GPU's numbers. :data:`PRESETS` describes the GPUs wavemla is tuned for, so a
plan can be made (and tested) on a machine without that GPU; :meth:`DeviceSpec.from_torch` describes the GPU
that is present. This module is the only place in wavemla that asks torch about the GPU; :func:`current_spec`
honours the ``WAVEMLA_GPU`` knob (a preset name) before it asks.

Occupancy (:meth:`DeviceSpec.blocks_per_sm`) follows the CUDA occupancy calculator (``cuda_occupancy.h``, CUDA
Toolkit): registers are allocated per warp in units of 256 and split evenly over the SM's 4 sub-partitions;
shared memory is allocated in units of 128 bytes plus 1 KB the driver reserves per block; a block may not use
more than the per-block opt-in shared memory, so on sm_120/121 (99 KB per block) a 100 KB kernel does not
launch at all.

Sources cited in the comments below:

- [PG]  CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" table.
- [TG-Ampere], [TG-Hopper], [TG-Blackwell]  NVIDIA's "Tuning CUDA Applications for ..." guides, section
  "Occupancy" (the Blackwell guide covers compute capability 10.0 and 12.0).
- [OCC] ``cuda_occupancy.h`` (CUDA Toolkit 12.8-13.x): cudaOccSMemAllocationGranularity (128 B for majors
  8-12), cudaOccRegAllocationGranularity (256 registers per warp), cudaOccSubPartitionsPerMultiprocessor (4).
- [DQ]  ``cudaGetDeviceProperties`` read on shipping boards (sharedMemPerMultiprocessor,
  sharedMemPerBlockOptin, maxBlocksPerMultiProcessor, reservedSharedMemPerBlock, l2CacheSize), from public
  device-query dumps.
- Product datasheets and architecture whitepapers, named at each number. Tensor-core rates are dense
  (datasheets quote 2:4-sparse rates, twice as high) with FP32 accumulation, the mode attention kernels use.

Example::

    from wavemla.device import get_spec
    spec = get_spec("rtx-pro-6000")
    spec.blocks_per_sm(smem_bytes=100 * 1024, regs_per_thread=128, num_warps=4)  # 0: over 99 KB per block
    get_spec("h200").blocks_per_sm(smem_bytes=100 * 1024, regs_per_thread=128, num_warps=4)  # 2
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wavemla import config

if TYPE_CHECKING:
    import torch
    from triton.backends.compiler import GPUTarget

KIB = 1024
MIB = 1024 * 1024

WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024  # [PG], every compute capability >= 2.0
REGS_PER_SM = 64 * KIB  # [PG] "Number of 32-bit registers per SM": 64K for cc 5.0-12.x
REGS_PER_BLOCK = 64 * KIB  # [PG] "Maximum number of 32-bit registers per thread block": 64K
MAX_REGS_PER_THREAD = 255  # [PG] "Maximum number of 32-bit registers per thread"; [TG-Blackwell] "255"
REG_ALLOC_UNIT = 256  # [OCC] registers are allocated per warp, rounded up to 256
REG_SUB_PARTITIONS = 4  # [OCC] a warp's registers come from one of the SM's 4 sub-partitions
SMEM_ALLOC_UNIT = 128  # [OCC] shared memory allocation granularity for compute capability 8.x-12.x
# [TG-Blackwell] "CUDA reserves 1 KB of shared memory per thread block" (cudaDeviceProp::
# reservedSharedMemPerBlock = 1024 on sm_80+ [DQ]): why every smem_sm - smem_block below is exactly 1 KB.
SMEM_RESERVED_PER_BLOCK = 1 * KIB


class NoCudaDeviceError(RuntimeError):
    """torch sees no CUDA device, so :meth:`DeviceSpec.from_torch` has nothing to describe."""


@dataclass(frozen=True)
class _ArchLimits:
    smem_sm: int  # bytes per SM usable by blocks
    smem_block: int  # opt-in bytes per block
    warps: int  # resident warps per SM
    blocks: int  # resident blocks per SM


# Per compute capability. smem_per_sm is what blocks may use (the driver's sharedMemPerMultiprocessor), not
# the size of the unified L1/shared array; smem_per_block is the opt-in maximum (sharedMemPerBlockOptin).
_ARCH_LIMITS: dict[int, _ArchLimits] = {
    # sm_80 (A100): [PG] 164 KB/SM, 163 KB/block, 64 warps, 32 blocks; [TG-Ampere] same; [DQ] A100-SXM4-80GB
    # reports 167,936 / 166,912 B and 32 blocks.
    80: _ArchLimits(smem_sm=164 * KIB, smem_block=163 * KIB, warps=64, blocks=32),
    # sm_86 (GA10x): [PG] and [TG-Ampere] 100 KB/SM, 99 KB/block, 48 warps, 16 blocks; [DQ] RTX 3090 reports
    # 102,400 B per SM and 1,536 threads per SM.
    86: _ArchLimits(smem_sm=100 * KIB, smem_block=99 * KIB, warps=48, blocks=16),
    # sm_89 (Ada): [PG] 100 KB/SM, 99 KB/block, 48 warps, 24 blocks; [DQ] RTX 4090 and RTX 5000 Ada report
    # 102,400 / 101,376 B, 1,536 threads and maxBlocksPerMultiProcessor 24.
    89: _ArchLimits(smem_sm=100 * KIB, smem_block=99 * KIB, warps=48, blocks=24),
    # sm_90 (Hopper): [PG] and [TG-Hopper] 228 KB/SM, 227 KB/block, 64 warps, 32 blocks; [DQ] H100 reports
    # 233,472 / 232,448 B and 32 blocks.
    90: _ArchLimits(smem_sm=228 * KIB, smem_block=227 * KIB, warps=64, blocks=32),
    # sm_100 (B200): [TG-Blackwell] "shared memory capacity per SM is 228 KB", "maximum shared memory per
    # thread block is 227 KB", 64 warps, 32 blocks; [DQ] B200 reports 228 KB per SM and 2,048 threads per SM.
    100: _ArchLimits(smem_sm=228 * KIB, smem_block=227 * KIB, warps=64, blocks=32),
    # sm_120 (GB202/GB203...): [TG-Blackwell] 48 warps and 99 KB per block. The guide lists "128 KB" per SM
    # (the unified L1/shared array) and 32 blocks per SM, but the driver reports 102,400 B usable per SM and
    # maxBlocksPerMultiProcessor = 24 on an RTX PRO 6000 Blackwell [DQ]; we take the driver's values (24 is
    # the conservative one; it only binds for blocks of 1 warp).
    120: _ArchLimits(smem_sm=100 * KIB, smem_block=99 * KIB, warps=48, blocks=24),
    # sm_121 (GB10): [DQ] on DGX Spark sharedMemPerBlockOptin = 101,376 B, and cudaDeviceGetAttribute gives
    # cudaDevAttrMaxSharedMemoryPerMultiprocessor = 102,400 and cudaDevAttrMaxBlocksPerMultiprocessor = 24;
    # 48 warps is taken from sm_120 (same SM design, binary compatible).
    121: _ArchLimits(smem_sm=100 * KIB, smem_block=99 * KIB, warps=48, blocks=24),
}


@dataclass(frozen=True)
class Occupancy:
    """Blocks of one kernel configuration resident on one SM, what each resource allows, and what binds.

    ``limiter`` is one of ``smem_per_block`` / ``regs_per_block`` (the block cannot launch at all), ``smem``,
    ``registers``, ``warps``, ``blocks`` (per-SM limits; ties are joined with ``+``).
    """

    blocks: int
    limiter: str
    by_smem: int
    by_registers: int
    by_warps: int
    by_blocks: int
    reason: str


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU as the planner sees it. Sizes are bytes; rates are dense datasheet peaks.

    ``fp8_tflops`` is None on GPUs without FP8 tensor cores (sm_80, sm_86). ``source`` says where the numbers
    came from (preset notes, or the torch query plus the preset that filled the rest).
    """

    name: str
    display_name: str
    arch: int
    num_sms: int
    smem_per_sm: int
    smem_per_block: int
    regs_per_sm: int
    max_regs_per_thread: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    l2_bytes: int
    mem_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    source: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("DeviceSpec.name must not be empty")
        if self.arch < 80:
            raise ValueError(f"{self.name}: sm_{self.arch}; wavemla needs sm_80 or newer (bf16 tensor cores)")
        positive = (
            "num_sms",
            "smem_per_sm",
            "smem_per_block",
            "regs_per_sm",
            "max_warps_per_sm",
            "max_blocks_per_sm",
            "l2_bytes",
            "mem_gbps",
            "bf16_tflops",
        )
        for field in positive:
            if not getattr(self, field) > 0:
                raise ValueError(f"{self.name}: {field} must be positive, got {getattr(self, field)!r}")
        if self.fp8_tflops is not None and not self.fp8_tflops > 0:
            raise ValueError(f"{self.name}: fp8_tflops must be positive or None, got {self.fp8_tflops!r}")
        if self.smem_per_block > self.smem_per_sm:
            raise ValueError(
                f"{self.name}: smem_per_block {self.smem_per_block} exceeds smem_per_sm {self.smem_per_sm}"
            )
        if not 1 <= self.max_regs_per_thread <= MAX_REGS_PER_THREAD:
            raise ValueError(f"{self.name}: max_regs_per_thread must be in 1..{MAX_REGS_PER_THREAD}")

    # ------------------------------------------------------------------ queries

    @classmethod
    def from_torch(cls, device: int | str | torch.device | None = None) -> DeviceSpec:
        """Describe a CUDA device (default: the current one) from ``torch.cuda.get_device_properties``.

        The SM count, shared memory, registers, threads per SM and L2 come from the driver. Limits torch does
        not expose (blocks per SM) come from the compute capability; DRAM bandwidth and tensor-core rates come
        from the preset whose name, arch and SM count match, else they are estimated from the arch's reference
        preset scaled by SM count (``source`` says so). With Triton's ``TRITON_OVERRIDE_ARCH`` set, ``arch`` is the
        architecture Triton builds for (:func:`triton_override_arch`); everything else stays the GPU's. Raises
        :class:`NoCudaDeviceError` when torch sees no CUDA device.
        """
        import torch

        if not torch.cuda.is_available():
            raise NoCudaDeviceError(
                f"no CUDA device is visible to torch {torch.__version__} "
                f"(CUDA runtime {torch.version.cuda}); "
                f"set WAVEMLA_GPU to one of {', '.join(PRESETS)} to plan without a GPU"
            )
        return _spec_from_properties(torch.cuda.get_device_properties(device))

    def triton_target(self) -> GPUTarget:
        """The Triton compile target for this GPU, for compiling kernels ahead of time without it."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.arch, WARP_SIZE)

    def summary(self) -> str:
        """One line: name, arch, SMs, shared memory, L2, bandwidth and tensor rates."""
        fp8 = "no fp8 MMA" if self.fp8_tflops is None else f"fp8 {self.fp8_tflops:g}"
        return (
            f"{self.display_name} [{self.name}] sm_{self.arch}, {self.num_sms} SMs, "
            f"smem {self.smem_per_sm // KIB} KB/SM {self.smem_per_block // KIB} KB/block, "
            f"L2 {self.l2_bytes / MIB:g} MiB, {self.mem_gbps:g} GB/s, "
            f"bf16 {self.bf16_tflops:g} / {fp8} TFLOPS"
        )

    # ------------------------------------------------------------------ occupancy

    def occupancy(self, smem_bytes: int, regs_per_thread: int, num_warps: int) -> Occupancy:
        """Resident blocks per SM of a kernel using ``smem_bytes`` of shared memory (static + dynamic, as
        Triton reports it in ``kernel.metadata.shared``), ``regs_per_thread`` registers (``kernel.n_regs``)
        and ``num_warps`` warps per block, with the limit that binds.
        """
        max_warps_per_block = MAX_THREADS_PER_BLOCK // WARP_SIZE
        if not 1 <= num_warps <= max_warps_per_block:
            raise ValueError(f"num_warps must be in 1..{max_warps_per_block}, got {num_warps}")
        if not 1 <= regs_per_thread <= self.max_regs_per_thread:
            raise ValueError(f"regs_per_thread must be in 1..{self.max_regs_per_thread}, got {regs_per_thread}")
        if smem_bytes < 0:
            raise ValueError(f"smem_bytes must be >= 0, got {smem_bytes}")

        regs_per_warp = _round_up(regs_per_thread * WARP_SIZE, REG_ALLOC_UNIT)
        smem_per_block = _round_up(smem_bytes, SMEM_ALLOC_UNIT) + SMEM_RESERVED_PER_BLOCK
        warps_by_registers = (self.regs_per_sm // REG_SUB_PARTITIONS // regs_per_warp) * REG_SUB_PARTITIONS
        by_smem = self.smem_per_sm // smem_per_block
        by_registers = warps_by_registers // num_warps
        by_warps = self.max_warps_per_sm // num_warps
        by_blocks = self.max_blocks_per_sm

        def result(blocks: int, limiter: str, reason: str) -> Occupancy:
            return Occupancy(blocks, limiter, by_smem, by_registers, by_warps, by_blocks, reason)

        if smem_bytes > self.smem_per_block:
            return result(
                0,
                "smem_per_block",
                (
                    f"0 blocks/SM on {self.name}: {smem_bytes:,} B of shared memory exceeds the "
                    f"{self.smem_per_block:,} B a block may use on sm_{self.arch}"
                ),
            )
        if regs_per_warp * num_warps > REGS_PER_BLOCK:
            return result(
                0,
                "regs_per_block",
                (
                    f"0 blocks/SM on {self.name}: {num_warps} warps x {regs_per_warp:,} registers "
                    f"({regs_per_thread}/thread) exceed the {REGS_PER_BLOCK:,} registers a block may use"
                ),
            )
        by_resource = {"smem": by_smem, "registers": by_registers, "warps": by_warps, "blocks": by_blocks}
        blocks = min(by_resource.values())
        binding = [k for k, v in by_resource.items() if v == blocks]
        details = {
            "smem": f"{smem_per_block:,} B per block ({smem_bytes:,} B in {SMEM_ALLOC_UNIT} B units + "
            f"{SMEM_RESERVED_PER_BLOCK:,} B reserved) of {self.smem_per_sm:,} B per SM",
            "registers": f"{regs_per_warp:,} registers per warp, {warps_by_registers} warps fit the "
            f"{self.regs_per_sm:,}-register file ({REG_SUB_PARTITIONS} sub-partitions)",
            "warps": f"{num_warps} warps per block of {self.max_warps_per_sm} per SM",
            "blocks": f"at most {self.max_blocks_per_sm} resident blocks per SM on sm_{self.arch}",
        }
        names = {"smem": "shared memory", "registers": "registers", "warps": "warps", "blocks": "blocks"}
        return result(
            blocks,
            "+".join(binding),
            (
                f"{blocks} blocks/SM on {self.name}, limited by "
                + " and ".join(f"{names[k]}: {details[k]}" for k in binding)
            ),
        )

    def blocks_per_sm(self, smem_bytes: int, regs_per_thread: int, num_warps: int) -> int:
        """Resident blocks per SM (0 when the block cannot launch); see :meth:`occupancy`."""
        return self.occupancy(smem_bytes, regs_per_thread, num_warps).blocks

    def occupancy_reason(self, smem_bytes: int, regs_per_thread: int, num_warps: int) -> str:
        """A sentence naming the resource that limits :meth:`blocks_per_sm`, with the numbers behind it."""
        return self.occupancy(smem_bytes, regs_per_thread, num_warps).reason


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _preset(
    *,
    name: str,
    display_name: str,
    arch: int,
    num_sms: int,
    l2_bytes: int,
    mem_gbps: float,
    bf16_tflops: float,
    fp8_tflops: float | None,
    source: str,
) -> DeviceSpec:
    limits = _ARCH_LIMITS[arch]
    return DeviceSpec(
        name=name,
        display_name=display_name,
        arch=arch,
        num_sms=num_sms,
        smem_per_sm=limits.smem_sm,
        smem_per_block=limits.smem_block,
        regs_per_sm=REGS_PER_SM,
        max_regs_per_thread=MAX_REGS_PER_THREAD,
        max_warps_per_sm=limits.warps,
        max_blocks_per_sm=limits.blocks,
        l2_bytes=l2_bytes,
        mem_gbps=mem_gbps,
        bf16_tflops=bf16_tflops,
        fp8_tflops=fp8_tflops,
        source=source,
    )


# Per-arch limits come from _ARCH_LIMITS (cited there); each product number is cited where it is set.
PRESETS: dict[str, DeviceSpec] = {
    spec.name: spec
    for spec in (
        _preset(
            name="h100",
            display_name="NVIDIA H100 SXM5 80GB",
            arch=90,
            num_sms=132,  # NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5 has 132 SMs
            l2_bytes=50 * MIB,  # same whitepaper: 50 MB L2; [DQ] l2CacheSize = 52,428,800
            mem_gbps=3350.0,  # NVIDIA H100 Tensor Core GPU datasheet (SXM): 3.35 TB/s HBM3
            bf16_tflops=989.5,  # H100 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity
            fp8_tflops=1979.0,  # H100 datasheet: FP8 Tensor Core 3,958 TFLOPS with sparsity
            source="H100 whitepaper and datasheet (SXM5); dense = half the sparse datasheet rates",
        ),
        _preset(
            name="h200",
            display_name="NVIDIA H200 SXM 141GB",
            arch=90,
            # H200 is the GH100 die of H100 SXM5 with HBM3e; its datasheet gives no SM count, only tensor rates
            # equal to H100 SXM5's. 132 SMs (%smid 0-131) on an H200 in
            # benchmarks/results/2026-12-03-h200-dispatch-order-4b5c9df.json.
            num_sms=132,
            # Uncertain: the H200 datasheet gives no L2 size; taken as H100 SXM5's 50 MB (H100 architecture
            # whitepaper), though 60 MiB is also quoted for the H200. Only summary() shows it.
            l2_bytes=50 * MIB,
            mem_gbps=4800.0,  # NVIDIA H200 Tensor Core GPU datasheet (SXM): 4.8 TB/s HBM3e
            bf16_tflops=989.5,  # H200 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity
            fp8_tflops=1979.0,  # H200 datasheet: FP8 Tensor Core 3,958 TFLOPS with sparsity
            source="H200 datasheet (SXM); dense = half the sparse datasheet rates",
        ),
        _preset(
            name="b200",
            display_name="NVIDIA B200",
            arch=100,
            num_sms=148,  # [DQ] multiProcessorCount = 148 on B200 (HGX B200)
            l2_bytes=126 * MIB + 512 * KIB,  # [DQ] l2CacheSize 126.5 MiB; [TG-Blackwell] "126 MB"
            # NVIDIA HGX B200 datasheet: 8 TB/s per GPU. Uncertain: the driver reports a 7,680-bit bus at
            # 3,996 MHz, i.e. 7,672 GB/s by the deviceQuery formula.
            mem_gbps=8000.0,
            bf16_tflops=2250.0,  # NVIDIA DGX/HGX B200 datasheet: FP16/BF16 4.5 PFLOPS per GPU with sparsity
            fp8_tflops=4500.0,  # DGX/HGX B200 datasheet: FP8 9 PFLOPS per GPU with sparsity
            source="HGX/DGX B200 datasheet per-GPU rates; SMs and L2 from the driver",
        ),
        _preset(
            name="rtx-pro-6000",
            # The Workstation Edition. The Server Edition has the same 188 SMs but lower clocks and memory
            # bandwidth (NVIDIA RTX PRO 6000 Blackwell Server Edition product page: 1,597 GB/s, 120 FP32
            # TFLOPS against the Workstation Edition's 125), so these rates overstate it by about 4% (tensor) and
            # 12% (DRAM).
            display_name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            arch=120,
            num_sms=188,  # NVIDIA RTX Blackwell GPU architecture whitepaper: 188 of GB202's 192 SMs; [DQ] 188
            l2_bytes=128 * MIB,  # [DQ] l2CacheSize = 134,217,728 (full GB202 L2)
            # RTX PRO 6000 Blackwell Workstation Edition datasheet: 1,792 GB/s (512-bit GDDR7 at 28 Gbps)
            mem_gbps=1792.0,
            # Uncertain, derived: the datasheet gives only "4,000 AI TOPS" (FP4, sparse). Dense FP8 = 4000/4,
            # BF16 = 4000/8, equal to 188 SMs x 1,024 dense FP16 FLOP/clk/SM x 2.617 GHz boost. The pro line
            # runs FP32 accumulation at full rate (a measured torch bf16 matmul reaches ~417 TFLOPS, above a
            # half-rate peak).
            bf16_tflops=503.8,
            fp8_tflops=1007.6,
            source="RTX Blackwell whitepaper and RTX PRO 6000 Workstation Edition datasheet; tensor rates from AI TOPS",
        ),
        _preset(
            name="rtx-5090",
            display_name="NVIDIA GeForce RTX 5090",
            arch=120,
            num_sms=170,  # NVIDIA RTX Blackwell GPU architecture whitepaper: 170 SMs; [DQ] 170
            l2_bytes=96 * MIB,  # RTX Blackwell whitepaper: 96 MB L2; [DQ] l2CacheSize = 100,663,296
            mem_gbps=1792.0,  # RTX Blackwell whitepaper: 1,792 GB/s (512-bit GDDR7 at 28 Gbps)
            # RTX Blackwell whitepaper: FP16/BF16 with FP32 accumulate 209.5 dense (GeForce runs
            # FP32-accumulate MMA at half the FP16-accumulate rate of 419). FP8 with FP32 accumulate 419 dense
            # (838 with FP16 accumulate).
            bf16_tflops=209.5,
            fp8_tflops=419.0,
            source="RTX Blackwell whitepaper (GeForce RTX 5090), FP32-accumulate rates at 2.41 GHz boost",
        ),
        _preset(
            name="dgx-spark",
            display_name="NVIDIA DGX Spark (GB10)",
            arch=121,
            num_sms=48,  # DGX Spark product page: 6,144 CUDA cores = 48 SMs x 128; [DQ] 48 SMs, cc 12.1
            l2_bytes=24 * MIB,  # not on NVIDIA's spec pages; [DQ] deviceQuery on DGX Spark: 25,165,824 B
            # DGX Spark product page: 273 GB/s (128 GB LPDDR5x, shared with the CPU); [DQ] 256-bit at 8,533 MT/s
            mem_gbps=273.0,
            # Uncertain, derived: NVIDIA publishes only "1 PFLOP FP4 with sparsity". Dense FP8 = 1000/4, BF16
            # = 1000/8; whether GB10 halves FP32-accumulate MMA (as GeForce does) is not documented.
            bf16_tflops=125.0,
            fp8_tflops=250.0,
            source="DGX Spark product page; tensor rates derived from 1 PFLOP sparse FP4; L2 as users report",
        ),
        _preset(
            name="rtx-4090",
            display_name="NVIDIA GeForce RTX 4090",
            arch=89,
            num_sms=128,  # NVIDIA Ada GPU Architecture whitepaper: RTX 4090 has 128 SMs; [DQ] 128
            l2_bytes=72 * MIB,  # Ada whitepaper: 72 MB; [DQ] l2CacheSize = 75,497,472
            mem_gbps=1008.0,  # Ada whitepaper: 1,008 GB/s (384-bit GDDR6X at 21 Gbps)
            # Ada whitepaper appendix: BF16 with FP32 accumulate 165.2 dense; FP8 with FP32 accumulate 330.3
            # dense (corrected from 660.6, the FP16-accumulate FP8 rate, in whitepaper v2.02).
            bf16_tflops=165.2,
            fp8_tflops=330.3,
            source="NVIDIA Ada GPU Architecture whitepaper (GeForce RTX 4090), FP32-accumulate rates",
        ),
        _preset(
            name="l40s",
            display_name="NVIDIA L40S",
            arch=89,
            num_sms=142,  # L40S datasheet: 18,176 CUDA cores = 142 SMs x 128
            l2_bytes=96 * MIB,  # Ada whitepaper: full AD102 has 96 MB L2; [DQ] L40S l2CacheSize = 100,663,296
            mem_gbps=864.0,  # NVIDIA L40S datasheet: 864 GB/s GDDR6
            bf16_tflops=362.05,  # L40S datasheet: BF16 Tensor Core 362.05 | 733 TFLOPS (dense | sparse)
            fp8_tflops=733.0,  # L40S datasheet: FP8 Tensor Core 733 | 1,466 TFLOPS (dense | sparse)
            source="NVIDIA L40S datasheet",
        ),
        _preset(
            name="a100",
            display_name="NVIDIA A100 SXM4 80GB",
            arch=80,
            num_sms=108,  # NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs; [DQ] 108
            l2_bytes=40 * MIB,  # A100 whitepaper: 40 MB; [DQ] l2CacheSize = 41,943,040
            mem_gbps=2039.0,  # NVIDIA A100 datasheet: 80GB SXM 2,039 GB/s HBM2e
            bf16_tflops=312.0,  # A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity)
            fp8_tflops=None,  # Ampere has no FP8 tensor cores
            source="NVIDIA A100 whitepaper and datasheet (SXM4 80GB)",
        ),
        _preset(
            name="rtx-3090",
            display_name="NVIDIA GeForce RTX 3090",
            arch=86,
            num_sms=82,  # NVIDIA Ampere GA102 GPU Architecture whitepaper: RTX 3090 has 82 SMs; [DQ] 82
            l2_bytes=6 * MIB,  # GA102 whitepaper: 6 MB; [DQ] l2CacheSize = 6,291,456
            mem_gbps=936.0,  # GA102 whitepaper: 936 GB/s (384-bit GDDR6X at 19.5 Gbps)
            bf16_tflops=71.0,  # GA102 whitepaper: BF16 with FP32 accumulate 71 dense (142 with sparsity)
            fp8_tflops=None,  # Ampere has no FP8 tensor cores
            source="NVIDIA Ampere GA102 whitepaper (GeForce RTX 3090), FP32-accumulate rates",
        ),
    )
}

# Extra spellings accepted by get_spec, compared after _normalize (lower case, letters and digits only).
_ALIASES: dict[str, str] = {
    "h100sxm": "h100",
    "h100sxm5": "h100",
    "h200sxm": "h200",
    "rtx6000pro": "rtx-pro-6000",
    "pro6000": "rtx-pro-6000",
    "rtxpro6000blackwell": "rtx-pro-6000",
    "rtx6000problackwell": "rtx-pro-6000",
    "5090": "rtx-5090",
    "geforcertx5090": "rtx-5090",
    "spark": "dgx-spark",
    "gb10": "dgx-spark",
    "4090": "rtx-4090",
    "geforcertx4090": "rtx-4090",
    "a100sxm": "a100",
    "a10080gb": "a100",
    "a100sxm480gb": "a100",
    "3090": "rtx-3090",
    "geforcertx3090": "rtx-3090",
}

# How a torch device name maps to a preset: every "require" substring present, no "exclude" substring present
# (SKUs with the same SM count but other clocks or memory: H100/H200 NVL, H100 PCIe, RTX PRO 6000 Max-Q, 5090
# D).
_NAME_MATCH: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "h100": (("h100",), ("pcie", "nvl")),
    "h200": (("h200",), ("nvl",)),
    "b200": (("b200",), ()),
    "rtx-pro-6000": (("pro 6000", "blackwell"), ("max-q",)),
    "rtx-5090": (("rtx 5090",), ("5090 d", "laptop")),
    "dgx-spark": (("gb10",), ()),
    "rtx-4090": (("rtx 4090",), ("4090 d", "laptop")),
    "l40s": (("l40s",), ()),
    "a100": (("a100", "80gb"), ("pcie",)),
    "rtx-3090": (("rtx 3090",), ("laptop",)),
}

# The preset whose per-SM rates stand in for an unlisted GPU of the same arch. GeForce parts where possible:
# their half-rate FP32 accumulation makes the estimate a lower bound for pro parts of that arch.
_ARCH_REFERENCE: dict[int, str] = {
    80: "a100",
    86: "rtx-3090",
    89: "rtx-4090",
    90: "h100",
    100: "b200",
    120: "rtx-5090",
    121: "dgx-spark",
}


def _normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_auto(name: str) -> bool:
    """Whether ``name`` asks :func:`get_spec` for the GPU torch sees (``auto``, spelt in any case, spaces, dashes and
    underscores ignored)."""
    return _normalize(name) == "auto"


_BY_KEY: dict[str, str] = {_normalize(n): n for n in PRESETS} | _ALIASES


def get_spec(name_or_auto: str) -> DeviceSpec:
    """A preset by name (case, spaces, dashes and underscores ignored; aliases such as ``5090``,
    ``rtx6000pro``, ``gb10``, ``spark``), or ``"auto"`` for :meth:`DeviceSpec.from_torch`. Unknown names raise
    ValueError.
    """
    if is_auto(name_or_auto):
        return DeviceSpec.from_torch()
    key = _normalize(name_or_auto)
    if key not in _BY_KEY:
        raise ValueError(
            f"unknown GPU preset {name_or_auto!r}; presets: {', '.join(PRESETS)} (or 'auto' to query the GPU)"
        )
    return PRESETS[_BY_KEY[key]]


def current_spec() -> DeviceSpec:
    """The GPU to plan for: the ``WAVEMLA_GPU`` preset when set, else the CUDA device torch sees."""
    name = config.get("WAVEMLA_GPU")
    if name is None:
        return DeviceSpec.from_torch()
    try:
        return get_spec(name)
    except ValueError as exc:
        raise ValueError(f"WAVEMLA_GPU={name!r}: {exc}") from None


# Triton's float8e4nv type (and the cvt.f16x2.e4m3x2 instruction behind its conversion) starts at sm_89.
E4M3_CVT_MIN_ARCH = 89


def fp8_decode_path(device: Any) -> str:
    """How the sparse decode and indexer kernels on ``device`` decode e4m3: ``"cvt"`` (hardware conversion; FP8
    tensor-core dots for FP8 indexer queries) or ``"bits"`` (bit assembly).

    The ``WAVEMLA_FP8_DECODE`` knob decides when it is not ``auto``; ``auto`` picks ``cvt`` on sm_89 and newer and
    on CPU tensors (Triton's interpreter emulates the conversion), ``bits`` on sm_80/86. Forcing ``cvt`` on a part
    without it raises ValueError.
    """
    import torch

    choice = config.get("WAVEMLA_FP8_DECODE")
    dev = torch.device(device)
    if dev.type != "cuda":
        return "bits" if choice == "bits" else "cvt"
    arch = device_arch(dev)
    if choice == "cvt" and arch < E4M3_CVT_MIN_ARCH:
        raise ValueError(f"WAVEMLA_FP8_DECODE=cvt: sm_{arch} has no e4m3 conversion (sm_89 or newer needed)")
    if choice == "auto":
        return "cvt" if arch >= E4M3_CVT_MIN_ARCH else "bits"
    return str(choice)


# griddepcontrol (programmatic dependent launch) starts at sm_90.
_PDL_MIN_ARCH = 90


def dependent_launch(device: Any) -> bool:
    """Whether kernels on ``device`` use programmatic dependent launch: a kernel that reads its predecessor's
    output is launched while the predecessor still runs and waits in ``griddepcontrol.wait`` (sm_90 and newer,
    compiled kernels only: not under Triton's interpreter)."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda" or triton_interpreting():
        return False
    return device_arch(dev) >= _PDL_MIN_ARCH


def triton_interpreting() -> bool:
    """Whether Triton runs kernels through its interpreter (``TRITON_INTERPRET=1``, read when Triton is imported)."""
    import triton

    knobs = getattr(triton, "knobs", None)
    return bool(knobs is not None and knobs.runtime.interpret)


def check_kernel_device(name: str, t: torch.Tensor) -> None:
    """Raise ValueError naming ``name`` unless ``t`` lives where wavemla's kernels run: on a CUDA device, or on the
    CPU while Triton interprets kernels."""
    if not (t.device.type == "cuda" or (t.device.type == "cpu" and triton_interpreting())):
        raise ValueError(
            f"{name}: expected a CUDA tensor (or Triton's interpreter mode for CPU tensors), got {t.device}"
        )


def triton_override_arch() -> int | None:
    """The architecture Triton builds kernels for instead of the GPU's, from Triton's ``TRITON_OVERRIDE_ARCH``
    (``sm80``, ``sm89``, ...), else None.

    With it set, Triton lowers every kernel along that architecture's code path (``mma.sync`` instead of wgmma on
    ``sm80``, no hardware e4m3 conversion, ...) and only ptxas targets the GPU present: the portable kernels run,
    and are tested, on a newer GPU. (An override newer than the GPU works only while its path uses nothing the GPU
    lacks: the sm_120 path runs on an H200; an sm_89 path would not run on an A100, for its e4m3 conversion.)
    wavemla then makes every architecture-dependent choice for that architecture too (e4m3 decode, dependent
    launch, compiled resources, the planner's configuration), while the SM count and the memory limits stay the
    GPU's.
    """
    import triton

    knobs = getattr(triton, "knobs", None)
    value = getattr(getattr(knobs, "runtime", None), "override_arch", None)
    if not value:
        return None
    match = re.fullmatch(r"sm(\d+)", str(value))
    if match is None:
        raise ValueError(f"TRITON_OVERRIDE_ARCH={value!r}: expected the form sm<NN>, e.g. sm80")
    arch = int(match.group(1))
    if arch < 80:
        raise ValueError(f"TRITON_OVERRIDE_ARCH={value!r}: wavemla needs sm80 or newer (bf16 tensor cores)")
    return arch


def device_arch(device: Any) -> int:
    """The architecture (``90`` for sm_90) kernels on CUDA ``device`` are built for: Triton's override
    (:func:`triton_override_arch`), else the GPU's."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: a CUDA device has an architecture, got {dev}")
    return _device_arch(dev.index if dev.index is not None else torch.cuda.current_device())


def _device_arch(index: int) -> int:
    """The architecture kernels on CUDA device ``index`` are built for: Triton's override, else the GPU's."""
    return triton_override_arch() or _physical_arch(index)


@functools.lru_cache(maxsize=16)
def _physical_arch(index: int) -> int:
    import torch

    major, minor = torch.cuda.get_device_capability(index)
    return int(major) * 10 + int(minor)


def _prop_int(props: Any, attr: str) -> int | None:
    """An integer device property, or None when this torch build does not expose it (or reports 0)."""
    value = getattr(props, attr, None)
    return int(value) if value else None


def _spec_from_properties(props: Any) -> DeviceSpec:
    """A DeviceSpec from a ``torch.cuda.get_device_properties`` result; see :meth:`DeviceSpec.from_torch`."""
    display_name = str(props.name)
    arch = int(props.major) * 10 + int(props.minor)
    if arch < 80:
        raise RuntimeError(f"{display_name} is sm_{arch}; wavemla needs sm_80 or newer (bf16 tensor cores)")
    num_sms = int(props.multi_processor_count)
    lower = display_name.lower()
    notes = [f"torch.cuda.get_device_properties: {display_name}, sm_{arch}, {num_sms} SMs"]
    build_arch = triton_override_arch() or arch
    if build_arch != arch:
        notes.append(f"kernels built for sm_{build_arch} (TRITON_OVERRIDE_ARCH); limits and rates are the GPU's")

    known_arch = max(a for a in _ARCH_LIMITS if a <= arch)
    limits = _ARCH_LIMITS[known_arch]
    if known_arch != arch:
        notes.append(f"sm_{arch} is not in the table; unreported limits taken from sm_{known_arch}")
    threads = _prop_int(props, "max_threads_per_multi_processor")

    named = [
        key
        for key, (require, exclude) in _NAME_MATCH.items()
        if PRESETS[key].arch == arch and all(s in lower for s in require) and not any(s in lower for s in exclude)
    ]
    exact = next((key for key in named if PRESETS[key].num_sms == num_sms), None)
    if exact is not None:
        ref = PRESETS[exact]
        name = ref.name
        mem_gbps, bf16, fp8 = ref.mem_gbps, ref.bf16_tflops, ref.fp8_tflops
        notes.append(f"bandwidth and tensor rates from preset {ref.name!r}")
    else:
        ref = PRESETS[named[0] if named else _ARCH_REFERENCE[known_arch]]
        name = re.sub(r"[^a-z0-9]+", "-", lower).strip("-").removeprefix("nvidia-")
        scale = num_sms / ref.num_sms
        bf16 = round(ref.bf16_tflops * scale, 1)
        fp8 = None if ref.fp8_tflops is None else round(ref.fp8_tflops * scale, 1)
        notes.append(f"no preset matches; tensor rates estimated as {ref.name!r} x {num_sms}/{ref.num_sms}")
        clock_khz = _prop_int(props, "memory_clock_rate")
        bus_bits = _prop_int(props, "memory_bus_width")
        if clock_khz and bus_bits:
            # deviceQuery's convention: two transfers per reported memory clock.
            mem_gbps = round(2 * clock_khz * 1e3 * bus_bits / 8 / 1e9, 1)
            notes.append("bandwidth from the reported memory clock and bus width")
        else:
            mem_gbps = round(ref.mem_gbps * min(1.0, scale), 1)
            notes.append(f"bandwidth estimated from {ref.name!r} (not reported by torch)")

    l2_bytes = _prop_int(props, "L2_cache_size")
    if l2_bytes is None:
        l2_bytes = ref.l2_bytes
        notes.append(f"L2 size from {ref.name!r} (not reported by torch)")
    return DeviceSpec(
        name=name,
        display_name=display_name,
        arch=build_arch,
        num_sms=num_sms,
        smem_per_sm=_prop_int(props, "shared_memory_per_multiprocessor") or limits.smem_sm,
        smem_per_block=_prop_int(props, "shared_memory_per_block_optin") or limits.smem_block,
        regs_per_sm=_prop_int(props, "regs_per_multiprocessor") or REGS_PER_SM,
        max_regs_per_thread=MAX_REGS_PER_THREAD,
        max_warps_per_sm=threads // WARP_SIZE if threads else limits.warps,
        max_blocks_per_sm=limits.blocks,
        l2_bytes=l2_bytes,
        mem_gbps=mem_gbps,
        bf16_tflops=bf16,
        fp8_tflops=fp8,
        source="; ".join(notes),
    )
