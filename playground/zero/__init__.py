"""ZeRO and FSDP (chapter 3): shard the optimizer states, then the gradients, then the parameters.

``accounting`` holds the formulas (bytes per rank for each stage and recipe, elements moved, the
paper's Table 1); ``zero_dp`` is the from-scratch ZeRO (``ZeroDP``, stages 0-3) built on the
ring collectives of ``playground.data_parallel``; ``reference`` runs the same recipe in one process.
The runs that check it: ``runs`` (equal to the reference, to DDP, ZeroRedundancyOptimizer and
FSDP2; bytes held and moved counted against ``accounting``).
May import: the shared basics and ``playground.data_parallel``.
"""

from playground.zero import accounting, runs
from playground.zero.accounting import (PAPER_TABLE_1, RECIPES, STAGES, comm_elements, exact_bytes, explorer,
                                        paper_table, predicted)
from playground.zero.reference import (differences_from_plain, flat_params, plain_parameters, reference_parameters,
                                       saved_activation_bytes)
from playground.zero.runs import (check_variants, launch, predicted_messages, predicted_sent_bytes, state_report,
                                  timing_report, traffic_report, unit_numels)
from playground.zero.zero_dp import COMPUTE_DTYPE, ZeroDP, flat_units

__all__ = ["ZeroDP", "COMPUTE_DTYPE", "flat_units",
           "accounting", "RECIPES", "STAGES", "predicted", "exact_bytes", "comm_elements", "PAPER_TABLE_1",
           "paper_table", "explorer",
           "reference_parameters", "plain_parameters", "differences_from_plain", "saved_activation_bytes",
           "flat_params",
           "runs", "launch", "check_variants", "unit_numels", "predicted_sent_bytes", "predicted_messages",
           "state_report", "traffic_report", "timing_report"]
