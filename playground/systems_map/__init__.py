"""The systems map (chapter 4): tensor, sequence, context and expert parallelism, and how they compose.

The algorithms: ``tp_comm`` (the four TP/SP communication functions) and ``tensor_parallel``
(column/row-parallel layers, a TP block); context parallelism three ways: ``ring_attention`` (K/V
blocks around a ring), ``all_gather_cp`` (Llama 3's: K/V all-gathered, head-and-tail chunks) and
``ulysses`` (all-to-all to a head shard and back); ``moe`` (routing, capacity), ``expert_parallel``
(experts over ranks, all-to-all), ``dropless`` (dropless beside capacity-factor dispatch, bytes
per intra-/inter-node link) and ``expert_execution`` (four ways one rank runs its routed experts:
a grouped GEMM with or without a host sync, a GEMM per expert, fixed capacity); ``expert_dp`` (a MoE's
gradients: dense over every rank, experts over their expert-DP group); ``grid`` (ranks laid on a DP x PP x TP grid).  The runs that check
them, each against single-process training and PyTorch's own where it has one: ``tp_measure``,
``ring_attention_runs``, ``cp_runs`` (the three CP attentions side by side),
``expert_parallel_runs``, ``expert_dp_runs``, ``dropless_runs``, ``compose`` (with ``compose_torch`` and ``key_bias``),
and ``placement`` (the map itself, every row measured).
May import: the shared basics, ``playground.data_parallel``, ``pipeline_parallel`` and ``zero``.
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "all_gather_cp": ("all_gather_attention", "load_balanced_split"),
    "compose": (),
    "compose_torch": (),
    "cp_runs": ("check_context_parallel",),
    "dropless": ("NodeAwareEP",),
    "dropless_runs": ("balance_report", "check_dropless", "link_report"),
    "expert_dp": ("expert_grid", "reduce_moe_grads"),
    "expert_dp_runs": (),
    "expert_execution": ("RoutedExperts", "expert_reference"),
    "expert_parallel": ("ExpertParallelMoE", "all_to_all", "expert_placement"),
    "expert_parallel_runs": ("bytes_report", "check_all_to_all", "check_expert_parallel", "drop_report",
                             "drop_sweep"),
    "grid": ("GridGroups", "RankGrid"),
    "moe": ("MoE", "drops_agree", "expert_capacity", "load_balancing_loss", "moe_reference", "predicted_drops",
            "queue_position", "route", "within_capacity"),
    "placement": ("STATE_LAYOUT", "map_rows", "placement_explorer"),
    "ring_attention": ("attention_reference", "predicted_blocks", "ring_schedule", "split_sequence"),
    "ring_attention_runs": ("check_ring_attention", "layer_report", "memory_report"),
    "tensor_parallel": ("ColumnParallelLinear", "RowParallelLinear", "TPAttention", "TPBlock", "TPMLP",
                        "check_tp_divisible", "column_shard", "dtensor_block", "row_shard"),
    "tp_comm": ("all_gather_along", "copy_to_tp", "gather_from_sp", "reduce_from_tp", "reduce_scatter_along",
                "reduce_scatter_to_sp", "ring_wire_bytes"),
    "tp_measure": (),
    "ulysses": ("heads_to_seq", "seq_to_heads", "ulysses_attention"),
})

__all__ = ["copy_to_tp", "reduce_from_tp", "gather_from_sp", "reduce_scatter_to_sp", "all_gather_along",
           "reduce_scatter_along", "ring_wire_bytes",
           "ColumnParallelLinear", "RowParallelLinear", "TPAttention", "TPMLP", "TPBlock", "column_shard",
           "row_shard", "check_tp_divisible", "dtensor_block",
           "ring_attention", "attention_reference", "split_sequence", "predicted_blocks", "ring_schedule",
           "MoE", "route", "expert_capacity", "queue_position", "within_capacity", "moe_reference", "load_balancing_loss",
           "predicted_drops", "drops_agree", "ExpertParallelMoE", "RoutedExperts", "expert_reference", "expert_placement", "all_to_all",
           "RankGrid", "GridGroups", "expert_grid", "reduce_moe_grads", "expert_dp_runs",
           "tp_measure", "ring_attention_runs", "check_ring_attention", "layer_report", "memory_report",
           "expert_parallel_runs", "check_expert_parallel", "check_all_to_all", "drop_sweep", "bytes_report",
           "drop_report", "all_gather_attention", "load_balanced_split", "ulysses_attention", "seq_to_heads",
           "heads_to_seq", "cp_runs", "check_context_parallel", "NodeAwareEP", "dropless_runs",
           "check_dropless", "link_report", "balance_report", "compose", "compose_torch", "placement", "map_rows", "STATE_LAYOUT", "placement_explorer"]
