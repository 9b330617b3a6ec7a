"""The course's one hardware table: what a GPU can compute, hold and move, each number with its source;
and the one count of the CPU cores a process may use (``usable_cores``), with the one way to spread
arithmetic over them (``on_every_core``).

Every number is the vendor's datasheet figure, converted to SI base units (FLOP/s, bytes, bytes/s),
never a measured or "achievable" figure: the gap between peak and achieved is what MFU measures.
Conventions, chosen once so that every chapter reads the table the same way:

* ``peak_bf16_flops`` is *dense* BF16 tensor-core throughput.  Hopper and Blackwell datasheets
  print the 2:4-sparse figure; the dense one is half of it.
* ``hbm_bytes`` is the datasheet's "GB" read as 10^9 bytes.  The parts really carry GiB-sized
  stacks: ``memory_mib`` is what nvidia-smi reports (an "80 GB" H100: 81,559 MiB = 85.5e9 bytes),
  and ``memory_bytes`` the capacity a training process sees, which the planner's "does it fit" uses.
* ``tdp_w`` is the datasheet's maximum board power (TDP), the power its peaks assume; a cluster run
  under a lower power limit (``Cluster.power_limit_w``) clocks its tensor cores down.
* ``peak_fp8_flops`` is *dense* FP8 tensor-core throughput (None where the part has none).
* ``exp_rate`` is the special-function units' exponential throughput over a Blackwell's: 2 on Blackwell
  Ultra (B300, GB300), which doubled it for attention's softmax; 1 elsewhere.
* ``nvlink_bidirectional_bytes_per_s`` is the datasheet's per-GPU NVLink figure, which counts both
  directions; ``nvlink_bytes_per_s`` is one direction (what a ring collective's formula uses).
* ``network_bytes_per_s`` is one direction of the GPU's own NIC in the vendor's reference node
  (DGX/HGX: one InfiniBand/Ethernet port per GPU), i.e. the scale-out bandwidth per GPU.
* A GB200 or GB300 NVL72 rack is one "node": its 72 GPUs share one NVLink domain (four to a compute tray,
  each GPU with its own NIC).  A job placed in blocks of fewer GPUs a rack (Slurm's ``--segment``) says so
  with ``Cluster.of(gpu, gpus_per_node=...)``.
* Older and non-NVIDIA accelerators, so that published runs on them can be replayed: the V100 has
  no BF16, so its 16-bit (FP16) tensor-core peak stands in ``peak_bf16_flops``; a TPU's "node" is
  its pod (every chip of a pod is joined by the inter-chip interconnect, ICI, which plays NVLink's
  part), Google's "GiB" is read as 2^30 bytes, and the one-direction ICI bandwidth per chip is the
  pod's published all-reduce bandwidth divided by its chips (for v5e and v6e, where Google also
  prints the per-chip figure, that quotient is exactly half the bidirectional number).

Add an accelerator by adding one ``GPU(...)`` to ``_TABLE`` with its sources; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["GPU", "gpu", "gpu_names", "all_gpus", "UnknownGPUError", "usable_cores", "on_every_core"]

GB = 1e9
TB = 1e12
TFLOPS = 1e12
GBIT = 1e9 / 8  # bytes per second in one Gb/s
GIB = 2 ** 30


class UnknownGPUError(ValueError):
    """A GPU name that is not in the table."""


@dataclass(frozen=True)
class GPU:
    name: str                                  # canonical name, e.g. "H100"
    peak_bf16_flops: float                     # dense BF16 tensor-core FLOP/s
    hbm_bytes: float                           # HBM capacity, bytes
    hbm_bytes_per_s: float                     # HBM bandwidth, bytes/s
    nvlink_bidirectional_bytes_per_s: float    # NVLink per GPU, both directions, bytes/s
    network_bytes_per_s: float                 # scale-out NIC per GPU, one direction, bytes/s
    gpus_per_node: int                         # GPUs joined by NVLink/NVSwitch in one node
    sources: dict = field(default_factory=dict, compare=False)  # field -> document
    aliases: tuple = field(default=(), compare=False)
    peak_fp8_flops: float | None = None        # dense FP8 tensor-core FLOP/s; None: no FP8 tensor cores
    memory_mib: int | None = None              # the memory the framework sees (nvidia-smi's MiB)
    tdp_w: float | None = None                 # board power the datasheet's peaks are quoted at, watts
    sms: int | None = None                     # streaming multiprocessors (what NCCL's kernels take a share of)
    architecture: str = ""                     # volta, ampere, hopper, blackwell, tpu: which kernels exist for it
    host_link_bytes_per_s: float | None = None  # GPU <-> host memory (PCIe or NVLink-C2C), one direction, bytes/s
    exp_rate: float = 1.0                      # softmax's exponential (MUFU.EX2) per SM per clock, over Blackwell's

    @property
    def memory_bytes(self) -> float:
        """What a training process can allocate from: nvidia-smi's total (MiB, 2^20 bytes) when
        known, else the datasheet's capacity.  An "80 GB" H100 shows 81,559 MiB = 85.5e9 bytes."""
        return self.memory_mib * 2 ** 20 if self.memory_mib else self.hbm_bytes

    @property
    def nvlink_bytes_per_s(self) -> float:
        """One direction of the GPU's NVLink bandwidth."""
        return self.nvlink_bidirectional_bytes_per_s / 2

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "aliases"}
        out["nvlink_bytes_per_s"] = self.nvlink_bytes_per_s
        out["memory_bytes"] = self.memory_bytes
        return out


_A100_DATASHEET = ("NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4), "
                   "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                   "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_DGX_A100 = ("NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 200 Gb/s HDR InfiniBand for the "
             "compute fabric, one per GPU, https://www.nvidia.com/content/dam/en-zz/Solutions/"
             "Data-Center/nvidia-dgx-a100-datasheet.pdf")
_H100_DATASHEET = ("NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: BF16 1,979 TFLOPS with "
                   "sparsity (dense is half), https://resources.nvidia.com/en-us-tensor-core/"
                   "nvidia-tensor-core-gpu-datasheet")
_H200_PAGE = ("NVIDIA H200 Tensor Core GPU product page / datasheet, H200 SXM column: BF16 1,979 "
              "TFLOPS with sparsity (dense is half), https://www.nvidia.com/en-us/data-center/h200/")
_DGX_HOPPER = ("NVIDIA DGX BasePOD reference architecture, DGX H100/H200: eight single-port "
               "ConnectX-7 VPI, up to 400 Gb/s each, https://docs.nvidia.com/dgx-basepod/"
               "reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html")
_HGX_B200 = ("NVIDIA HGX platform datasheet, HGX B200 (8 GPUs): FP16/BF16 36 PFLOPS with sparsity, "
             "NVLink 1.8 TB/s per GPU, https://www.nvidia.com/en-us/data-center/hgx/")
_DGX_B200 = ("NVIDIA DGX B200 datasheet: 1,440 GB total HBM3e, 64 TB/s HBM bandwidth, eight "
             "single-port ConnectX-7 up to 400 Gb/s, https://www.nvidia.com/en-us/data-center/dgx-b200/")

_H800 = ("NVIDIA H800 SXM5 (the export variant of the H100 SXM: the same compute and HBM3, NVLink cut "
         "to 400 GB/s per GPU); DeepSeek-AI 2024 (arXiv:2412.19437) Sec. 3.1: NVLink 160 GB/s achievable, "
         "8 x 400 Gb/s InfiniBand NICs per 8-GPU node")
_NVIDIA_SMI = ("nvidia-smi's memory total on the part (MiB): A100 80GB 81,920; A100 40GB 40,960; H100 SXM 80GB "
               "81,559; H200 SXM 143,771; B200 183,359; V100 SXM2 32GB 32,768")
_FP8 = ("dense FP8 tensor-core peak, half the datasheet's with-sparsity figure: H100/H200/H800 SXM 3,958 -> "
        "1,979 TFLOPS; HGX B200 72 PFLOPS / 8 GPUs -> 9,000 -> 4,500 TFLOPS; A100, V100 and TPU v3/v4 have "
        "no FP8 tensor cores")

_TDP = ("datasheets' max thermal design power: A100 SXM 400 W, H100/H200/H800 SXM up to 700 W (configurable), "
        "B200 1,000 W (HGX B200 per GPU), V100 SXM2 300 W")
_GRAND_TETON = ("Meta's Grand Teton H100 as torchtitan's benchmark describes it: 'NVIDIA H100 GPUs ... 96GB HBM2e "
                "with 2.4 TB/sec peak memory bandwidth ... default 500W power limit', https://github.com/pytorch/"
                "torchtitan/blob/31a17bfdb70bab6f62a13d21816a5339b911d6e3/benchmarks/"
                "llama3_h100_202412_torchtitan.md; compute, NVLink and NIC as the H100 SXM (the H100 datasheet, "
                "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)")

_SMS = ("NVIDIA architecture whitepapers: A100 Tensor Core GPU Architecture (108 SMs on the A100), NVIDIA H100 "
        "Tensor Core GPU Architecture (132 SMs on the H100 SXM5; H800, H200 and Grand Teton's H100 are the same "
        "die configuration), Volta V100 whitepaper (80 SMs), https://resources.nvidia.com/en-us-tensor-core; the B200, which NVIDIA's "
        "datasheets do not count: 'B200 enables 74 SMs per die, giving 148 SMs across the GPU' (Chips and Cheese, "
        "'Nvidia's B200: Keeping the CUDA Juggernaut Rolling', 2025, https://chipsandcheese.com)")

_GB200_NVL72 = ("NVIDIA GB200 NVL72 specifications, per rack of 72 GPUs: FP16/BF16 360 PFLOPS and FP8/FP6 720 PFLOPS "
                "with sparsity (dense: 2,500 and 5,000 TFLOPS a GPU), HBM3e 13.4 TB at 576 TB/s (186 GB and 8 TB/s a "
                "GPU), NVLink 130 TB/s (1.8 TB/s a GPU, as NVLink 5 gives every Blackwell), one NVLink domain, https://www.nvidia.com/en-us/data-center/"
                "gb200-nvl72/; the GPU configured at 1,200 W there (NVIDIA Blackwell architecture technical brief, as "
                "tabulated at https://glennklockwood.com/garden/processors/B200)")
_DGX_GB200 = ("NVIDIA DGX GB200 datasheet: 72x OSFP single-port ConnectX-7 VPI with 400 Gb/s InfiniBand per rack, one "
              "per GPU, https://www.nvidia.com/en-us/data-center/dgx-gb200/")
_GB300_NVL72 = ("NVIDIA GB300 NVL72 specifications, per rack of 72 Blackwell Ultra GPUs: FP8 360 PFLOPS dense (5,000 "
                "TFLOPS a GPU; BF16 half of it), HBM3e 20 TB at 576 TB/s (288 GB a Blackwell Ultra GPU, 8 TB/s), NVLink 130 TB/s (1.8 TB/s a GPU), "
                "72 ConnectX-8 NICs, https://www.nvidia.com/en-us/data-center/gb300-nvl72/; each compute tray's four "
                "GPUs have four ConnectX-8 (800 Gb/s each), https://docs.nvidia.com/enterprise-reference-architectures/"
                "nvl72-ai-factory/latest/components.html")
_HGX_B300 = ("NVIDIA HGX B300 (8 Blackwell Ultra GPUs): FP16/BF16 36 PFLOPS and FP8 72 PFLOPS with sparsity, up to "
             "2.3 TB HBM3e (288 GB a GPU) at up to 8 TB/s a GPU, NVLink 1.8 TB/s per GPU, one 800 Gb/s ConnectX-8 "
             "SuperNIC per GPU, https://www.nvidia.com/en-us/data-center/hgx/ and https://www.nvidia.com/en-us/"
             "data-center/dgx-b300/")
_BLACKWELL_BOARDS = ("Blackwell Ultra's board power and SMs: B300 1.1 kW, GB300 1.4 kW (Verda, 'NVIDIA GB300 NVL72: GPU "
                    "Architecture & Performance', https://verda.com/blog/gb300-nvl72-architecture); 160 SMs (NVIDIA "
                    "technical blog, 'Inside NVIDIA Blackwell Ultra: The Chip Powering the AI Factory Era', 2025, "
                    "https://developer.nvidia.com/blog/inside-nvidia-blackwell-ultra-the-chip-powering-the-ai-factory-era/); "
                    "the GB200's GPU taken as the B200's 148 SMs (the same Blackwell GPU, at 1,200 W)")
_ULTRA_EXP = ("Blackwell Ultra doubles the SFUs' MUFU.EX2 (exponential) throughput over Blackwell: NVIDIA technical "
              "blog, 'Making Softmax More Efficient with NVIDIA Blackwell Ultra', 2026, https://developer.nvidia.com/"
              "blog/making-softmax-more-efficient-with-nvidia-blackwell-ultra/")

_V100_DATASHEET = ("NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2 column: 125 TFLOPS tensor (FP16, "
                   "no BF16), 32 GB HBM2 at 900 GB/s, NVLink 300 GB/s, https://images.nvidia.com/content/"
                   "technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf")
_DGX1_V100 = ("NVIDIA DGX-1 with Tesla V100 system architecture white paper: 8 V100 SXM2 in a hybrid cube-mesh, "
              "4x 100 Gb/s EDR InfiniBand per node (4 x 100 / 8 = 50 Gb/s per GPU), https://images.nvidia.com/"
              "content/pdf/dgx1-v100-system-architecture-whitepaper.pdf")
_TPU_V3 = ("Google Cloud TPU v3 documentation: 123 TFLOPS (bf16) per chip, HBM2 32 GiB at 900 GBps, pod of "
           "1024 chips, all-reduce bandwidth per pod 340 TB/s (/1024 = 332 GB/s per chip, one direction), "
           "https://cloud.google.com/tpu/docs/v3")
_TPU_V4 = ("Google Cloud TPU v4 documentation: 275 TFLOPS (bf16) per chip, HBM2 32 GiB at 1200 GBps, pod of "
           "4096 chips, all-reduce bandwidth per pod 1.1 PB/s (/4096 = 269 GB/s per chip, one direction), "
           "https://cloud.google.com/tpu/docs/v4")
_TPU_DCN = ("assumed: Google publishes no per-chip data-centre-network figure for TPU v3/v4, and within a pod "
            "all chip-to-chip traffic rides ICI, so the ICI figure stands in (optimistic across pods); "
            "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm")

_HOST_LINK = ("the GPU's link to host memory, one direction (half the both-directions figure): PCIe Gen3 x16 32 GB/s "
              "(V100 datasheet), Gen4 64 GB/s (A100 datasheet), Gen5 128 GB/s (H100 and H200 datasheets; the DGX B200's "
              "and DGX B300's Xeon hosts are PCIe Gen5, so a B200's or B300's Gen6 port runs at Gen5 there, "
              "https://www.nvidia.com/en-us/data-center/dgx-b200/); on a GB200 or GB300 rack a Grace CPU reaches its two "
              "GPUs over NVLink-C2C at 900 GB/s both directions (https://www.nvidia.com/en-us/data-center/gb200-nvl72/), "
              "taken as shared by the two: 450 GB/s a GPU")


def _one_sheet(sheet: str, **others: str) -> dict:
    """Sources for a part whose one specification sheet gives every datasheet figure; ``others`` names the rest."""
    fields = ("peak_bf16_flops", "hbm_bytes", "hbm_bytes_per_s", "nvlink_bidirectional_bytes_per_s",
              "network_bytes_per_s", "gpus_per_node", "peak_fp8_flops", "tdp_w")
    return {**dict.fromkeys(fields, sheet), **others}


_TABLE = (
    GPU("A100-40GB", 312 * TFLOPS, 40 * GB, 1555 * GB, 600 * GB, 200 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _A100_DATASHEET, "hbm_bytes": _A100_DATASHEET,
                 "hbm_bytes_per_s": _A100_DATASHEET, "nvlink_bidirectional_bytes_per_s": _A100_DATASHEET,
                 "network_bytes_per_s": _DGX_A100, "gpus_per_node": _DGX_A100,
                 "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("a100-40", "a100 40gb", "a100_40gb", "a100-40g"),
        host_link_bytes_per_s=32 * GB, architecture="ampere", memory_mib=40960, tdp_w=400, sms=108),
    GPU("A100-80GB", 312 * TFLOPS, 80 * GB, 2039 * GB, 600 * GB, 200 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _A100_DATASHEET, "hbm_bytes": _A100_DATASHEET,
                 "hbm_bytes_per_s": _A100_DATASHEET, "nvlink_bidirectional_bytes_per_s": _A100_DATASHEET,
                 "network_bytes_per_s": _DGX_A100, "gpus_per_node": _DGX_A100,
                 "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("a100", "a100-80", "a100 80gb", "a100_80gb", "a100-80g"),
        host_link_bytes_per_s=32 * GB, architecture="ampere", memory_mib=81920, tdp_w=400, sms=108),
    GPU("H100", 1979 / 2 * TFLOPS, 80 * GB, 3350 * GB, 900 * GB, 400 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _H100_DATASHEET, "hbm_bytes": _H100_DATASHEET,
                 "hbm_bytes_per_s": _H100_DATASHEET, "nvlink_bidirectional_bytes_per_s": _H100_DATASHEET,
                 "network_bytes_per_s": _DGX_HOPPER, "gpus_per_node": _DGX_HOPPER,
                 "peak_fp8_flops": _FP8, "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("h100-sxm", "h100 sxm", "h100_sxm", "h100-80gb", "h100-sxm5"), host_link_bytes_per_s=64 * GB, architecture="hopper",
        peak_fp8_flops=3958 / 2 * TFLOPS, memory_mib=81559, tdp_w=700, sms=132),
    GPU("H100-96GB", 1979 / 2 * TFLOPS, 96 * GB, 2400 * GB, 900 * GB, 400 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _H100_DATASHEET, "hbm_bytes": _GRAND_TETON, "hbm_bytes_per_s": _GRAND_TETON,
                 "nvlink_bidirectional_bytes_per_s": _GRAND_TETON, "network_bytes_per_s": _GRAND_TETON,
                 "gpus_per_node": _GRAND_TETON, "peak_fp8_flops": _FP8, "tdp_w": _TDP, "sms": _SMS},
        aliases=("h100-hbm2e", "h100-96gb-hbm2e", "grand-teton-h100"),
        host_link_bytes_per_s=64 * GB, architecture="hopper", peak_fp8_flops=3958 / 2 * TFLOPS, tdp_w=700, sms=132),
    GPU("H800", 1979 / 2 * TFLOPS, 80 * GB, 3350 * GB, 400 * GB, 400 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _H100_DATASHEET, "hbm_bytes": _H100_DATASHEET,
                 "hbm_bytes_per_s": _H100_DATASHEET, "nvlink_bidirectional_bytes_per_s": _H800,
                 "network_bytes_per_s": _H800, "gpus_per_node": _H800, "peak_fp8_flops": _FP8,
                 "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("h800-sxm", "h800 sxm", "h800_sxm", "h800-80gb"),
        host_link_bytes_per_s=64 * GB, architecture="hopper", peak_fp8_flops=3958 / 2 * TFLOPS,
        memory_mib=81559, tdp_w=700, sms=132),
    GPU("H200", 1979 / 2 * TFLOPS, 141 * GB, 4800 * GB, 900 * GB, 400 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _H200_PAGE, "hbm_bytes": _H200_PAGE, "hbm_bytes_per_s": _H200_PAGE,
                 "nvlink_bidirectional_bytes_per_s": _H200_PAGE,
                 "network_bytes_per_s": _DGX_HOPPER, "gpus_per_node": _DGX_HOPPER,
                 "peak_fp8_flops": _FP8, "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("h200-sxm", "h200 sxm", "h200_sxm", "h200-141gb"),
        host_link_bytes_per_s=64 * GB, architecture="hopper", peak_fp8_flops=3958 / 2 * TFLOPS,
        memory_mib=143771, tdp_w=700, sms=132),
    GPU("B200", 36000 / 8 / 2 * TFLOPS, 1440 / 8 * GB, 64 / 8 * TB, 1800 * GB, 400 * GBIT, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _HGX_B200, "hbm_bytes": _DGX_B200, "hbm_bytes_per_s": _DGX_B200,
                 "nvlink_bidirectional_bytes_per_s": _HGX_B200,
                 "network_bytes_per_s": _DGX_B200, "gpus_per_node": _DGX_B200,
                 "peak_fp8_flops": _FP8, "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("b200-sxm", "hgx-b200", "dgx-b200"),
        host_link_bytes_per_s=64 * GB, architecture="blackwell", peak_fp8_flops=72000 / 8 / 2 * TFLOPS, memory_mib=183359,
        tdp_w=1000, sms=148),
    GPU("GB200", 360000 / 72 / 2 * TFLOPS, 186 * GB, 576 * TB / 72, 1800 * GB, 400 * GBIT, 72,
        sources=_one_sheet(_GB200_NVL72, network_bytes_per_s=_DGX_GB200, sms=_BLACKWELL_BOARDS, host_link_bytes_per_s=_HOST_LINK),
        aliases=("gb200-nvl72", "gb200 nvl72", "dgx-gb200"),
        host_link_bytes_per_s=225 * GB, architecture="blackwell", peak_fp8_flops=720000 / 72 / 2 * TFLOPS, tdp_w=1200, sms=148),
    GPU("B300", 36000 / 8 / 2 * TFLOPS, 288 * GB, 8 * TB, 1800 * GB, 800 * GBIT, 8,
        sources=_one_sheet(_HGX_B300, tdp_w=_BLACKWELL_BOARDS, sms=_BLACKWELL_BOARDS, host_link_bytes_per_s=_HOST_LINK,
                           exp_rate=_ULTRA_EXP),
        aliases=("b300-sxm", "hgx-b300", "dgx-b300", "blackwell-ultra"),
        host_link_bytes_per_s=64 * GB, architecture="blackwell", peak_fp8_flops=72000 / 8 / 2 * TFLOPS, tdp_w=1100, sms=160,
        exp_rate=2.0),
    GPU("GB300", 360000 / 72 / 2 * TFLOPS, 288 * GB, 576 * TB / 72, 1800 * GB, 800 * GBIT, 72,
        sources=_one_sheet(_GB300_NVL72, tdp_w=_BLACKWELL_BOARDS, sms=_BLACKWELL_BOARDS, host_link_bytes_per_s=_HOST_LINK,
                           exp_rate=_ULTRA_EXP),
        aliases=("gb300-nvl72", "gb300 nvl72", "dgx-gb300"),
        host_link_bytes_per_s=225 * GB, architecture="blackwell", peak_fp8_flops=360000 / 72 * TFLOPS, tdp_w=1400, sms=160,
        exp_rate=2.0),
    GPU("V100", 125 * TFLOPS, 32 * GB, 900 * GB, 300 * GB, 4 * 100 * GBIT / 8, 8,
        sources={"host_link_bytes_per_s": _HOST_LINK, "peak_bf16_flops": _V100_DATASHEET, "hbm_bytes": _V100_DATASHEET,
                 "hbm_bytes_per_s": _V100_DATASHEET, "nvlink_bidirectional_bytes_per_s": _V100_DATASHEET,
                 "network_bytes_per_s": _DGX1_V100, "gpus_per_node": _DGX1_V100,
                 "memory_mib": _NVIDIA_SMI, "tdp_w": _TDP, "sms": _SMS},
        aliases=("v100-sxm2", "v100-32gb", "v100-sxm2-32gb", "tesla-v100"),
        host_link_bytes_per_s=16 * GB, architecture="volta", memory_mib=32768, tdp_w=300, sms=80),
    GPU("TPUv3", 123 * TFLOPS, 32 * GIB, 900 * GB, 2 * 340 * TB / 1024, 340 * TB / 1024, 1024,
        sources={"peak_bf16_flops": _TPU_V3, "hbm_bytes": _TPU_V3, "hbm_bytes_per_s": _TPU_V3,
                 "nvlink_bidirectional_bytes_per_s": _TPU_V3, "network_bytes_per_s": _TPU_DCN,
                 "gpus_per_node": _TPU_V3},
        aliases=("tpu-v3", "tpu-v3-chip", "cloud-tpu-v3"), architecture="tpu"),
    GPU("TPUv4", 275 * TFLOPS, 32 * GIB, 1200 * GB, 2 * 1100 * TB / 4096, 1100 * TB / 4096, 4096,
        sources={"peak_bf16_flops": _TPU_V4, "hbm_bytes": _TPU_V4, "hbm_bytes_per_s": _TPU_V4,
                 "nvlink_bidirectional_bytes_per_s": _TPU_V4, "network_bytes_per_s": _TPU_DCN,
                 "gpus_per_node": _TPU_V4},
        aliases=("tpu-v4", "tpu-v4-chip", "cloud-tpu-v4"), architecture="tpu"),
)


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


_BY_KEY = {_key(n): g for g in _TABLE for n in (g.name, *g.aliases)}


def gpu_names() -> list[str]:
    """Canonical names, in table order."""
    return [g.name for g in _TABLE]


def all_gpus() -> list[GPU]:
    return list(_TABLE)


def gpu(name) -> GPU:
    """The table row for ``name`` (case, spaces and underscores ignored; a GPU passes through)."""
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str) or _key(name) not in _BY_KEY:
        raise UnknownGPUError(f"unknown GPU {name!r}; known: {', '.join(gpu_names())}")
    return _BY_KEY[_key(name)]


def usable_cores() -> int:
    """CPU cores this process may run on: the machine's own, less any affinity it was pinned to."""
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def on_every_core(function, items) -> list:
    """``[function(i) for i in items]``, spread over the cores this process may use (``function`` must be
    importable by name): the replay of the published rows and the planner's larger layout searches are
    arithmetic of independent items, so two cores halve their time and a laptop's eight take an eighth.
    In order; on one core, in this process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    items = list(items)
    cores = usable_cores()
    if cores < 2 or len(items) < 2:
        return [function(i) for i in items]
    # spawn, not fork: the parent may hold torch's threads (a test run, a notebook), a child must not inherit them
    with ProcessPoolExecutor(min(cores, len(items)), mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(function, items, chunksize=max(1, len(items) // (8 * cores))))
