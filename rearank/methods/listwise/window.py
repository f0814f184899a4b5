"""The sliding-window schedule: a pure function, separate from any model."""

from __future__ import annotations


def schedule(n: int, window: int = 20, step: int = 10, passes: int = 1) -> list[tuple[int, int]]:
    """Return the windows ``[(start, end), ...]`` that rerank ``n`` items back to front.

    Windows of size ``window`` slide from the bottom of the list to the top by ``step``.
    ``n <= window`` gives the single window ``(0, n)``. When ``n`` is not a multiple of
    ``step`` the last window is clamped to ``(0, window)``, so every pass ends at rank 0.
    ``passes`` repeats the whole schedule. ``n == 0`` gives no window.
    """
    if window < 1 or step < 1 or passes < 0 or n < 0:
        raise ValueError(f"need window >= 1, step >= 1, passes >= 0, n >= 0; got {window=}, {step=}, {passes=}, {n=}")
    if step > window:
        raise ValueError(f"step ({step}) larger than window ({window}) would leave items never compared")
    if n == 0:
        return []
    one: list[tuple[int, int]] = []
    end = n
    while True:
        start = end - window
        if start <= 0:
            one.append((0, min(window, n)))
            break
        one.append((start, end))
        end -= step
    return one * passes


def window_count(n_candidates: int, window: int, step: int, passes: int, top_k: int) -> int:
    """How many windows (LLM calls, traces) a listwise query of ``n_candidates`` has: none below 2."""
    n = min(n_candidates, top_k)
    return len(schedule(n, window, step)) * passes if n >= 2 else 0
