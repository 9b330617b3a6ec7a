"""ZeRO and FSDP (chapter 3): shard the optimizer states, then the gradients, then the parameters.

``accounting`` holds the formulas (bytes per rank for each stage and recipe, elements moved, also
under gradient accumulation and in HSDP, the paper's Table 1); ``zero_dp`` is the from-scratch
ZeRO (``ZeroDP``, stages 0-3, with gradient accumulation) built on the ring collectives of
``playground.data_parallel``; ``prefetch`` is its ZeRO-3 with asynchronous all-gathers issued one
unit ahead (``PrefetchZeroDP``, with a timeline of real timestamps); ``hsdp`` shards inside a
group and replicates across groups (``HSDP``); ``reference`` runs the same recipes in one
process.  The runs that check them: ``runs`` (equal to the reference, to DDP,
ZeroRedundancyOptimizer and FSDP2; bytes held and moved counted against ``accounting``) and
``zero3_runs`` (prefetching, accumulation and HSDP, against the reference and FSDP2, 1-D and 2-D);
``peak_runs`` measures ZeRO-3's peak memory per rank beside the accounted transients.
May import: the shared basics and ``playground.data_parallel``.
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "accounting": ("PAPER_TABLE_1", "RECIPES", "STAGES", "accumulation_comm_elements", "comm_elements", "exact_bytes",
                   "explorer", "hsdp_comm_elements", "paper_table", "predicted"),
    "hsdp": ("HSDP", "check_grid", "grid_groups"),
    "peak_runs": ("PEAK_CFG", "activations as peak_activations", "launch_peak", "predicted_peak"),
    "prefetch": ("PrefetchZeroDP",),
    "reference": ("differences_from_plain", "flat_params", "grid_order_sum", "plain_parameters", "reference_parameters",
                  "saved_activation_bytes"),
    "runs": ("check_variants", "launch", "predicted_messages", "predicted_sent_bytes", "state_report", "timing_report",
             "traffic_report", "unit_numels"),
    "zero3_runs": ("EMULATED_COMPUTE_S", "PREFETCH_DEMO_CFG", "exposed_ratio", "hideable_wait_s", "launch_zero3",
                   "predicted_accumulation_bytes", "predicted_hsdp_bytes", "prefetch_demo", "prefetch_order",
                   "timeline_rows"),
    "zero_dp": ("COMPUTE_DTYPE", "ZeroDP", "flat_units"),
})

__all__ = ["ZeroDP", "COMPUTE_DTYPE", "flat_units", "PrefetchZeroDP", "HSDP", "check_grid", "grid_groups",
           "accounting", "RECIPES", "STAGES", "predicted", "exact_bytes", "comm_elements", "PAPER_TABLE_1",
           "paper_table", "explorer", "accumulation_comm_elements", "hsdp_comm_elements",
           "reference_parameters", "plain_parameters", "differences_from_plain", "saved_activation_bytes",
           "flat_params", "grid_order_sum",
           "runs", "launch", "check_variants", "unit_numels", "predicted_sent_bytes", "predicted_messages",
           "state_report", "traffic_report", "timing_report",
           "zero3_runs", "launch_zero3", "predicted_accumulation_bytes", "predicted_hsdp_bytes", "prefetch_order",
           "exposed_ratio", "hideable_wait_s", "prefetch_demo", "timeline_rows", "PREFETCH_DEMO_CFG", "EMULATED_COMPUTE_S",
           "peak_runs", "launch_peak", "predicted_peak", "peak_activations", "PEAK_CFG"]
