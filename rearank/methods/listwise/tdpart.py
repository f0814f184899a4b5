"""Top-down partitioning (Parry, MacAvaney, Ganguly, "Top-Down Partitioning for Efficient List-Wise Ranking",
arXiv 2405.14589): a pure schedule over a query's list, separate from any model.

A level ranks the top ``window`` passages of its list and takes the one at rank ``pivot`` (k) as the pivot; the
passages above it are the candidates, those below it the backfill. The rest of the list is cut into partitions
of ``window - 1`` passages, each ranked with the pivot put first, all in one round (their windows go out
together); what a partition ranks above the pivot joins the candidates, the rest the backfill. When no partition
beat the pivot the level is done: the top ``pivot`` passages are final. Otherwise the first ``budget``
candidates are the next level's list (the others stay above the pivot) and ranked the same way; a list of at
most ``window`` passages is ranked in one window. At depth 100 with window 20 and pivot 10 that is three rounds
(top window, five partitions, the candidates) and seven windows, against nine windows one after another for the
sliding window; the paper's code leaves a tail shorter than ``window - 1`` unranked (six windows at depth 100),
here every passage to the depth is compared with the pivot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Phases of a level: rank its top window, or compare the rest with the pivot.
TOP, PARTITION = "top", "partition"


@dataclass(frozen=True)
class Window:
    """One window of a round: the ids it presents, in order, and the span ``[start, end)`` of the list its
    passages other than the pivot held when the round began."""

    ids: tuple[int, ...]
    start: int
    end: int


@dataclass
class TopDown:
    """Top-down partitioning of one list of ids (positions in the first-stage order), round by round.

    :meth:`windows` gives the current round's windows (none once :attr:`done`); :meth:`advance` takes each
    window's ids as ranked, in window order, and moves to the next round. :meth:`order` is the list so far:
    the level's list, then what the finished levels placed below it.
    """

    head: list[int]
    window: int = 20
    pivot: int = 10
    budget: int = 20
    rest: list[int] = field(default_factory=list)
    round: int = 0
    phase: str = TOP
    candidates: list[int] = field(default_factory=list)
    backfill: list[int] = field(default_factory=list)
    chosen: int | None = None  # the pivot's id

    @property
    def done(self) -> bool:
        return not self.windows()

    def windows(self) -> list[Window]:
        """The windows of the current round."""
        if self.phase == TOP:
            if len(self.head) < 2:
                return []
            n = min(self.window, len(self.head))
            return [Window(tuple(self.head[:n]), 0, n)]
        assert self.chosen is not None
        size = self.window - 1
        return [Window((self.chosen, *self.head[start:start + size]), start, min(start + size, len(self.head)))
                for start in range(self.window, len(self.head), size)]

    def advance(self, ranked: list[list[int]]) -> None:
        """Apply the current round's answers: ``ranked[i]`` is window ``i``'s ids in the model's order."""
        if self.phase == TOP:
            top = ranked[0]
            if len(self.head) <= self.window:  # the whole list in one window: the level is ranked
                self.head, self.rest = [], top + self.rest
            else:
                k = self.pivot - 1
                self.chosen, self.candidates, self.backfill = top[k], top[:k], top[k + 1:]
                self.phase = PARTITION
        else:
            assert self.chosen is not None
            for ids in ranked:
                at = ids.index(self.chosen)
                self.candidates += ids[:at]
                self.backfill += ids[at + 1:]
            below = [*self.candidates[self.budget:], self.chosen, *self.backfill]
            if len(self.candidates) == self.pivot - 1:  # none beat the pivot: the top ``pivot`` are final
                self.head, self.rest = [], self.candidates + below + self.rest
            else:
                self.head, self.rest = self.candidates[:self.budget], below + self.rest
            self.candidates, self.backfill, self.chosen, self.phase = [], [], None, TOP
        self.round += 1

    def order(self) -> list[int]:
        """The ids in their current order (the final order once :attr:`done`)."""
        return self.head + self.rest
