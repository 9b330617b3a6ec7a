"""The planner (chapters 5 and 6): capacity plans, memory per GPU, step time and the layout search.

Data flows one way, from the command line down to the hardware table: ``cli`` and
``step_time_cli`` (their flags in ``args``) -> ``capacity`` (``plan``: tokens -> FLOPs -> GPU-hours
-> days, forced parallelism) and ``layout_search`` (ranked layouts) -> ``step_time`` (``predict``:
one step of a layout) -> ``costs`` (each cost term; ``Model``, ``Cluster``, ``Layout``) -> ``memory``
(bytes per GPU) and ``flops`` -> ``playground.hardware``; every module raises ``PlanError`` (``errors``).
Beside them: ``scaling_laws`` (Chinchilla); the published runs and layouts the planner is validated
against (``published_runs``, ``published_layouts``), replayed by ``replay``; ``measure`` (the
formulas against PyTorch's own counters); and ``capacity_explorer`` (the interactive explorer).
May import: the shared basics and ``playground.zero`` (the ZeRO memory formulas).
"""

from playground.planner import layout_search, published_layouts, published_runs, replay
from playground.planner.capacity import DEFAULT_MFU, infer_architecture, plan
from playground.planner.capacity_explorer import explorer
from playground.planner.cli import main, report
from playground.planner.costs import (BYTES, EFFICIENCY, Cluster, Efficiency, Layout, Model, allreduce_time,
                                      check_layout, flops_per_step, memory_per_gpu, tensor_parallel_link)
from playground.planner.errors import PlanError
from playground.planner.flops import flops_per_token, megatron_flops_per_iteration
from playground.planner.measure import measure_layer_activation_bytes, measure_training_flops
from playground.planner.memory import (MEMORY_RESERVE, RECOMPUTE, activation_bytes_per_layer, forced_parallelism,
                                       model_state_bytes, per_gpu_memory, usable_memory_bytes)
from playground.planner.layout_search import candidate_layouts, search
from playground.planner.scaling_laws import LOSS_FIT, TOKENS_PER_PARAM, chinchilla_loss, chinchilla_optimal
from playground.planner.step_time import predict

__all__ = ["plan", "report", "main", "PlanError", "infer_architecture", "DEFAULT_MFU",
           "flops_per_token", "megatron_flops_per_iteration",
           "MEMORY_RESERVE", "RECOMPUTE", "model_state_bytes", "activation_bytes_per_layer", "usable_memory_bytes",
           "per_gpu_memory", "forced_parallelism",
           "chinchilla_optimal", "chinchilla_loss", "LOSS_FIT", "TOKENS_PER_PARAM",
           "Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "BYTES", "check_layout", "flops_per_step",
           "allreduce_time", "tensor_parallel_link", "memory_per_gpu", "predict",
           "search", "candidate_layouts", "layout_search",
           "published_runs", "published_layouts", "replay", "measure_training_flops",
           "measure_layer_activation_bytes", "explorer"]
