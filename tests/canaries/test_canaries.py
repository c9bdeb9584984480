"""Canary generators and inclusion designs (Pillutla et al. 2023 App. D; Steinke et al. 2023 §4)."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.canaries.gradient_space import dirac, random_direction
from dpaudit.canaries.inclusion import lidp_split, single_target_coin
from dpaudit.canaries.input_space import clipbkd, in_distribution, mislabeled, tail_components


def test_mislabeled_changes_every_label_and_in_distribution_keeps_them():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 3)).astype(np.float32), rng.integers(0, 4, 50)
    xm, ym = mislabeled(x, y, 30, 4, seed=1)
    xi, yi = in_distribution(x, y, 30, seed=1)
    np.testing.assert_array_equal(xm, xi)  # same records for the same seed
    assert (ym != yi).all() and set(ym) <= {0, 1, 2, 3}
    # every other label is used (uniform over the k-1 wrong classes)
    xm2, ym2 = mislabeled(x, y, 50, 4, seed=2)
    _, yi2 = in_distribution(x, y, 50, seed=2)
    assert len({(a, b) for a, b in zip(yi2, ym2, strict=True)}) > 8
    with pytest.raises(ValueError, match="canary_pool"):
        mislabeled(x, y, 51, 4)


def test_clipbkd_uses_low_variance_directions():
    """The tail principal directions carry (almost) none of the training data's variance."""
    rng = np.random.default_rng(0)
    scales = np.linspace(3, 0.01, 10)
    x = (rng.normal(size=(500, 10)) * scales).astype(np.float32)
    comps, mean = tail_components(x, 7, 10)
    np.testing.assert_allclose(comps @ comps.T, np.eye(3), atol=1e-8)
    var = ((x - mean) @ comps.T).var(0)
    np.testing.assert_allclose(var, scales[7:] ** 2, rtol=0.25)  # the 3 smallest variances
    assert ((x - mean) @ tail_components(x, 0, 1)[0].T).var() > 8
    cx, cy = clipbkd(x, 3, 7, 10, label=2, scale=5.0, seed=0)
    assert cx.shape == (3, 10) and (cy == 2).all()
    np.testing.assert_allclose(np.linalg.norm(cx - mean, axis=1), 5.0, rtol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        tail_components(x, 5, 11)


def test_clipbkd_random_labels():
    """label=None gives each canary its own class, the same directions as a fixed label, and
    the same labels for the same seed; the fixed label stays the default behaviour."""
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(300, 40)) * np.linspace(3, 0.01, 40)).astype(np.float32)
    fx, fy = clipbkd(x, 32, 8, 40, label=5, scale=20.0, seed=3)
    rx, ry = clipbkd(x, 32, 8, 40, label=None, scale=20.0, seed=3, n_classes=10)
    np.testing.assert_array_equal(rx, fx)
    assert (fy == 5).all() and ry.dtype == np.int64
    assert ((ry >= 0) & (ry < 10)).all() and len(set(ry.tolist())) >= 5
    np.testing.assert_array_equal(clipbkd(x, 32, 8, 40, None, 20.0, 3, n_classes=10)[1], ry)
    assert not np.array_equal(clipbkd(x, 32, 8, 40, None, 20.0, 4, n_classes=10)[1], ry)
    with pytest.raises(ValueError, match="n_classes"):
        clipbkd(x, 4, 8, 40, label=None)


def test_gradient_canaries():
    v, coords = dirac(20, 100, 2.0, seed=3)
    assert len(set(coords)) == 20
    np.testing.assert_array_equal(np.nonzero(v)[1], coords)
    assert (v[np.arange(20), coords] == 2.0).all()
    r = random_direction(5, 1000, 1.5, seed=0)
    np.testing.assert_allclose(np.linalg.norm(r, axis=1), 1.5, rtol=1e-5)
    assert abs((r[0] @ r[1]) / 1.5**2) < 0.15  # nearly orthogonal in high dimension
    with pytest.raises(ValueError, match="distinct coordinates"):
        dirac(101, 100, 1.0)


def test_inclusion_designs():
    ins, null = lidp_split(100, 8, seed=0)
    assert len(set(ins) | set(null)) == 16
    with pytest.raises(ValueError, match="2k"):
        lidp_split(10, 6, 0)
    coins = [single_target_coin(s) for s in range(400)]
    assert 160 < sum(coins) < 240


def test_sparse_dirac_canaries_equal_the_dense_ones_in_every_operation():
    """The sparse form (a coordinate and a value per canary) gives the dense matrix's numbers:
    the same coordinates as ``dirac``, ``x @ V^T``, ``flat += counts @ V``, norms and clipping."""
    import torch

    from dpaudit.canaries import gradient_space as gs

    m, p, c = 7, 40, 1.5
    sparse = gs.dirac_sparse(m, p, c, seed=3, zeros=2)  # 2 zero-out records after the pool
    v, coords = dirac(m, p, c, seed=3)
    dense = torch.from_numpy(np.concatenate([v, np.zeros((2, p), np.float32)]))
    assert sparse.shape == (m + 2, p)
    np.testing.assert_array_equal(sparse.coords[:m].numpy(), coords)
    torch.testing.assert_close(sparse.dense(), dense, rtol=0, atol=0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, p, generator=g)
    torch.testing.assert_close(gs.dots(sparse, x), gs.dots(dense, x), rtol=0, atol=1e-6)
    counts = torch.randint(-1, 2, (3, m + 2), generator=g).float()
    a, b = x.clone(), x.clone()
    gs.add_weighted(a, counts, sparse)
    gs.add_weighted(b, counts, dense)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    torch.testing.assert_close(gs.row_norms(sparse), gs.row_norms(dense))
    torch.testing.assert_close(gs.clip_rows(sparse, 1.0).dense(), gs.clip_rows(dense, 1.0))
    assert abs(float(gs.row_norms(gs.clip_rows(sparse, 1.0))[0]) - 1.0) < 1e-5


def test_sparse_dirac_memory_is_linear_in_m():
    """Paper scale: 5000 Dirac canaries on WRN-16-4 (2.7M parameters) are 55 GB dense; the
    sparse form stores one coordinate and one value each."""
    from dpaudit.canaries.gradient_space import SparseCanaries, dirac_sparse

    s = dirac_sparse(5000, 2_750_000, 1.0, seed=0)
    assert s.shape == (5000, 2_750_000)
    nbytes = s.coords.element_size() * s.coords.numel() + s.values.element_size() * 5000
    assert nbytes <= 12 * 5000
    assert len(set(s.coords.tolist())) == 5000  # distinct coordinates
    with pytest.raises(ValueError, match="coordinates"):
        SparseCanaries(s.coords[:2], s.values[:2], n_params=10)
    with pytest.raises(ValueError, match="distinct coordinates"):
        dirac_sparse(11, 10, 1.0)


def test_dirac_canaries_from_a_given_coordinate():
    """canaries.dirac_coordinate: canary k on coordinate first + k (first = 0 with one canary is
    the gradient canary [C, 0, ..., 0] of Xiang, Wang, Wang 2024, Section 4.1); null keeps the
    random distinct coordinates; a pool that runs past the parameter count is an error."""
    from dpaudit.canaries.gradient_space import dirac_coordinates, dirac_sparse

    np.testing.assert_array_equal(dirac_coordinates(1, 650, first=0), [0])
    np.testing.assert_array_equal(dirac_coordinates(3, 650, first=640), [640, 641, 642])
    s = dirac_sparse(1, 650, 2.0, seed=7, zeros=1, first=17)
    assert s.coords.tolist() == [17, 0] and s.values.tolist() == [2.0, 0.0]
    random = dirac_coordinates(5, 650, seed=3)
    np.testing.assert_array_equal(dirac_coordinates(5, 650, seed=3, first=None), random)
    with pytest.raises(ValueError, match="coordinates 648..650; the model has 650"):
        dirac_coordinates(3, 650, first=648)
    with pytest.raises(ValueError, match="coordinate -1"):
        dirac_coordinates(1, 650, first=-1)


def test_lowest_mass_coordinates_rank_the_data_gradient_and_break_ties_by_seed():
    """canaries.dirac_placement: low_gradient (Steinke, Nasr, Jagielski 2023, Section 4.1: the
    white-box adversary chooses its canary gradients): the m coordinates of smallest gradient
    mass, lowest first; the order within ties comes from the seed, not from the index."""
    from dpaudit.canaries.gradient_space import dirac_sparse, lowest_mass_coordinates

    mass = np.array([0.5, 0.0, 0.3, 0.0, 0.0, 0.1, 0.0, 0.9])
    zeros = {1, 3, 4, 6}
    got = lowest_mass_coordinates(mass, 6, seed=0)
    assert set(got[:4]) == zeros and got[4:].tolist() == [5, 2]
    orders = {tuple(lowest_mass_coordinates(mass, 4, seed=s)) for s in range(20)}
    assert all(set(o) == zeros for o in orders) and len(orders) > 1  # ties: random order
    np.testing.assert_array_equal(
        lowest_mass_coordinates(mass, 4, seed=3), lowest_mass_coordinates(mass, 4, seed=3)
    )
    s = dirac_sparse(2, 8, 1.5, zeros=1, coords=got[:2])
    assert s.coords.tolist() == [*got[:2].tolist(), 0] and s.values.tolist() == [1.5, 1.5, 0.0]
    with pytest.raises(ValueError, match="9 Dirac canaries need 9 distinct coordinates"):
        lowest_mass_coordinates(mass, 9)
    with pytest.raises(ValueError, match="non-negative"):
        lowest_mass_coordinates(-mass, 2)
    with pytest.raises(ValueError, match="distinct"):
        dirac_sparse(2, 8, 1.0, coords=np.array([1, 1]))
    with pytest.raises(ValueError, match="first coordinate or their coordinates"):
        dirac_sparse(2, 8, 1.0, first=0, coords=np.array([1, 2]))


def test_data_gradient_mass_is_the_mean_absolute_clipped_per_example_gradient():
    """data_gradient_mass equals a per-record autograd loop (clipped as Opacus clips), averaged
    over the records and the models; weights on a pixel that is 0 in every record get 0."""
    import torch
    import torch.nn.functional as F

    from dpaudit.models import build_for_data
    from dpaudit.training.dirac_placement import data_gradient_mass
    from dpaudit.training.vectorized import model_seeds

    rng = np.random.default_rng(1)
    x = rng.random((30, 1, 8, 8)).astype(np.float32)
    x[:, 0, 0, 0] = 0.0  # pixel 0 constant
    y = rng.integers(0, 10, size=30)
    seeds = [model_seeds(0, "s", 0, j) for j in range(2)]

    def model_fn():
        return build_for_data({"name": "mlp", "hidden": [8]}, (1, 8, 8), 10)

    mass = data_gradient_mass(model_fn, x, y, 0.5, seeds, budget=5000)  # several chunks
    want = np.zeros_like(mass)
    for s in seeds:
        torch.manual_seed(s.init)
        net = model_fn()
        for i in range(len(y)):
            net.zero_grad()
            F.cross_entropy(net(torch.from_numpy(x[i : i + 1])), torch.tensor([y[i]])).backward()
            g = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
            want += (g.abs() * min(1.0, 0.5 / (float(g.norm()) + 1e-6))).numpy()
    want /= len(seeds) * len(y)
    np.testing.assert_allclose(mass, want, rtol=1e-4, atol=1e-8)
    first_layer = mass[: 8 * 64].reshape(8, 64)  # Linear(64, 8) weight, (out, in)
    assert (first_layer[:, 0] == 0).all() and (mass > 0).sum() > mass.size // 2


def test_clip_factor_is_opacus_per_sample_factor_and_the_engines_use_it():
    """Issue 38: one owner for the clip factor. ``clip_factor`` is Opacus's ``min(1, C / (norm +
    1e-6))``; the engines' factors (``clip_factors``, the stacked engine) and the canaries'
    clipping are exactly it."""
    import torch

    from dpaudit.canaries import gradient_space as gs
    from dpaudit.training.engines import clip_factors

    norms = torch.tensor([0.0, 0.5, 1.0, 2.0, 1e6], dtype=torch.float64)
    expected = [1.0, 1.0, 1.0 / (1.0 + 1e-6), 1.0 / (2.0 + 1e-6), 1.0 / (1e6 + 1e-6)]
    assert gs.clip_factor(norms, 1.0).tolist() == expected
    grads = {"w": torch.randn(2, 5, 3, 4), "b": torch.randn(2, 5, 3)}
    sq = grads["w"].reshape(2, 5, -1).pow(2).sum(-1) + grads["b"].pow(2).sum(-1)
    assert torch.equal(clip_factors(grads, 0.3), gs.clip_factor(sq.sqrt(), 0.3))
    rows = torch.randn(4, 6) * 5
    clipped = gs.clip_rows(rows, max_grad_norm=0.3)
    assert torch.equal(clipped, rows * gs.clip_factor(rows.norm(dim=1, keepdim=True), 0.3))
    assert (clipped.norm(dim=1) <= 0.3).all()


def test_gradient_mass_has_one_owner_and_both_callers_keep_their_numbers():
    """Issue 38, item "one owner for the gradient mass": the trainer's ``low_gradient``
    placement (``training.dirac_placement.data_gradient_mass``, float32 per-example gradients
    of the shard's models) and ``attach.low_gradient_coordinates`` (float64 gradients of one
    plain model) both sum through ``canaries.gradient_space.gradient_mass``. On a fixed input
    the trainer's mass is bit for bit what it was before (a SHA-256 of its bytes, recorded
    before the change), the attach placement picks the same coordinates, and its mass agrees
    with the mean of the clipped float64 gradients to float64 rounding (the shared einsum
    fuses multiply and add)."""
    import hashlib

    import torch
    from torch import nn

    from dpaudit.attach import placement
    from dpaudit.canaries.gradient_space import gradient_mass
    from dpaudit.models import build_for_data
    from dpaudit.training.dirac_placement import data_gradient_mass
    from dpaudit.training.vectorized import model_seeds

    def sha(a: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()

    rng = np.random.default_rng(3)
    x = rng.random((40, 12)).astype(np.float32)
    x[:, :2] = 0.0
    y = rng.integers(0, 4, size=40)
    seeds = [model_seeds(0, "pin", 0, j) for j in range(2)]

    def model_fn():
        return build_for_data({"name": "mlp", "hidden": [8]}, (12,), 4)

    mass = data_gradient_mass(model_fn, x, y, 0.5, seeds, budget=3000)  # several chunks
    assert mass.dtype == np.float64 and mass.shape == (140,)
    assert sha(mass) == "5f20854c684b8fc7cb029b05894fafe1e8f536ca16eb667055414bb928641774"

    torch.manual_seed(5)
    net = nn.Sequential(nn.Linear(12, 6), nn.Tanh(), nn.Linear(6, 4))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    batches = [(xt[i : i + 16], yt[i : i + 16]) for i in range(0, 40, 16)]
    coords = placement.low_gradient_coordinates(net, batches, 10, 0.5, seed=1)
    assert sha(coords) == "b6344ea455dc7f997ffa0932875975b6badf29214e66c9e2cf95451855916a93"
    got = gradient_mass(placement._clipped_gradients(net, batches, 0.5))
    want = np.zeros_like(got)
    for xb, yb in batches:
        for i in range(len(yb)):
            net.zero_grad()
            torch.nn.functional.cross_entropy(net(xb[i : i + 1]), yb[i : i + 1]).backward()
            g = torch.cat([p.grad.reshape(-1) for p in net.parameters()]).double()
            want += (g.abs() * min(1.0, 0.5 / (float(g.norm()) + 1e-6))).numpy()
    np.testing.assert_allclose(got, want / len(yt), rtol=1e-5, atol=1e-9)  # float32 gradients
    before = sum((f[0][:, None] * g[0].abs()).sum(0) for g, f in placement._clipped_gradients(
        net, batches, 0.5))  # the sum as attach.placement wrote it before
    np.testing.assert_allclose(got, (before / len(yt)).numpy(), rtol=1e-14, atol=0)
    assert gradient_mass(iter([])) is None
    with pytest.raises(ValueError, match="no records in the batches"):
        placement.low_gradient_coordinates(net, [(xt[:0], yt[:0])], 3, 0.5)
