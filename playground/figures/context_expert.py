"""Figures of the context- and expert-parallel sections (chapter 4), each from a real run."""

from __future__ import annotations

from matplotlib.patches import Patch, Rectangle

from playground.figures import figure
from playground.plotting import COLORS, new_figure

RING_RANKS = 4
RING_CASE = dict(batch=1, heads=1, seq_len=16, head_dim=4, causal=True, dtype="float64", seed=0)
MOE_RANKS = 4
MOE_SHAPE = dict(tokens=256, d_model=32, n_experts=8, top_k=2)
CAPACITY_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
KIND_COLORS = {"full": COLORS[0], "diagonal": COLORS[1], "skipped": "#DDDDDD"}


def recorded_ring_schedule(world_size: int = RING_RANKS) -> list[dict]:
    """The (step, rank, key block, kind) entries a real causal ring-attention run records."""
    from playground.launch import run
    from playground.systems_map.ring_attention_runs import check_ring_attention
    values = run(check_ring_attention, world_size, [RING_CASE], quiet=True)
    return sorted((s for v in values for s in v[0]["schedule"]), key=lambda s: (s["rank"], s["step"]))


@figure("ring_attention_schedule.png")
def ring_attention_schedule():
    schedule = recorded_ring_schedule()
    n = RING_RANKS
    fig, (left, right) = new_figure(ncols=2, width=9.0, height=4.0)
    for s in schedule:
        r, t, j, kind = s["rank"], s["step"], s["k_block"], s["kind"]
        left.add_patch(Rectangle((t, r), 1, 1, facecolor=KIND_COLORS[kind], edgecolor="white", lw=2))
        left.text(t + 0.5, r + 0.5, f"Q{r}·K{j}", ha="center", va="center", fontsize=9,
                  color="black" if kind == "skipped" else "white")
        right.add_patch(Rectangle((j, r), 1, 1, facecolor=KIND_COLORS[kind], edgecolor="white", lw=2))
        if kind != "skipped":
            right.text(j + 0.5, r + 0.5, f"step {t}", ha="center", va="center", fontsize=9, color="white")
    computed = [sum(s["kind"] != "skipped" for s in schedule if s["rank"] == r) for r in range(n)]
    for ax in (left, right):
        ax.set_xlim(0, n)
        ax.set_ylim(n, 0)
        ax.set_aspect("equal")
        ax.grid(False)
    left.set_xticks([t + 0.5 for t in range(n)], [str(t) for t in range(n)])
    left.set_yticks([r + 0.5 for r in range(n)], [f"rank {r} ({c} tiles)" for r, c in enumerate(computed)])
    left.set_xlabel("ring step (K/V block held = rank − step mod n)")
    left.set_title(f"What each rank computes ({n} ranks, causal)")
    right.set_xticks([j + 0.5 for j in range(n)], [f"K{j}" for j in range(n)])
    right.set_yticks([r + 0.5 for r in range(n)], [f"Q{r}" for r in range(n)])
    right.set_xlabel("key block (s/n positions each)")
    right.set_title("The s × s score matrix, tile by tile")
    right.legend(handles=[Patch(color=c, label=k) for k, c in KIND_COLORS.items()],
                 loc="upper right", fontsize=8, framealpha=0.9)
    return fig


def routing_runs():
    """Real 4-rank expert-parallel forward passes at several capacity factors, with a skewed
    and with a uniformly random router (``playground.systems_map.expert_parallel_runs.drop_sweep``)."""
    from playground.systems_map.expert_parallel_runs import drop_sweep
    from playground.launch import run
    values = run(drop_sweep, MOE_RANKS, *MOE_SHAPE.values(), CAPACITY_FACTORS, quiet=True)
    return [v["skewed"] for v in values], [v["uniform"] for v in values]


@figure("moe_routing.png")
def moe_routing():
    from playground.systems_map.moe import predicted_drops
    skewed, uniform = routing_runs()
    T, E, k = MOE_SHAPE["tokens"], MOE_SHAPE["n_experts"], MOE_SHAPE["top_k"]
    at = CAPACITY_FACTORS.index(1.0)
    fig, (left, right) = new_figure(ncols=2, width=10.0, height=4.0)
    kept = [sum(v[at]["kept"][e] for v in skewed) for e in range(E)]
    assigned = [sum(v[at]["assigned"][e] for v in skewed) for e in range(E)]
    dropped = [a - b for a, b in zip(assigned, kept)]
    slots = MOE_RANKS * skewed[0][at]["capacity"]
    left.bar(range(E), kept, color=COLORS[0], label="kept")
    left.bar(range(E), dropped, bottom=kept, color=COLORS[3], label="dropped")
    left.axhline(slots, color="black", ls="--", lw=1, label=f"n·C = {slots} slots")
    left.set_xlabel("expert")
    left.set_ylabel("(token, choice) assignments")
    left.set_title(f"Skewed router, cf = 1: {sum(dropped)} of {MOE_RANKS * T * k} dropped")
    left.legend(fontsize=8)
    total = MOE_RANKS * T * k
    for runs, color, label in ((uniform, COLORS[2], "measured, uniform random router"),
                               (skewed, COLORS[3], "measured, skewed router")):
        right.plot(CAPACITY_FACTORS, [100 * sum(v[i]["dropped"] for v in runs) / total
                                      for i in range(len(CAPACITY_FACTORS))], "o", color=color, label=label)
    fine = [0.5 + 0.05 * i for i in range(31)]
    right.plot(fine, [100 * predicted_drops(T, E, k, cf)[0] / (T * k) for cf in fine], color=COLORS[2],
               label="binomial model (random routing)")
    right.plot(fine, [100 * max(0.0, 1 - cf) for cf in fine], color="black", ls=":",
               label="perfect balance: max(0, 1 − cf)")
    right.set_xlabel("capacity factor cf")
    right.set_ylabel("assignments dropped (%)")
    right.set_title(f"Drops vs capacity ({MOE_RANKS} ranks, T={T}/rank, E={E}, k={k})")
    right.legend(fontsize=8)
    return fig
