"""Data parallelism for the RRPO trainer over ``torch.distributed`` (``torchrun --nproc_per_node N``; NCCL on GPUs,
gloo on CPU).

Every rank holds the whole policy. A batch of questions is split into contiguous shards, one per rank; each rank
samples and scores its own episodes (its reader calls go to its reader), and the ranks then agree on everything
the update needs: the raw advantages (gathered in batch order, so the normalisation window sees what a single
process would), and the gradients of each mini-batch (summed across ranks, as DDP's all-reduce does; each rank
divides its loss by the global mini-batch size, so the sum is the single-process gradient). The scorer's forward
is not one module call (it tokenises and batches inside ``PointwiseScorer.scores``), which is why the gradients
are all-reduced here rather than by wrapping the model in ``DistributedDataParallel``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class Group:
    """This process's place among the ranks (``world == 1``: a single process, every method a no-op)."""

    def __init__(self, rank: int = 0, world: int = 1) -> None:
        self.rank, self.world = rank, world

    @classmethod
    def from_env(cls, device: str | None = None) -> Group:
        """Join the process group ``torchrun`` describes in the environment (``WORLD_SIZE`` > 1), else a single one."""
        import torch.distributed as dist

        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        if not dist.is_initialized():
            backend = "nccl" if str(device or "").startswith("cuda") and torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend=backend)
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def main(self) -> bool:
        """Whether this rank writes the log, the checkpoints and the final scorer."""
        return self.rank == 0

    def bounds(self, n: int) -> tuple[int, int]:
        """This rank's contiguous slice ``[start, end)`` of ``n`` items (the first ``n % world`` ranks get one more)."""
        size, extra = divmod(n, self.world)
        start = self.rank * size + min(self.rank, extra)
        return start, start + size + (1 if self.rank < extra else 0)

    def shard(self, items: Sequence[T]) -> list[T]:
        start, end = self.bounds(len(items))
        return list(items[start:end])

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order."""
        if self.world == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def sum_gradients(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        """Sum the gradients over the ranks; a parameter no rank computed a gradient for keeps none."""
        if self.world == 1:
            return
        import torch.distributed as dist

        params = list(parameters)
        if not params:
            return
        present = torch.tensor([p.grad is not None for p in params], dtype=torch.int32,
                               device=params[0].device)
        dist.all_reduce(present, op=dist.ReduceOp.MAX)
        for p, flag in zip(params, present.tolist()):
            if flag:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()
