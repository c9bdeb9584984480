"""Tie-aware selection of the highest and lowest scores: guesses that depend on the scores only.

The one-run audits guess IN for the k+ highest scores and OUT for the k- lowest and abstain on
the rest (Steinke, Nasr and Jagielski 2023, arXiv:2305.08846, Sec. 3, Algorithm 1; the released
guesses of Xiang et al. 2025 and of Mahloujifar, Melis and Chaudhuri 2025 are chosen the same
way). Their validity argument needs the guesses to be a function of the mechanism's output
(the scores) alone: given the scores, the canaries' coins are what the bound is about. When a
block of equal scores straddles the cut, "the k highest" is not a function of the scores; a
sort that breaks the tie by position in the file makes the guess depend on the file order, and
a file that lists its IN canaries first then leaks membership through position (constant
scores gave valid-looking bounds of 4 to 18).

So a guesser asked for k guesses from the top takes the canaries whose score is strictly above
the cut and abstains on the whole tied block that straddles it: at most k guesses, exactly k
where no tie straddles the cut (results on files without ties are unchanged), and the same
guesses, hence the same counts and bounds, for every order of the canaries. Likewise from the
bottom. A selection rule that tries several k tests one candidate per k whatever number of
guesses it ends up making, so a Bonferroni correction over the candidates stays the same;
a candidate left with no guess bounds epsilon by 0.

:class:`Cut` is the one implementation, used by every estimator that guesses on the highest or
lowest scores (:mod:`.one_run`, :mod:`.fdp_one_run`, hence :mod:`.fdp_abstention`). Threshold
rules (``score >= t``, :mod:`.multi_run`, :mod:`.lidp`, :mod:`.attack_metrics`) compare against
score values and never split a tie, so they need no cut.
"""

from __future__ import annotations

import numpy as np


class Cut:
    """The values ``key`` sorted once, with cumulative sums of ``weights`` in that order.

    :meth:`top` (:meth:`bottom`) turns a requested number k of the highest (lowest) values into
    the number actually taken, stopping before a tied block that straddles the cut;
    :meth:`sum_top` / :meth:`sum_bottom` sum a weight over the j taken. Both depend on the
    multiset of (key, weights) pairs only: the sums are read at boundaries between distinct
    values, where the order of tied items does not matter.
    """

    def __init__(self, key: np.ndarray, *weights: np.ndarray) -> None:
        key = np.asarray(key, dtype=np.float64).ravel()
        order = np.argsort(key)  # ties in any order: every sum below is read at a block edge
        self.n = int(key.size)
        self.asc = key[order]
        self._cum = [
            np.concatenate(([0], np.cumsum(np.asarray(w, dtype=np.int64).ravel()[order])))
            for w in weights
        ]

    def top(self, k: int | np.ndarray) -> int | np.ndarray:
        """How many of the ``k`` highest values are strictly above the (k+1)-th highest (k
        clipped to [0, n]): k itself unless a tie straddles the cut."""
        kk = np.clip(np.asarray(k, dtype=np.int64), 0, self.n)
        nxt = self.asc[np.clip(self.n - kk - 1, 0, max(self.n - 1, 0))]  # the (k+1)-th highest
        taken = np.where(kk >= self.n, self.n, self.n - np.searchsorted(self.asc, nxt, "right"))
        return taken if taken.ndim else int(taken)

    def bottom(self, k: int | np.ndarray) -> int | np.ndarray:
        """How many of the ``k`` lowest values are strictly below the (k+1)-th lowest (k
        clipped to [0, n]): k itself unless a tie straddles the cut."""
        kk = np.clip(np.asarray(k, dtype=np.int64), 0, self.n)
        nxt = self.asc[np.minimum(kk, max(self.n - 1, 0))]  # the (k+1)-th lowest
        taken = np.where(kk >= self.n, self.n, np.searchsorted(self.asc, nxt, "left"))
        return taken if taken.ndim else int(taken)

    def sum_top(self, j: int | np.ndarray, weight: int = 0) -> int | np.ndarray:
        """The sum of weight number ``weight`` over the ``j`` highest values (j from
        :meth:`top`, so that no tie is split)."""
        cum = self._cum[weight]
        out = cum[self.n] - cum[self.n - np.asarray(j, dtype=np.int64)]
        return out if out.ndim else int(out)

    def sum_bottom(self, j: int | np.ndarray, weight: int = 0) -> int | np.ndarray:
        """The sum of weight number ``weight`` over the ``j`` lowest values (j from
        :meth:`bottom`)."""
        out = self._cum[weight][np.asarray(j, dtype=np.int64)]
        return out if out.ndim else int(out)


def in_id_order(
    score: np.ndarray, membership: np.ndarray, canary_id: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One trial's (score, membership) with the canaries sorted by canary id (then score, then
    membership, should an id repeat).

    The random parts of an estimator (the sample splits of ``sample_split`` / ``multi_split``)
    index canaries by position; taken in id order, they give the same rows for every order of
    the canaries in the file. A seeded permutation of positions is a uniformly random split
    whatever the order it permutes, so this changes no validity argument, and nothing at all
    for a file whose ids ascend (every file the pipeline writes for the one-run design).
    """
    order = np.lexsort((np.ravel(membership), np.ravel(score), np.ravel(canary_id)))
    return np.ravel(score)[order], np.ravel(membership)[order]
