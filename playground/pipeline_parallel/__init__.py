"""Pipeline parallelism (chapter 2): GPipe -> 1F1B -> interleaved 1F1B -> zero bubble, on real ranks.

``schedules`` says what each stage does and when (and simulates it), ZB-H1's split backward
included; ``stage_link`` moves activations and gradients between neighbouring stages;
``split_backward`` cuts a backward into B (input gradient) and W (weight gradients);
``device_clock`` timestamps actions and pads them to an emulated device time; ``stage_work`` does
one action's compute and records it (time, bytes saved, FLOPs); ``engine`` runs a schedule on N
ranks (``run_actions`` is its loop; ``run_pipeline`` launches it), or PyTorch's own schedule
(``torch_schedules``) on the same pieces.  The runs that check it: ``report`` (equal to single-process training, bubbles and
memory measured against the formulas); ``gantt`` draws a step.
May import: the shared basics only.
"""

from playground import lazy_face

__getattr__, __dir__ = lazy_face(__name__, {
    "device_clock": ("DEFAULT_DEVICE_TIME_S",),
    "engine": ("PipeSpec", "run_actions", "run_pipeline"),
    "gantt": ("draw_gantt",),
    "report": ("bubble_explorer", "bubble_rows", "check_equal", "formula_bubble", "print_bubble_table",
               "print_interleaved_comparison", "timed_rows", "print_memory_table", "print_zero_bubble_memory",
               "reference_step", "timing_specs"),
    "schedules": ("SCHEDULES", "WEIGHT_SHARE", "action_chunk", "max_in_flight", "measured_bubble",
                  "predicted_bubble", "predicted_zb_bubble", "schedule_actions", "simulate", "stage_bounds"),
    "split_backward": ("backward_input", "backward_weight", "record_taps"),
    "stage_link": ("StageLink", "boundary_shapes"),
})

__all__ = ["schedules", "SCHEDULES", "schedule_actions", "stage_bounds", "action_chunk", "max_in_flight",
           "simulate", "predicted_bubble", "predicted_zb_bubble", "WEIGHT_SHARE", "measured_bubble",
           "StageLink", "boundary_shapes", "record_taps", "backward_input", "backward_weight",
           "PipeSpec", "run_pipeline", "run_actions", "DEFAULT_DEVICE_TIME_S", "draw_gantt",
           "report", "reference_step", "timing_specs", "timed_rows", "bubble_rows", "formula_bubble", "check_equal",
           "print_bubble_table", "print_memory_table", "print_interleaved_comparison",
           "print_zero_bubble_memory", "bubble_explorer"]
