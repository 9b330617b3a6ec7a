"""The capacity planner's interactive explorer (JupyterLab, ipywidgets), and the picture it draws.

``explorer()`` lets a reader move model size, tokens, GPUs, MFU, GPU type, ZeRO stage and
recomputation and see days, GPU-hours, per-GPU memory and the forced layout;
``explorer_figure(...)`` is its picture of one plan (the book's static stand-in is
``figures/capacity_explorer.png``).
"""

from __future__ import annotations

from playground import hardware
from playground.planner.memory import FRAGMENTATION, FRAMEWORK_BYTES
from playground.planner.replay import plan_json
from playground.plotting import COLORS, new_figure

__all__ = ["explorer", "explorer_figure", "MFU"]

MFU = 0.40  # the explorer's starting MFU, the planner's default


def explorer_figure(params=70e9, tokens=1.4e12, gpus=1024, mfu=MFU, gpu="H100", zero_stage=1,
                    recompute="selective"):
    """The explorer's picture of one plan: per-GPU memory against HBM, and the headline numbers."""
    p = plan_json(params=params, tokens=tokens, gpus=gpus, mfu=mfu, gpu=gpu, zero_stage=zero_stage,
                  recompute=recompute)
    m, par = p["memory"], p["parallelism"]
    fig, ax = new_figure(width=6.4, height=3.0)
    parts = m["model_state_parts"]
    left = 0
    gib = 2 ** 30
    for (label, value), color in zip([("parameters", parts["parameters"]), ("gradients", parts["gradients"]),
                                      ("optimizer", parts["optimizer"]), ("ZeRO-3 buffers", m["zero3_buffers"]),
                                      ("activations", m["activations"]), ("logits", m["logits"])],
                                     COLORS):
        ax.barh(0, value / gib, left=left, color=color, label=label)
        left += value / gib
    ax.axvline(m["capacity"] / gib, color="black", lw=1.5)
    ax.axvline(m["usable"] / gib, color="black", lw=1, ls="--")
    ax.set_yticks([])
    ax.set_xlabel(f"GiB per {p['gpu']} (black line: memory; dashed: usable, less {FRAMEWORK_BYTES / gib:.0f} GiB "
                  f"and {100 * FRAGMENTATION:.0f}%)")
    layout = par["description"]
    ax.set_title(f"{params / 1e9:.0f}B on {tokens / 1e12:.2g}T tokens, {gpus} GPUs at MFU {mfu:.2f}: "
                 f"{p['days']:.1f} days, {p['gpu_hours'] / 1e6:.2f}M GPU-hours\n{layout}"
                 + ("" if par["fits"] else "  -- nothing fits"), fontsize=10)
    ax.legend(ncol=3, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return fig, p


def explorer():
    """An ipywidgets explorer: model size, tokens, GPUs, MFU -> days, GPU-hours, memory, layout."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from playground.planner.cli import report
    style = {"description_width": "110px"}
    controls = {
        "params": w.FloatLogSlider(value=70e9, base=10, min=9, max=12.5, step=0.05,
                                   description="parameters", style=style),
        "tokens": w.FloatLogSlider(value=1.4e12, base=10, min=10, max=13.5, step=0.05,
                                   description="tokens", style=style),
        "gpus": w.SelectionSlider(options=[int(2 ** k) for k in range(3, 16)], value=1024,
                                  description="GPUs", style=style),
        "mfu": w.FloatSlider(value=MFU, min=0.05, max=1.0, step=0.05, description="MFU", style=style),
        "gpu": w.Dropdown(options=hardware.gpu_names(), value="H100", description="GPU", style=style),
        "zero_stage": w.Dropdown(options=[0, 1, 2, 3], value=1, description="ZeRO stage", style=style),
        "recompute": w.Dropdown(options=["none", "selective", "full"], value="selective",
                                description="recompute", style=style),
    }
    out = w.Output()

    def update(**kw):
        with out:
            out.clear_output(wait=True)
            fig, p = explorer_figure(**kw)
            print(report(p))
            display(fig)
            plt.close(fig)

    w.interactive_output(update, controls)
    return w.HBox([w.VBox(list(controls.values())), out])  # a cell's last value: JupyterLab shows it
