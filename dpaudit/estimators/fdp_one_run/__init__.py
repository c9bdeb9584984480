"""Tight privacy audit in one run (Xiang, Wang, Xiao, Tian, Wang 2025; arXiv:2509.08704).

As printed, with the caveats below.

n secret bits (canaries included by fair coins), one run of the mechanism, and r guesses
released by a top-r filter on a confidence score (Def. 6, Eq. 7). Of the r released guesses
``wrong`` are wrong. The null hypothesis is "the mechanism is f-DP" for f in a one-parameter
family (mu-GDP, Laplace, f_{eps,delta}, subsampled Gaussian). The paper's reduction:

* Theorem 1: any f-DP audit is "transmission-dominated" by n independent f-DP channels with the
  MAP decoder and score |privacy loss| (Def. 9-10, Lemma 2).
* Theorem 3, Eq. (25): the k-th best released guess of those channels errs with probability
  v_k, an integral against the order-statistic density (Theorem 2, Eq. 22). With the
  substitution u = 1 - F_Y in Eq. (25), v_j = E[h(U_(j))], U_(j) ~ Beta(j, n - j + 1), where
  h is the quantile function of the error probability 1/(1 + e^{|L|}) under (P + Q)/2 and
  j = 1 is the most confident released guess.
* Proposition 1, Eq. (26): P[at most u errors] <= min_{lambda<0} exp(-lambda u
  + sum_k ln(1 - v_k + v_k e^lambda)), the Chernoff bound for independent Bernoulli(v_k);
  this is the paper's p-value. It bounds the tail of independent Bernoulli(v_k), which is
  narrower than the true law of the released errors (they are dependent through the shared
  order statistics), so the default tail never reports less than the exact one below.
* Exact tail (``tail="exact"``, an extension): the exact law of the wrong count of the
  dominating audit (the right-hand side of Eq. 19), by conditioning on the selection
  threshold: W | T ~ Binomial(r, m(T)), T ~ Beta(r+1, n-r) (:func:`exact_log_cdf`); at
  r = n, W ~ Binomial(n, p_min).
* Section 5.4: the lower bound is the least private null that is still rejected, found here by
  root finding on the family parameter (the rejected, conservative end is returned), then
  reported as (epsilon, delta) by Algorithm 2.

Soundness caveats (docs/estimators/fdp_one_run.md, findings): Theorem 1 fails for the
f_{eps,delta} family with delta > 0 (a counterexample mechanism is in
:mod:`dpaudit.mechanisms.fdp_pathological`); that is left as printed. The V_k of Theorem 3 are not
independent: Eq. (26) alone falls below the true tail when few errors are expected, so the
default p-value is max(Eq. 26, exact tail), which is what the paper's Eq. (19) needs.

Where each part lives: :mod:`.definition` (the paper's formulas by plain numerics, the
reference of the tests); the fast code: :mod:`.families` (the null families: h, p_min,
Algorithm 2), :mod:`.tails` (v_j, the Chernoff and exact tails, the p-value), :mod:`.bound`
(Section 5.4's search); :mod:`.guesses` (the released guesses, Def. 6, Eq. 7, and the
rejections of a true f_{eps,delta} null); :mod:`.audit` (the runner over a score file).
"""
