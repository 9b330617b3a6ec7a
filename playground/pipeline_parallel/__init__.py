"""Pipeline parallelism (chapter 2): GPipe -> 1F1B -> interleaved 1F1B, run on real ranks.

``schedules`` says what each stage does and when (and simulates it); ``stage_link`` moves
activations and gradients between neighbouring stages; ``engine`` runs a schedule on N ranks
(``run_pipeline``), or PyTorch's own schedule (``torch_schedules``) on the same pieces.  The runs
that check it: ``report`` (equal to single-process training, bubbles and memory measured against
the formulas); ``gantt`` draws a step.
May import: the shared basics only.
"""

from playground.pipeline_parallel import report, schedules
from playground.pipeline_parallel.engine import DEFAULT_DEVICE_TIME_S, PipeSpec, run_pipeline
from playground.pipeline_parallel.gantt import draw_gantt
from playground.pipeline_parallel.report import (bubble_explorer, bubble_rows, check_equal, print_bubble_table,
                                                 print_interleaved_comparison, print_memory_table, reference_step,
                                                 timing_specs)
from playground.pipeline_parallel.schedules import (SCHEDULES, action_chunk, max_in_flight, measured_bubble,
                                                    predicted_bubble, schedule_actions, simulate, stage_bounds)
from playground.pipeline_parallel.stage_link import StageLink, boundary_shapes

__all__ = ["schedules", "SCHEDULES", "schedule_actions", "stage_bounds", "action_chunk", "max_in_flight",
           "simulate", "predicted_bubble", "measured_bubble", "StageLink", "boundary_shapes",
           "PipeSpec", "run_pipeline", "DEFAULT_DEVICE_TIME_S", "draw_gantt",
           "report", "reference_step", "timing_specs", "bubble_rows", "check_equal", "print_bubble_table",
           "print_memory_table", "print_interleaved_comparison", "bubble_explorer"]
