"""The planner (chapters 5 and 6): capacity plans, memory per GPU, step time and the layout search.

Data flows one way, from the command line down to the hardware table: ``cli`` and
``step_time_cli`` (their flags in ``args``, the layout's in ``layout_flags``, numbers read by ``flag_values``) -> ``capacity`` (``plan``: tokens -> steps -> FLOPs ->
GPU-hours -> days, every figure from one layout's prediction; its numbers checked and its model resolved by ``capacity_inputs``; where the batch does not split over the GPUs, the counts and batches that would run better found by ``batch_split``) -> ``layout_search`` (ranked layouts,
the least model parallelism that fits, what would make a layout fit) -> ``step_time`` (``predict``:
one step of a layout) -> ``layer_costs`` (one layer's passes and the communication it waits for) -> ``costs`` (each cost term, over the GEMM shapes of ``gemms``, at the rates of ``kernel_rates``; the collectives and links in ``comm_costs``, a MoE layer's kernels in ``moe_kernels``) -> ``memory`` (the one memory model: bytes per
GPU by part; what a layer keeps for backward in ``activations``) -> ``layout_checks`` (whether a layout can run) -> ``layout`` (``Cluster``, ``Layout``) -> ``stages`` (pipeline stage placement) ->
``architecture`` (``Model``: the shape and its exact parameter count; a hybrid's recurrent mixers, Mamba-2 and Gated DeltaNet, in ``ssm``; the model in words, its one line and notes, in ``model_text``), read from a Hugging Face
``config.json`` by ``hf_config`` (found in the local hub cache by ``hf_hub``) (its typed look-ups and the keys only some families carry in ``hf_keys``; the families that do not spell their shape Llama's way, GPT-2, MPT and
Falcon, by ``hf_families``; hybrids of recurrent mixers and attention, Nemotron-H's, Granite 4.0's and Qwen3-Next's, by ``hf_hybrid``) or named by ``presets``; ``flops``, ``efficiency`` (the step-time model's sourced constants, each one's source in ``efficiency_sources``), ``goodput`` (failures,
checkpoint intervals) and ``playground.hardware`` at the bottom; every module raises ``PlanError`` (``errors``).  Beside them: ``scaling_laws``
(Chinchilla); ``overlap`` (when each axis's communication hides behind compute); the published runs and layouts the planner is validated against
(``published_runs``, ``published_layouts``; today's stacks, torchtitan and more, in ``published_stacks``, fms-fsdp's A100 and H100 rows in ``published_fms``, Megatron-Bridge's H100 and B200 runs in ``published_bridge`` (25.11) ``published_bridge_2509`` (25.09), its Nemotron 3 Nano runs of 26.04.01 in ``published_bridge_nemotron`` and, held out, ``published_bridge_2604`` (26.04.01) and ``published_bridge_2606`` (26.06, on GB200, B300 and GB300 too), the Megatron-Core MoE report's runs in ``published_moe_report`` (held out), Megatron-LM's MoE recipes in ``published_moe_recipes`` (held out), its measured A/B of the EP overlap in ``published_bridge_ab``, Qi et al.'s measured A/B of the zero-bubble schedule against 1F1B in ``published_zero_bubble``, llm-foundry's sweep in ``published_foundry``, the MoE Model Zoo's and DeepSeek-V3 in ``published_zoo``, NeMo AutoModel's FSDP2 + EP runs in ``published_automodel``, NeMo's FP8 runs of 24.07, its long-sequence table of 24.03 and NVIDIA's DGX Cloud recipes in ``published_nemo``, Megatron-LM's weak-scaling table in ``published_megatron``, each a ``published_row``; cuBLAS's measured GEMM rates by shape, which eq-gemm is checked against, in ``published_gemms``, and Transformer Engine's own GEMM benchmark, which the GEMM rates and the FP8 casts' bytes are checked against, in ``published_te_gemms``, and cuDNN's measured training attention on a GB200 and a GB300, which the attention rate and Blackwell Ultra's gain are checked against, in ``published_attention``), replayed by ``replay`` (its rows kept on disk while the code is unchanged by ``replay_cache``), and beside a public peer model, llm-analysis, by ``peer_model``; ``step_range`` (the range a prediction spans over unstated settings and the constants' spread); ``mfu_ceiling`` (the highest MFU the replayed runs reached, by GPU architecture and precision, which a plan's MFU is checked against); ``measure`` (the formulas
against PyTorch's own counters; a recurrent mixer's, on real modules, in ``measure_mixers``); and ``capacity_explorer`` (the interactive explorer).
May import: the shared basics and ``playground.zero`` (the ZeRO memory formulas).
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "architecture": ("Model",),
    "capacity": ("DEFAULT_MFU", "plan"),
    "capacity_explorer": ("explorer",),
    "capacity_inputs": ("infer_architecture",),
    "cli": ("main", "report"),
    "costs": ("allreduce_time", "flops_per_step", "tensor_parallel_link"),
    "errors": ("PlanError",),
    "flops": ("flops_per_token", "megatron_flops_per_iteration"),
    "goodput": ("daly_interval", "expected_goodput", "plan_goodput", "simulate_goodput", "young_interval"),
    "hf_config": ("model_from_hf_dict", "read_hf_config"),
    "layout": ("BYTES", "EFFICIENCY", "Cluster", "Efficiency", "Layout", "stage_layers"),
    "layout_checks": ("check_layout",),
    "layout_search": ("candidate_layouts", "fit_advice", "minimal_model_parallelism", "search"),
    "measure": ("checkpointed_blocks", "measure_activation_bytes", "measure_layer_activation_bytes",
                "measure_routed_copy_bytes", "measure_fp8_mlp_bytes", "measure_fp8_weight_bytes",
                "measure_training_flops"),
    "memory": ("FRAGMENTATION", "FRAMEWORK_BYTES", "RECOMPUTE", "activation_bytes_per_layer", "describe_memory",
               "fp8_weight_bytes", "layer_activation_bytes", "memory_per_gpu", "model_state_bytes",
               "usable_memory_bytes"),
    "overlap": ("data_parallel_tokens", "fsdp_tokens", "hiding_thresholds", "tensor_parallel_hidden"),
    "presets": ("PRESETS", "preset", "preset_names"),
    "published_layouts": (),
    "published_runs": (),
    "replay": (),
    "scaling_laws": ("LOSS_FIT", "TOKENS_PER_PARAM", "chinchilla_loss", "chinchilla_optimal"),
    "step_time": ("predict",),
})

__all__ = ["data_parallel_tokens", "fsdp_tokens", "hiding_thresholds", "tensor_parallel_hidden", "plan", "report", "main", "PlanError", "infer_architecture", "DEFAULT_MFU",
           "flops_per_token", "megatron_flops_per_iteration",
           "FRAGMENTATION", "FRAMEWORK_BYTES", "RECOMPUTE", "model_state_bytes", "activation_bytes_per_layer",
           "layer_activation_bytes", "usable_memory_bytes", "memory_per_gpu", "describe_memory", "fp8_weight_bytes",
           "stage_layers",
           "chinchilla_optimal", "chinchilla_loss", "LOSS_FIT", "TOKENS_PER_PARAM",
           "Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "BYTES", "check_layout", "flops_per_step",
           "allreduce_time", "tensor_parallel_link", "predict",
           "search", "candidate_layouts", "minimal_model_parallelism", "fit_advice", "layout_search",
           "read_hf_config", "model_from_hf_dict", "preset", "preset_names", "PRESETS",
           "young_interval", "daly_interval", "expected_goodput", "simulate_goodput", "plan_goodput",
           "published_runs", "published_layouts", "replay", "measure_training_flops",
           "measure_layer_activation_bytes", "measure_activation_bytes", "measure_routed_copy_bytes", "measure_fp8_mlp_bytes",
           "measure_fp8_weight_bytes", "checkpointed_blocks",
           "explorer"]
