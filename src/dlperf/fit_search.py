"""`dlperf fit`'s choice of the next batch to try, from the tries so far: pure functions, no process.

The plain search doubles the batch while every batch fits, then bisects between the largest batch that fit and the
smallest that did not, until they are neighbours: the answer N was measured and N+1 did not fit. From the second
batch that fits, the peak memory of the tries (close to linear in the batch) says where the limit would be reached
(`Line`): the search tries there instead of doubling step by step, and close to it once a batch did not fit
(`aim`), where that keeps within the most tries the plain search could make (`worst`), which fit says up front.
The answer is the boundary either way: a guess only chooses which batches are tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def next_batch(fits: dict[int, bool], start: int, max_batch: int, guess: Line | None = None,
               left: int | None = None, longest: int | None = None) -> int | None:  # fmt: skip
    """The next batch to try from what the tries so far said (batch -> fitted), or None when the answer is known:
    `start` first; then doubling while every batch fits, up to `max_batch`, and bisection between the largest batch
    that fit (0 when none has) and the smallest that did not, until they are neighbours. With a `guess` (`Line`: the
    peak memory against the batch, and the memory there is), the batch `aim` picks instead, where that makes at most
    `left` tries to the answer whatever it turns out (`cost`): the answer is the boundary either way. `longest`: the
    largest batch --timeout allows (`longest`)."""
    if start not in fits:
        return start
    lo = max((b for b, ok in fits.items() if ok), default=0)
    hi = min((b for b, ok in fits.items() if not ok), default=None)
    if hi is None:
        plain = None if lo >= max_batch else min(2 * lo, max_batch)
    else:
        plain = None if hi - lo <= 1 else (lo + hi) // 2
    if plain is None or guess is None:
        return plain
    aimed = aim(lo, hi, guess, max_batch if longest is None else min(max_batch, longest))
    if aimed is None or aimed == plain or not lo < aimed < (hi or max_batch + 1):
        return plain
    return plain if left is not None and cost(fits, aimed, start, max_batch) > left else aimed


def cost(fits: dict[int, bool], batch: int, start: int, max_batch: int) -> int:
    """The most tries to the answer if `batch` is tried next: it, then the plain search's most (`worst`) whether it
    fits or not."""
    return 1 + max(worst({**fits, batch: ok}, start, max_batch) for ok in (True, False))


SLACK = 2  # the tries a guess may cost beyond bisecting from where the search stands (`Search.search`)
MARGIN = 1 / 16  # of the memory there is: what the guess leaves for what a step's peak does not count


def aim(lo: int, hi: int | None, guess: Line, top: int) -> int | None:
    """A batch the peak memory's line (`guess`) says is near the limit, above the largest batch that fit (`lo`) and
    below the smallest that did not (`hi`, None while none has), at most `top`; None to leave it to the plain
    search. While every batch fits: the batch whose peak would take all but the line's margin of the memory (1/16:
    the process's own and the allocator's share, which a tensors' peak leaves out; 1/64 where the line goes through
    the data segment's peak, which the CPU's limit counts), but beyond a doubling only where the batch that would
    leave 4 margins (a quarter) is beyond it too (where the model's own memory takes most of it, a small error in
    the memory is a large one in the batch); else, where that fitted, the one whose peak would take it all (or a
    little more) if closer than a doubling. A line of what the limit counts (`Line.exact`) aims under the limit
    only while the largest batch that fit left more than two margins, then a margin past it: a batch at the limit
    is as likely to fit as not, and one that fits there brackets nothing. A leap beyond `top` stops there if that
    is still beyond a doubling. Once a batch did not fit: the bisection's, or where closer to the guessed limit, the
    batch that would leave none, 1, 2, 4 or 8 margins of the memory (1/16: none, 1/16, 1/8, 1/4, 1/2)."""
    margin = guess.margin
    if hi is None:
        under = guess.batch_at(1 - margin)
        room = guess.peak < (1 - 2 * margin) * guess.budget if guess.exact else under > lo * (1 + margin)
        if room and (under <= 2 * lo or guess.batch_at(1 - 4 * margin) >= 2 * lo):
            near = under
        else:
            shares = (1, 2, 4, 8) if guess.exact else (0, 1, 2, 4, 8)  # an exact line's limit: as likely to fit
            over = (guess.batch_at(1 + k * margin) for k in shares)
            near = next((b for b in over if lo < b <= 2 * lo), None)
        if near is None or near <= top:
            return near
        return top if top >= 2 * lo else None
    bisection = (lo + hi) // 2
    below = [b for b in map(guess.batch_at, (1, 1 - margin, 1 - 2 * margin, 1 - 4 * margin, 1 - 8 * margin))
             if bisection < b < hi]  # fmt: skip
    return max(below, default=bisection) if max(below, default=bisection) <= top else None


@dataclass(frozen=True)
class Line:
    """A step's peak memory against the batch, through the peaks of the two largest batches that fitted (memory
    grows close to linearly with the batch), and the memory there is for it (`budget`, bytes)."""

    batch: int
    peak: int
    per_sample: float
    budget: int
    margin: float = MARGIN  # of the budget: how far off the line may be (`aim` brackets the limit by it)
    exact: bool = False  # the peaks are what the limit counts (a CPU try's data segment), not a part of it

    def batch_at(self, share: float) -> int:
        """The batch whose peak would take `share` of the budget (0 or less where no batch would)."""
        return max(0, math.floor(self.batch + (share * self.budget - self.peak) / self.per_sample))


def line_of(peaks: list[tuple[int, int]], budget: int | None) -> Line | None:
    """The peak memory's line through the two largest batches of `peaks` (batch, peak bytes); None without a budget,
    two peaks, or a peak that grows with the batch."""
    peaks = sorted(peaks)[-2:]
    if budget is None or len(peaks) < 2 or peaks[1][1] <= peaks[0][1]:
        return None
    (b1, p1), (b2, p2) = peaks
    return Line(b2, p2, (p2 - p1) / (b2 - b1), budget)


def bisections(width: int) -> int:
    """The most tries bisection makes to bring a largest-that-fit and a smallest-that-did-not `width` apart to
    neighbours."""
    return max(0, width - 1).bit_length()


def worst(fits: dict[int, bool], start: int, max_batch: int) -> int:
    """The most tries the plain search (doubling, then bisection) makes from what the tries so far said, whatever the
    boundary: what `dlperf fit` says it makes at most, and what a guess may not go beyond."""
    if start not in fits:
        return 1 + max(bisections(start), climb(start, max_batch))
    lo = max((b for b, ok in fits.items() if ok), default=0)
    hi = min((b for b, ok in fits.items() if not ok), default=None)
    return climb(lo, max_batch) if hi is None else bisections(hi - lo)


def climb(lo: int, max_batch: int) -> int:
    """The most tries of doubling from `lo` (which fit) up to `max_batch`, and of bisecting below the first that
    does not fit."""
    most = made = 0
    while lo < max_batch:
        batch, made = min(2 * lo, max_batch), made + 1
        most, lo = max(most, made + bisections(batch - lo)), batch
    return most
