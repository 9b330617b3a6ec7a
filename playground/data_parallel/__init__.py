"""Data parallelism (chapter 1): parameter server -> ring all-reduce -> DDP.

The collectives: ``ring`` (the simple ring all-reduce of chapter 1 in 15 lines, then the segmented
reduce-scatter, all-gather and all-reduce around a ring, on any process group; each rank's slice of a
tensor from ``shards``, which has no torch in it, so the planner's memory formulas share it) and ``allreduce_baselines`` (parameter server, sharded parameter server, tree).  Their model:
``cost_model`` (alpha-beta, fitted from a ping-pong).  Built on them: ``ddp`` (per-gradient and
bucketed DDP, with ``no_sync`` for gradient accumulation).  The runs that check them: ``ddp_check``
(equal to PyTorch's DDP, overlap timed), ``accumulation_check`` (accumulated steps equal to the
large-batch step and to PyTorch's ``no_sync``, bytes per step counted) and ``allreduce_lab`` (bytes
counted and times measured for every all-reduce).
May import: the shared basics only.
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "accumulation_check": ("ACCUMULATION_DESIGNS", "accumulate_and_compare", "accumulation_bytes_per_step",
                           "check_accumulation"),
    "allreduce_baselines": ("parameter_server_all_reduce", "sent_bytes", "sharded_parameter_server_all_reduce",
                            "tree_all_reduce"),
    "allreduce_lab": ("MB", "busbw_gb_s", "cost_explorer", "count_bytes", "ring_step_s", "time_all_reduces",
                      "usable_cores"),
    "cost_model": (),
    "ddp": ("BucketedDDP", "allreduce_gradients", "plan_buckets"),
    "ddp_check": ("DDP_CONFIG", "DESIGNS", "overlap_summary", "time_steps", "train_and_compare"),
    "ring": ("ring_all_gather", "ring_all_reduce", "ring_bytes_sent", "ring_reduce_scatter", "simple_ring_all_reduce"),
    "shards": ("shard_bounds",),
})

__all__ = ["simple_ring_all_reduce", "ring_all_reduce", "ring_reduce_scatter", "ring_all_gather", "ring_bytes_sent", "shard_bounds",
           "parameter_server_all_reduce", "sharded_parameter_server_all_reduce", "tree_all_reduce", "sent_bytes",
           "cost_model", "BucketedDDP", "allreduce_gradients", "plan_buckets",
           "ddp_check", "DDP_CONFIG", "DESIGNS", "train_and_compare", "time_steps", "overlap_summary",
           "allreduce_lab", "MB", "count_bytes", "time_all_reduces", "busbw_gb_s", "ring_step_s", "usable_cores",
           "cost_explorer", "accumulation_check", "ACCUMULATION_DESIGNS", "accumulate_and_compare",
           "accumulation_bytes_per_step", "check_accumulation"]
