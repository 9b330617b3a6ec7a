"""ZeRO stages 0-3 from scratch, on the ring collectives of ``playground.data_parallel.ring``.

``ZeroDP(model, stage)`` trains ``model`` data-parallel over the process group.  Each entry of
``model.layers`` becomes one *unit*: its parameters are re-pointed into one flat buffer, so a
unit is reduced, sharded and gathered as a single tensor (``shard_bounds`` decides which slice
of it rank r owns).  The stages differ only in what a rank keeps between uses:

* stage 0 (plain DP): everything replicated; gradients all-reduced; every rank runs Adam on all.
* stage 1: Adam's state (fp32 master weights, momentum, variance) kept for the own shard only.
  Gradients are reduce-scattered into the full-size buffer (only the own chunk is needed), each
  rank updates its shard, and the new parameters are all-gathered: 2Ψ elements, like stage 0.
* stage 2: as stage 1, but a unit's full gradient lives only until it is reduce-scattered, right
  when backward finishes that unit; the rank keeps the shard.
* stage 3: parameters sharded too.  A unit's full parameters are all-gathered just before its
  forward and freed after it, gathered again just before its backward and freed after: 3Ψ.

Gradient accumulation (``accumulate_step``): each of m micro-batches is reduced as its backward
finishes and added to the step's running sum (in the gradient's dtype), like FSDP2's default, so
gradients stay sharded; in stage 3 each micro-batch also gathers every unit again, twice (FSDP2's
``reshard_after_forward=True``): m·3Ψ elements per step instead of 3Ψ.

Precision recipes (``playground.zero.accounting.RECIPES``): ``"mixed"`` computes and communicates in
bf16 and keeps fp32 master weights in the optimizer; ``"fp32"`` does everything in fp32.
Gradients are summed over the n ranks and divided by n, so a rank's loss is the mean over its own
micro-batch and the update is the full-batch update.

Transients, not model state and not counted by ``state_bytes``: while backward finishes a unit,
its per-parameter gradients and their flattened copy (one unit at a time); in mixed precision,
the fp32 copy of the gradient shard that Adam reads during the update (4Ψ/n bytes, freed with
the gradients at the end of ``step``); ``playground.zero.peak_runs`` measures the peak they make.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from playground import comm
from playground.memory import storage_bytes
from playground.data_parallel.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from playground.data_parallel.shards import shard_bounds
from playground.zero.accounting import RECIPES, STAGES

__all__ = ["ZeroDP", "COMPUTE_DTYPE", "flat_units"]

COMPUTE_DTYPE = {"mixed": torch.bfloat16, "fp32": torch.float32}


def flat_units(model: nn.Module) -> list[nn.Module]:
    """The units ZeRO shards one at a time: the entries of ``model.layers``."""
    layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList) or not len(layers):
        raise ValueError("ZeroDP needs a model whose `layers` is a non-empty nn.ModuleList "
                         "(the chain of units it shards, like playground.model.TinyGPT)")
    return list(layers)


class _Unit:
    """One layer whose parameters are views into one flat buffer of ``numel`` elements."""

    def __init__(self, module: nn.Module, rank: int, n: int, dtype: torch.dtype):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.numel = sum(p.numel() for p in self.params)
        self.lo, self.hi = shard_bounds(self.numel, n)[rank]
        self.init32 = torch.cat([p.detach().reshape(-1).float() for p in self.params])
        self.flat = self.init32.to(dtype)  # the compute copy (bf16 in mixed precision)
        offset = 0
        for p in self.params:
            p.data = self.flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        self.grad = None      # full gradient (stages 0-1) or this rank's shard of it (2-3)
        self.shard = None     # stage 3: this rank's slice of the compute copy
        self.pending = 0      # parameters whose gradient backward has not delivered yet

    # stage 3: the full compute copy exists only around this unit's forward and backward
    def gather(self, group) -> bool:
        """Refill the full compute copy from the shards (a ring all-gather); False if present."""
        if self.flat.untyped_storage().nbytes():
            return False
        self.flat.untyped_storage().resize_(self.numel * self.flat.element_size())
        data = self.flat.data  # .data: refilling must not bump autograd's version counter
        data[self.lo:self.hi].copy_(self.shard)
        ring_all_gather(data, group)
        return True

    def free(self) -> None:
        self.flat.untyped_storage().resize_(0)


class ZeroDP:
    """Data-parallel Adam training of ``model`` with ZeRO stage 0, 1, 2 or 3 (see module doc).

    Build the same ``model`` (same seed) on every rank; call ``step(batch)`` with this rank's
    micro-batch.  ``parameters()`` returns the full fp32 parameters (gathered) for checking.
    """

    def __init__(self, model: nn.Module, stage: int, precision: str = "mixed", *,
                 lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, group=None):
        if type(stage) is not int or stage not in STAGES:  # not True, not 1.0
            raise ValueError(f"stage must be one of {STAGES} (0 = plain data parallelism), "
                             f"got {stage!r}")
        if not isinstance(precision, str) or precision not in RECIPES:
            raise ValueError(f"precision must be one of {sorted(RECIPES)}, got {precision!r}")
        flat_units(model)
        if any(p.dtype != torch.float32 for p in model.parameters()):
            raise ValueError("build the model in fp32: ZeroDP makes the bf16 copy itself, so the "
                             "fp32 master weights start from the exact initial values")
        if not dist.is_initialized():
            raise RuntimeError("ZeroDP needs an initialized process group "
                               "(run it under playground.launch.run or torchrun)")
        self.model, self.stage, self.precision, self.group = model, stage, precision, group
        self.n, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.grad_divisor = self.n  # ranks whose gradients are summed (HSDP: all replicas too)
        self._gathers = 0           # stage 3: all-gathers of a unit's parameters so far
        dtype = COMPUTE_DTYPE[precision]
        # frozen parameters are neither trained nor sharded: each rank keeps a replica, in the
        # compute dtype so that a frozen bias meets bf16 activations in mixed precision
        for p in model.parameters():
            if not p.requires_grad:
                p.data = p.data.to(dtype)
        # a unit with nothing to train (an activation, a frozen layer) has nothing to shard
        self.units = [_Unit(m, self.rank, self.n, dtype) for m in flat_units(model)
                      if any(p.requires_grad for p in m.parameters())]
        if not self.units:
            raise ValueError("ZeroDP found no trainable parameter in model.layers")
        masters = []
        for u in self.units:
            lo, hi = (0, u.numel) if stage == 0 else (u.lo, u.hi)
            if stage == 3:
                u.shard = u.flat[lo:hi].clone()
                u.free()
            if precision == "mixed":
                master = u.init32[lo:hi].clone()          # fp32 master, apart from the bf16 copy
            else:
                master = u.shard if stage == 3 else u.flat[lo:hi]  # fp32: its own master
            masters.append(nn.Parameter(master))
            u.init32 = None
        self.masters = masters
        self.optimizer = torch.optim.Adam(masters, lr=lr, betas=betas, eps=eps)
        self._hooks = []
        for u in self.units:
            for p in u.params:
                self._hooks.append(p.register_post_accumulate_grad_hook(
                    lambda p, u=u: self._grad_ready(u)))
            if stage == 3:
                self._hooks.append(u.module.register_forward_pre_hook(
                    lambda mod, args, u=u: self._before_forward(u)))
                self._hooks.append(u.module.register_forward_hook(
                    lambda mod, args, out, u=u: self._after_forward(u, out)))
        self.last_state_bytes: dict | None = None

    # ------------------------------------------------------------------ hooks
    # stage 3 gathers just in time; playground.zero.prefetch overrides these to gather ahead
    def _gather(self, u: _Unit) -> None:
        self._gathers += u.gather(self.group)

    def _before_forward(self, u: _Unit) -> None:
        self._gather(u)

    def _before_backward(self, u: _Unit) -> None:
        self._gather(u)

    def _after_forward(self, u: _Unit, out):
        if torch.is_grad_enabled() and isinstance(out, torch.Tensor) and out.requires_grad:
            # fires when backward reaches this unit's output: gather before its backward runs
            out.register_hook(lambda grad: self._before_backward(u))
        u.free()

    def _backward_done(self, u: _Unit) -> None:
        """Called when backward has computed all of ``u``'s local gradient (a timing point)."""

    def _reduce(self, u: _Unit, flat: torch.Tensor) -> torch.Tensor:
        """Sum ``u``'s flat local gradient over the ranks; return what this rank keeps."""
        if self.stage == 0:
            return ring_all_reduce(flat, self.group)
        if self.stage == 1:
            ring_reduce_scatter(flat, self.group)  # only the own chunk is summed (and needed)
            return flat
        return ring_reduce_scatter(flat, self.group).clone()  # keep the shard, drop the rest

    def _grad_ready(self, u: _Unit) -> None:
        u.pending -= 1
        if u.pending:
            return
        self._backward_done(u)
        # the whole unit's local gradient is ready: flatten it, then reduce it over ranks
        flat = torch.cat([p.grad.reshape(-1) for p in u.params])
        for p in u.params:
            p.grad = None
        reduced = self._reduce(u, flat)
        # gradient accumulation: every micro-batch is reduced (and, in stage 3, gathered) anew,
        # and its sum added to what the step's earlier micro-batches left, in the same dtype
        u.grad = reduced if u.grad is None else u.grad.add_(reduced)
        if self.stage == 3:
            u.free()

    # ------------------------------------------------------------------ training
    def step(self, batch, loss_fn) -> dict:
        """One step on this rank's ``batch``: forward, backward (with the stage's reductions),
        Adam on the own shard, re-distribution of the parameters.  Returns the local loss, the
        bytes this rank sent and in how many messages, the parameter all-gathers of stage 3,
        and records ``last_state_bytes`` (model states held at the step)."""
        return self.accumulate_step([batch], loss_fn)

    def accumulate_step(self, micro_batches, loss_fn) -> dict:
        """``step`` with gradient accumulation: forward and backward on each of this rank's
        ``micro_batches`` in turn (each reduced as it finishes, like FSDP2's default), then
        one update with the mean gradient.  The loss returned is the micro-batches' mean."""
        micro_batches = list(micro_batches)
        if not micro_batches:
            raise ValueError("accumulate_step needs at least one micro-batch")
        losses, gathers = [], self._gathers
        with comm.count() as moved:
            for inputs, targets in micro_batches:
                for u in self.units:
                    u.pending = len(u.params)
                loss = loss_fn(self.model(inputs), targets)
                loss.backward()
                losses.append(loss.item())
                missing = [i for i, u in enumerate(self.units) if u.pending]
                if missing:
                    raise RuntimeError(f"units {missing} got no gradient in backward: ZeroDP "
                                       "needs every parameter of every layer in the loss")
            self._update(self.grad_divisor * len(micro_batches))
        self.last_state_bytes = self.state_bytes()
        for u, master in zip(self.units, self.masters):
            u.grad, master.grad = None, None
        return {"loss": sum(losses) / len(losses), "sent_bytes": moved.sent_bytes,
                "messages": moved.calls.get("isend", 0), "all_gathers": self._gathers - gathers,
                "collective_bytes": dict(moved.payload_bytes)}  # built-in collectives' payload

    @torch.no_grad()
    def _update(self, divisor: int) -> None:
        """Adam on this rank's slice of every unit, then the new values to where forward reads them."""
        for u, master in zip(self.units, self.masters):
            master.grad = self._owned_gradient(u, divisor)
        self.optimizer.step()
        for u, master in zip(self.units, self.masters):
            self._redistribute(u, master)

    def _owned_gradient(self, u: _Unit, divisor: int) -> torch.Tensor:
        """The mean gradient of the slice this rank updates, in fp32 for Adam (in mixed precision
        a transient fp32 copy; in fp32 the buffer itself, averaged in place)."""
        grad = u.grad[u.lo:u.hi] if self.stage == 1 else u.grad  # stage 1: full-size buffer
        return grad.float().div_(divisor)

    def _redistribute(self, u: _Unit, master: torch.Tensor) -> None:
        """After Adam: stage 3 keeps the new shard (the next forward gathers it); stage 0 holds
        it all; stages 1-2 write their slice and all-gather everyone's."""
        if self.stage == 3:
            if self.precision == "mixed":
                u.shard.copy_(master)
        elif self.stage == 0:
            if self.precision == "mixed":
                u.flat.copy_(master)
        else:
            if self.precision == "mixed":
                u.flat[u.lo:u.hi].copy_(master)
            ring_all_gather(u.flat, self.group)   # everyone gets everyone's new shard

    # ------------------------------------------------------------------ inspection
    def state_bytes(self) -> dict[str, int]:
        """Bytes of model state this rank holds now (storages counted once)."""
        params = [u.flat for u in self.units] + [u.shard for u in self.units]
        grads = [u.grad for u in self.units]
        optim = [t for state in self.optimizer.state.values() for t in state.values()
                 if isinstance(t, torch.Tensor) and t.dim() > 0]
        if self.precision == "mixed":
            optim += list(self.masters)  # fp32 masters are optimizer state; in fp32 they are
        out = {"parameters": storage_bytes(params), "gradients": storage_bytes(grads),
               "optimizer": storage_bytes(optim)}  # the parameters themselves
        out["total"] = sum(out.values())
        return out

    @torch.no_grad()
    def parameters(self) -> torch.Tensor:
        """All parameters as one fp32 vector in ``model.parameters()`` order (the masters,
        all-gathered: the same on every rank)."""
        pieces = []
        for u, master in zip(self.units, self.masters):
            if self.stage == 0:
                pieces.append(master.detach().clone())
                continue
            full = torch.zeros(u.numel, dtype=torch.float32, device=master.device)
            full[u.lo:u.hi] = master
            pieces.append(ring_all_gather(full, self.group))
        return torch.cat(pieces)

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
