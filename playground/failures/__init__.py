"""When training breaks (chapter 7): checkpoints, restarts, stragglers, hangs, and goodput.

``checkpoint`` saves and loads an FSDP2 model and its optimizer with ``torch.distributed.checkpoint``
(each rank its own shards; a load on another number of ranks reshards) and predicts the bytes each
rank writes; ``checkpoint_runs`` checks it (save on 4 ranks, load on 2, losses against an
uninterrupted run); ``restart_runs`` is a job that loses a rank under ``torchrun --max-restarts``
and resumes from its last checkpoint; ``straggler_runs`` shows one slow rank setting every rank's
pace; ``hang_runs`` makes ranks disagree about a collective and shows what gloo,
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` and the launcher's timeout report.  The goodput formulas are the
planner's (``playground.planner.goodput``).
May import: the shared basics, ``playground.zero`` and ``playground.planner``.
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "checkpoint": ("CHECKPOINT_CFG", "bytes_written", "load", "payload_by_rank", "predicted_bytes", "save",
                   "shard_rows", "sharded_model"),
    "checkpoint_runs": ("full_state", "launch_reshard", "train_step"),
    "hang_runs": ("launch_hang", "launch_mismatch", "odd_one_out"),
    "restart_runs": ("elastic_train", "launch_torchrun", "lost_steps", "read_log"),
    "straggler_runs": ("launch_straggler",),
})

__all__ = ["checkpoint", "checkpoint_runs", "restart_runs", "straggler_runs", "hang_runs",
           "CHECKPOINT_CFG", "sharded_model", "save", "load", "bytes_written", "payload_by_rank",
           "shard_rows", "predicted_bytes", "train_step", "full_state", "launch_reshard",
           "elastic_train", "launch_torchrun", "read_log", "lost_steps", "launch_straggler",
           "launch_mismatch", "launch_hang", "odd_one_out"]
