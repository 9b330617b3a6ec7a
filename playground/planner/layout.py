"""Where a model runs: the cluster and the parallel layout.

``Cluster`` (a GPU type and its links, from ``playground.hardware``), ``Layout`` (the degrees of
every kind of parallelism and the training knobs), ``Efficiency`` (the step-time model's free
constants, from ``efficiency``) and ``stage_layers`` (how pipeline stages split the layers when PP
does not divide them; in ``stages``, re-exported here).  Whether a layout can run at all is
``layout_checks.check_layout``.

Ranks are numbered as Megatron-Core numbers them: TP fastest, then CP, then DP (EP is carved out
of DP x CP), then PP.  ``Layout``'s dataclass defaults are the settings of Narayanan et al.'s 2021
runs (the step-time validation's); ``Layout.today`` applies what is trained today.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from playground import hardware
from playground.planner.efficiency import EFFICIENCY, MEASURED, Efficiency
from playground.planner.errors import PlanError
from playground.planner.stages import even_chunks, placement_note, stage_layers

__all__ = ["Cluster", "Layout", "Efficiency", "EFFICIENCY", "MEASURED", "BYTES", "RECOMPUTE", "RECOMPUTE_MODULES",
           "DTYPES", "FP8_SCALINGS", "EP_DISPATCHERS", "KERNELS", "CP_METHODS", "MOE_LAUNCH", "MOE_PROBS", "PP_SCHEDULES", "OPTIMIZER_MOMENTS", "RECOMPUTE_SHARES",
           "OFFLOAD_MODULES", "OFFLOAD_CHOICES",
           "stage_layers", "placement_note", "even_chunks"]

BYTES = 2  # bf16 activations, parameters and gradients
RECOMPUTE = ("none", "selective", "op", "full")  # "op": torchtitan's per-op selective checkpointing
# Megatron-Core's --recompute-modules (selective granularity; TransformerConfig.recompute_modules)
RECOMPUTE_MODULES = ("core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts")
# Megatron-Core's fine-grained activation offloading (--offload-modules): the modules whose *input* goes to host
# memory after the forward and comes back before the backward (docs/user-guide/features/
# fine_grained_activation_offloading.md): the attention's norm, QKV projection, core and output projection, the
# MLP's norm, and a MoE layer's first expert GEMM and activation
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act")
# the sets a range spans where a source offloads without naming the modules: none, and those Megatron-Core's MoE
# guide and docs and Megatron-Bridge's recipes use (expert_fc1 alone: its DeepSeek-V3 GB200 recipe; expert_fc1 and
# moe_act: the MoE README; core_attn and attn_proj: its DeepSeek recipes' common; all three: the feature's docs)
OFFLOAD_CHOICES = ((), ("expert_fc1",), ("expert_fc1", "moe_act"), ("core_attn", "attn_proj"),
                   ("core_attn", "attn_proj", "expert_fc1"))
DTYPES = ("bf16", "fp8")
# how FP8 GEMM operands are scaled: tensor (one scale per tensor from its current absolute maximum: Megatron-Bridge's
# FP8-CS, torchao's tensorwise float8), delayed (one per tensor from earlier steps' maxima: Transformer Engine's
# DelayedScaling, NeMo's FP8 before 2025), block (one per block of 32 or 128 elements, found in the cast: MXFP8,
# DeepSeek-V3's 1 x 128 tiles)
FP8_SCALINGS = ("tensor", "delayed", "block")
EP_DISPATCHERS = ("alltoall", "deepep", "hybridep")   # how tokens reach their experts (comm_costs.dispatch_time)
CP_METHODS = ("ring", "allgather", "ulysses")
KERNELS = ("fused", "eager")
TP_OVERLAP = ("none", "forward", "all")
MOE_LAUNCH = ("grouped", "multi_stream", "per_expert", "graphed")
# pipeline schedules (step_time's bubble): 1F1B (interleaved when vpp > 1), or ZB-H1, 1F1B with each backward split
# into its input-gradient half and a weight-gradient half deferred into the bubble (Qi et al. 2024)
PP_SCHEDULES = ("1f1b", "zb-h1")
# Adam's two moments: fp32 (4 bytes each, PyTorch's and Megatron's default) or bf16 (2 each: DeepSeek-V3's
# training, Megatron-Core's --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16), the fp32
# master weight kept either way
OPTIMIZER_MOMENTS = ("fp32", "bf16")
MOE_PROBS = ("activation", "combine")
RECOMPUTE_SHARES = (0.25, 0.5, 0.75)  # the shares of the blocks recomputed whole that the planner tries below all


@dataclass(frozen=True)
class Cluster:
    gpu: hardware.GPU
    gpus_per_node: int
    nvlink_bytes_per_s: float       # one direction, per GPU
    network_bytes_per_s: float      # one direction, per GPU
    power_limit_w: float | None = None  # a board power limit below the GPU's TDP (None: run at TDP)

    @classmethod
    def of(cls, gpu="A100-80GB", gpus_per_node=None, nvlink_bytes_per_s=None, network_bytes_per_s=None,
           power_limit_w=None):
        """A cluster of ``gpu`` nodes; anything not given comes from the hardware table."""
        try:
            g = hardware.gpu(gpu)
        except hardware.UnknownGPUError as e:
            raise PlanError(str(e)) from None
        for name, value in (("gpus_per_node", gpus_per_node), ("nvlink_bytes_per_s", nvlink_bytes_per_s),
                            ("network_bytes_per_s", network_bytes_per_s), ("power_limit_w", power_limit_w)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise PlanError(f"{name} must be a positive finite number, got {value!r}")
        return cls(g, gpus_per_node or g.gpus_per_node, nvlink_bytes_per_s or g.nvlink_bytes_per_s,
                   network_bytes_per_s or g.network_bytes_per_s, power_limit_w)


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    micro_batch: int = 1
    global_batch: int = 512          # sequences per step
    vpp: int = 1                     # virtual stages (model chunks) per GPU
    zero_stage: int = 0              # 0-2: Megatron's DDP / distributed optimizer; 3: FSDP
    recompute: str = "full"          # none | selective | op | full
    recompute_modules: tuple = ()    # with selective: Megatron-Core's --recompute-modules (RECOMPUTE_MODULES);
                                     # () is its default, ("core_attn",); ignored by the other policies
    recompute_share: float = 1.0     # with full: the share of the blocks recomputed whole, spread evenly (fms-fsdp's
                                     # selective_checkpointing p; Megatron's --recompute-method block with
                                     # --recompute-num-layers N: N over a chunk's layers); the others keep everything
    sequence_parallel: bool = False
    flash_attention: bool = False
    attention_kernel: str = "fa3"    # fused attention on Hopper+: fa3 (FlashAttention-3), cudnn (Transformer Engine's,
                                     # SDPA's cuDNN backend) or fa2 (PyTorch SDPA's flash backend);
                                     # fa1: FlashAttention-1 and its Triton port (2022-23)
    overlap_grad_reduce: bool = False  # Megatron-LM of 2021 reduced gradients after the flush
    scatter_gather: bool = True      # p2p sends 1/t of the activation per TP rank (Narayanan Sec. 4.1)
    cp: int = 1                      # context parallelism: the sequence split over cp ranks
    cp_method: str = "ring"          # ring (K/V blocks around the CP ring, behind block attention) | allgather
                                     # (Llama 3's: K/V all-gathered, exposed) | ulysses (DeepSpeed-Ulysses:
                                     # all-to-alls from sequence to heads and back, exposed)
    ep: int = 1                      # expert parallelism: the experts split over ep ranks of DP x CP
    expert_tp: int | None = None     # expert tensor parallelism (ETP); None: TP's degree.  ETP < TP
                                     # carves EP x ETP out of TP x CP x DP (Megatron-Core's MoE layout)
    shard_group: int | None = None   # ZeRO-3 as HSDP: shard over this many ranks, replicate across; None: all
    dropout: bool = True             # dropout masks kept for backward (GPT-3 era); off in today's recipes
    dtype: str = "bf16"              # GEMM precision: bf16, or fp8 (weights and optimizer stay as in bf16)
    kernels: str = "fused"           # fused (Megatron/TE, torch.compile) or eager (PyTorch op by op)
    tp_overlap: str = "none"         # TP collectives behind the GEMMs beside them: none | forward (PyTorch's
                                     # async TP) | all (Transformer Engine's TP comm overlap)
    reshard_after_forward: bool = True  # FSDP2: free gathered weights after forward (False: keep them all step)
    fp8_gather: bool = False         # FSDP all-gathers weights in float8 (1 byte each; torchtitan's option)
    fp32_gather: bool = False        # FSDP keeps and all-gathers the weights in fp32, 4 bytes each (FSDP1 without
                                     # a param_dtype under autocast: Composer's DEFAULT, plain Accelerate)
    autocast_fp32: bool = False      # bf16 autocast over weights kept in fp32 (plain PyTorch AMP, no param_dtype):
                                     # each weight cast where used, the residual stream in fp32; fp32_gather implies it
    fp8_activations: bool = False    # linear layers' saved inputs kept in FP8, 1 byte each (DeepSeek-V3 Sec. 3.3.4)
    fp8_saved_inputs: bool = True    # under FP8 a linear layer keeps for its weight gradient the FP8 copy of its
                                     # input it cast, 1 byte (Transformer Engine's Linear: Megatron-Core, NeMo);
                                     # False: the bf16 input, cast again in backward (torchao's Float8Linear)
    fp8_weight_cache: bool = True    # FP8 outside ZeRO-3: each weight cast (and transposed) on a step's first
                                     # micro-batch, reused by the rest (Transformer Engine's is_first_microbatch,
                                     # which Megatron-Core's schedules set); False: cast every micro-batch.  Under
                                     # ZeRO-3 every micro-batch gathers the weights again, and casts them again
    fp8_params: bool = True          # under FP8 outside ZeRO-3 the weights are kept in FP8 themselves (Megatron's
                                     # --fp8-param-gather, set by Megatron-Bridge's and NeMo 2's FP8 recipes): no
                                     # bf16 copy, and the distributed optimizer gathers them in FP8; False: bf16
                                     # weights with the FP8 copy beside each that fp8_weight_cache keeps (weights
                                     # cast every micro-batch, no fp8_weight_cache, are bf16 ones)
    fp8_scaling: str = "tensor"      # how FP8 operands are scaled (FP8_SCALINGS): what each cast reads and how many
                                     # kernels Transformer Engine launches to cast a MoE layer's experts one by one
    loss_fp32: bool = True           # the loss upcasts the logits to fp32 (False: computed on the bf16 logits)
    loss_kernel: str = "upcast"      # upcast (logits.float(), then PyTorch's cross-entropy) | megatron (Megatron's
                                     # unfused vocab-parallel chain, in place in fp32) | fused (one kernel: Megatron's
                                     # --cross-entropy-loss-fusion, Liger's)
    moe_imbalance: float = 1.0       # routed tokens on the busiest EP rank over the mean (1: forced balance)
    ep_dispatch: str = "alltoall"    # alltoall (a copy per token and expert) | deepep (once per node and GPU)
    #                                  | hybridep (as deepep, in bf16, after an all-gather of the routing maps)
    moe_launch: str = "grouped"      # how the host launches a MoE layer's kernels (costs.moe_host_time): grouped (each
                                     # expert matrix one grouped GEMM: torch._grouped_mm, DeepGEMM), multi_stream (each
                                     # grouped GEMM a cuBLASLt GEMM per local expert, launched from C++ over four streams:
                                     # Transformer Engine's GroupedLinear, Megatron-Core's experts), per_expert (each
                                     # local expert's GEMMs and activation launched from Python, an eager loop over
                                     # experts) or graphed (the layer replayed from a CUDA graph: nothing to launch)
    moe_probs: str = "activation"    # where the router's weights scale a routed copy (memory.py): activation (inside
                                     # the experts' activation, so no expert output is kept: Megatron-Core since
                                     # v0.13's memory-efficient permutation, NeMo AutoModel) | combine (on each
                                     # expert's output as the combine sums them, which keeps it, h wide, for the
                                     # weights' gradient: Megatron-Core before v0.13)
    ep_overlap: bool = False         # EP all-to-alls of one micro-batch behind another's compute (Megatron-Core's
                                     # --overlap-moe-expert-parallel-comm, the Model Zoo's "1F1B A2A overlap";
                                     # DeepSeek-V3's DualPipe)
    fsdp_gather: str = "unit"        # ZeRO-3 gathers: unit (one flat collective per layer: FSDP1/2, Megatron-
                                     # FSDP) | tensor (each parameter tensor on its own: DeepSpeed ZeRO-3, 2021)
    grad_reduce: str = "bf16"        # dtype gradients are reduced in: bf16, or fp32 (torchtitan's FSDP2 and
                                     # Megatron-Bridge's mixed precision by default: 4 bytes each)
    p2p_overlap: bool = False        # interleaved 1F1B (vpp > 1): each chunk's sends and receives run behind the
                                     # next chunk's compute (Megatron-Core's overlap_p2p_comm, on by default since
                                     # 2023; torch.distributed.pipelining posts its receives ahead); at vpp = 1
                                     # both stacks wait on them, as Megatron-LM of 2021-22 did at any vpp
    first_stage_layers: int | None = None  # uneven pipeline: layers of the first / last stage
    last_stage_layers: int | None = None
    pp_schedule: str = "1f1b"        # PP_SCHEDULES: 1f1b (interleaved when vpp > 1) | zb-h1 (Qi et al. 2024's
                                     # zero-bubble schedule at 1F1B's memory: each backward split into its input
                                     # gradient and a weight gradient run later, into what would be the bubble)
    optimizer_moments: str = "fp32"  # OPTIMIZER_MOMENTS: Adam's moments in fp32 (12 bytes of optimizer state a
                                     # parameter with the fp32 master weight) or bf16 (8)
    offload_modules: tuple = ()      # OFFLOAD_MODULES whose saved input waits in host memory between forward and
                                     # backward (Megatron-Core's --fine-grained-activation-offloading); () none

    @classmethod
    def today(cls, tp: int = 1, pp: int = 1, dp: int = 1, **knobs) -> "Layout":
        """A layout with today's defaults: bf16, flash attention, no dropout, sequence parallelism
        whenever TP > 1, the distributed optimizer (ZeRO-1) whenever DP x CP > 1, gradient
        reduction overlapped with backward and done in fp32 (torchtitan's ``mixed_precision_reduce`` and
        Megatron-Bridge's ``grad_reduce_in_fp32`` default), the interleaved schedule's point-to-point
        transfers behind compute (``p2p_overlap``), no recomputation; under FP8, Transformer Engine's
        saving of each linear layer's FP8 input (``fp8_saved_inputs``) and the weights kept in FP8
        (``fp8_params``, Megatron's --fp8-param-gather), field defaults.  Any knob given
        overrides them."""
        cp = knobs.get("cp", 1)
        defaults = dict(recompute="none", sequence_parallel=tp > 1, flash_attention=True, dropout=False,
                        overlap_grad_reduce=True, grad_reduce="fp32", zero_stage=1 if dp * cp > 1 else 0,
                        p2p_overlap=True)
        return cls(tp, pp, dp, **{**defaults, **knobs})

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def optimizer_bytes_per_param(self) -> int:
        """Bytes of optimizer state a parameter: the fp32 master weight and Adam's two moments."""
        return 4 + 2 * (4 if self.optimizer_moments == "fp32" else 2)

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element on the wire when gradients are reduced."""
        return 4 if self.grad_reduce == "fp32" else 2

    @property
    def selective_modules(self) -> tuple:
        """The modules recomputed under ``recompute="selective"`` (none otherwise)."""
        return (self.recompute_modules or ("core_attn",)) if self.recompute == "selective" else ()

    @property
    def full_recompute_share(self) -> float:
        """The share of the blocks whose whole forward runs again in backward: ``recompute_share``
        under ``recompute="full"``, none under the other policies (they recompute parts of every block)."""
        return self.recompute_share if self.recompute == "full" else 0.0

    @property
    def fp8_weight_share(self) -> float:
        """Each weight's FP8 casts per micro-batch: one a step (1/m) when ``fp8_weight_cache`` holds outside
        ZeRO-3, else one every micro-batch (ZeRO-3 gathers the bf16 weights again each time)."""
        return 1 / self.micro_batches if self.fp8_weight_cache and self.zero_stage != 3 else 1.0

    @property
    def keeps_fp8_weights(self) -> bool:
        """An FP8 copy of each linear weight is kept through the step: under FP8, outside ZeRO-3 (which
        gathers the weights for each use) and cast once a step (``fp8_weight_cache``)."""
        return self.dtype == "fp8" and self.fp8_weight_cache and self.zero_stage != 3

    @property
    def fp8_primary_weights(self) -> bool:
        """That copy is the weight itself, no bf16 one beside it (``fp8_params``)."""
        return self.keeps_fp8_weights and self.fp8_params

    @property
    def expert_tp_degree(self) -> int:
        return self.expert_tp or self.tp

    @property
    def expert_dp(self) -> int:
        """Data-parallel replicas of each expert: the TP x CP x DP ranks of a stage over EP x ETP."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp_degree)

    @property
    def fp32_stream(self) -> bool:
        """Autocast over fp32 weights (``autocast_fp32``, or FSDP's ``fp32_gather``): each weight is
        cast to bf16 where used, and the residual stream the embedding starts stays in fp32."""
        return self.autocast_fp32 or self.fp32_gather

    @property
    def sharding_degree(self) -> int:
        """Ranks that shard the dense weights' ZeRO states: DP x CP (Megatron's distributed
        optimizer), or the HSDP shard group."""
        return self.shard_group or self.dp * self.cp

    @property
    def expert_sharding_degree(self) -> int:
        """Ranks that shard one expert's ZeRO states: its expert-DP group, or under HSDP the part of that
        group inside one shard group (the rest are replicas)."""
        return max(1, self.expert_dp * self.sharding_degree // (self.dp * self.cp))

    def describe(self) -> str:
        knobs = [f"TP={self.tp}", f"PP={self.pp}"] + [f"{k.upper()}={getattr(self, k)}" for k in ("vpp", "cp", "ep")
                                                      if getattr(self, k) > 1] + [f"DP={self.dp}"]
        if self.expert_tp_degree != self.tp:
            knobs.append(f"ETP={self.expert_tp_degree}")
        zero = ("HSDP (shard over " + str(self.shard_group) + ")") if self.zero_stage == 3 and self.shard_group \
            else ("FSDP (ZeRO-3)" if self.zero_stage == 3 else f"ZeRO-{self.zero_stage}")
        fp8 = "FP8 GEMMs" + (f" ({self.fp8_scaling} scaling)" if self.fp8_scaling != "tensor" else "")
        stack = [label for on, label in ((self.dtype == "fp8", fp8), (self.kernels == "eager", "eager kernels"),
                                         (self.flash_attention and self.attention_kernel in ("fa1", "fa2"),
                                          f"FlashAttention-{self.attention_kernel[-1]}"),
                                         (self.flash_attention and self.attention_kernel == "cudnn", "cuDNN attention"),
                                         (self.tp > 1 and self.tp_overlap != "none", f"TP overlap {self.tp_overlap}"),
                                         (self.zero_stage == 3 and self.fsdp_gather == "tensor", "per-tensor gathers"),
                                         (self.ep > 1 and self.ep_overlap, "EP all-to-all overlap"),
                                         (self.pp > 1 and self.vpp > 1 and not self.p2p_overlap,
                                          "PP transfers exposed"),
                                         (self.pp > 1 and self.pp_schedule != "1f1b", f"{self.pp_schedule.upper()} schedule"),
                                         (self.optimizer_moments != "fp32", f"{self.optimizer_moments} Adam moments"),
                                         (bool(self.offload_modules),
                                          f"offloading the inputs of {' '.join(self.offload_modules)}"),
                                         (self.zero_stage == 3 and self.fp32_gather, "fp32 gathers"),
                                         (self.autocast_fp32 and not self.fp32_gather, "autocast over fp32 weights"),
                                         (self.fp8_activations, "FP8 activations"),
                                         (self.dtype == "fp8" and not self.fp8_saved_inputs and not self.fp8_activations,
                                          "bf16 inputs saved"),
                                         (self.moe_probs == "combine", "expert outputs kept"),
                                         (self.keeps_fp8_weights and not self.fp8_params, "bf16 weights"),
                                         (self.dtype == "fp8" and self.zero_stage != 3 and not self.fp8_weight_cache,
                                          "FP8 weights cast every micro-batch"),
                                         (not self.loss_fp32, "bf16 loss"),
                                         (self.loss_kernel != "upcast", f"{self.loss_kernel} loss kernel"),
                                         (self.cp > 1 and self.cp_method != "ring", f"{self.cp_method} CP"))
                 if on]
        recompute = self.recompute + (f" ({' '.join(self.recompute_modules)})"
                                      if self.recompute_modules and self.recompute == "selective" else "") \
            + (f" ({self.recompute_share:.0%} of blocks)" if self.recompute == "full" and self.recompute_share < 1 else "")
        return " x ".join(knobs) + f", {zero}, micro-batch {self.micro_batch}, recompute {recompute}" \
            + "".join(f", {label}" for label in stack)
