"""What a capacity plan is asked about, checked and resolved before ``capacity.plan`` plans it.

* ``positive_number``: a flag's value must be a finite positive number (a whole one where asked);
  the error names the flag as the command line spells it.
* ``resolve_plan_model``: the ``Model`` to plan, from a preset's name, a ``Model`` (a
  ``config.json`` read by ``hf_config``), the shape flags, or a bare parameter count; flags given
  beside a model override its fields.  It says where the shape came from: preset, given, inferred,
  "+ flags".
* ``infer_architecture``: the Llama-3-style shape a bare parameter count stands for.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace

from playground.planner.architecture import DEFAULT_SEQ_LEN, Model
from playground.planner.errors import PlanError
from playground.planner.presets import preset

__all__ = ["infer_architecture", "positive_number", "resolve_plan_model", "DEFAULT_VOCAB"]

DEFAULT_VOCAB = 128256  # Llama 3's vocabulary


def infer_architecture(params: float, seq_len: int = DEFAULT_SEQ_LEN, vocab: int = DEFAULT_VOCAB) -> Model:
    """A Llama-3-style shape for ``params`` when none is given: hidden h = 128 l (Llama 3 8B and
    405B have h / l = 128 and 130), heads of 128, 8 KV heads (GQA), a SwiGLU MLP of 3.5 h, RMSNorm,
    no biases, untied embeddings, so N = l (12.5 h^2 + 2048 h) + 2 V h.  Layers and heads are
    rounded to multiples of 8 (when there are at least 8) so TP and PP have divisors to work with;
    the parameter count stays the one given."""
    def round8(x: float) -> int:
        return max(8, 8 * round(x / 8)) if x >= 6 else max(1, round(x))
    body = max(params - 2 * vocab * 128, params / 2)
    layers = round8((body / (12.5 * 128 ** 2)) ** (1 / 3))
    heads = round8(math.sqrt(body / (12.5 * layers)) / 128)
    h = 128 * heads
    return Model(layers, h, heads, vocab, seq_len, ffn=int(3.5 * h), kv_heads=min(8, heads), gated_mlp=True,
                 params=params, tied_embeddings=False, position_embeddings=False, qkv_bias=False,
                 proj_bias=False, norm="rmsnorm", name="inferred (Llama-3 style)")


def positive_number(name, value, integer=False):
    """``value`` checked as flag ``--name``: None stays None, else a positive finite float (an int
    when ``integer``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise PlanError(f"--{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise PlanError(f"--{name} must be positive, got {value!r}")
    if integer:
        if int(value) != value:
            raise PlanError(f"--{name} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def resolve_plan_model(model, params, active_params, seq_len, arch) -> tuple[Model, str]:
    """The ``Model`` to plan and where its shape came from.  ``model``: a preset's name, a ``Model``
    or None; ``arch``: the shape flags (None where not given), which override the model's fields."""
    if isinstance(model, str):
        model = preset(model)
        shape_source = "preset"
    else:
        shape_source = "given"
    if model is None and arch.get("layers") is not None:
        model = Model(**{k: v for k, v in arch.items() if v is not None}, seq_len=seq_len or DEFAULT_SEQ_LEN,
                      params=params)
        return model, "given"
    if model is None:
        if params is None:
            raise PlanError("give a model (--model, --hf-config or --layers/--hidden/--heads) or --params")
        return infer_architecture(params, seq_len or DEFAULT_SEQ_LEN, arch.get("vocab") or DEFAULT_VOCAB), "inferred"
    changes = {k: v for k, v in arch.items() if v is not None}
    if seq_len:
        changes.update(seq_len=seq_len, seq_len_from="")
    if params is not None:
        changes["params"] = params
    return (replace(model, **changes) if changes else model), shape_source + (" + flags" if changes else "")
