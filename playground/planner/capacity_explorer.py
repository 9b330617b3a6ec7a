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

__all__ = ["explorer", "explorer_figure", "MFU", "START"]

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


# the explorer's choices: every value the text uses is one of them exactly, so a slider never
# rounds its starting value (a rounded value would fire a second, blank redraw)
PARAMS = [1e9, 3e9, 7e9, 8e9, 13e9, 30e9, 70e9, 175e9, 405e9, 1e12]
TOKENS = [1e11, 3e11, 1e12, 1.4e12, 2e12, 3.5e12, 7e12, 15e12, 30e12]
GPUS = [int(2 ** k) for k in range(3, 16)]
MFUS = [round(0.05 * k, 2) for k in range(1, 21)]
START = {"params": 70e9, "tokens": 1.4e12, "gpus": 1024, "mfu": MFU, "gpu": "H100", "zero_stage": 1,
         "recompute": "selective"}  # the text's plan (chapter 5, figures/capacity_explorer.png)


def _label(x: float) -> str:
    return f"{x / 1e12:g}T" if x >= 1e12 else f"{x / 1e9:g}B"


def explorer():
    """An ipywidgets explorer: model size, tokens, GPUs, MFU -> days, GPU-hours, memory, layout.

    It draws the text's plan at once, and again whenever a control moves; ``box.current`` holds
    the values, the plan and the figure last drawn (for tests and for a reader's own cells)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from playground.planner.cli import report
    style = {"description_width": "initial"}
    wide = w.Layout(width="360px")

    def slider(options, value, description):
        return w.SelectionSlider(options=options, value=value, description=description, style=style,
                                 layout=wide, continuous_update=False)

    controls = {
        "params": slider([(_label(x), x) for x in PARAMS], START["params"], "parameters"),
        "tokens": slider([(_label(x), x) for x in TOKENS], START["tokens"], "tokens"),
        "gpus": slider(GPUS, START["gpus"], "GPUs"),
        "mfu": slider([(f"{x:.2f}", x) for x in MFUS], START["mfu"], "MFU"),
        "gpu": w.Dropdown(options=hardware.gpu_names(), value=START["gpu"], description="GPU", style=style,
                          layout=wide),
        "zero_stage": w.Dropdown(options=[0, 1, 2, 3], value=START["zero_stage"], description="ZeRO stage",
                                 style=style, layout=wide),
        "recompute": w.Dropdown(options=["none", "selective", "op", "full"], value=START["recompute"],
                                description="recompute", style=style, layout=wide),
    }
    out = w.Output(layout=w.Layout(width="100%"))
    names = list(controls)
    box = w.VBox([w.HBox([w.VBox([controls[k] for k in names[:4]]), w.VBox([controls[k] for k in names[4:]])]),
                  out])

    def draw(_change=None):
        values = {k: c.value for k, c in controls.items()}
        fig, p = explorer_figure(**values)
        box.current = {"values": values, "plan": p, "figure": fig}
        with out:
            out.clear_output(wait=True)
            print(report(p))
            display(fig)
        plt.close(fig)

    for control in controls.values():
        control.observe(draw, names="value")
    draw()  # the first view: drawn now, from the text's values, before any control moves
    return box  # a cell's last value: JupyterLab shows it
