"""dpaudit.attach.CanaryDataset: the canaries it adds, an Opacus loop on it, scores, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from dpaudit.attach import CanaryDataset
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402

warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")


def _data(n: int = 200, classes: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(n, 5, generator=g), torch.randint(0, classes, (n,), generator=g)
    )


def test_mislabeled_canaries_are_held_out_records_with_other_labels() -> None:
    base = _data()
    ds = CanaryDataset(base, m=40, kind="mislabeled", seed=1)
    n_in = int(ds.canaries.membership.sum())
    assert len(ds) == 200 - 40 + n_in  # the 40 records leave training; the IN ones return
    rows = {tuple(base[i][0].tolist()): int(base[i][1]) for i in range(200)}
    kept = {tuple(ds[i][0].tolist()) for i in range(len(ds) - n_in)}
    canary_rows = [tuple(np.asarray(x, dtype=np.float32).tolist()) for x in ds.canaries.x]
    assert not kept & set(canary_rows)  # no canary record is trained on as itself
    for j, row in enumerate(canary_rows):
        assert rows[row] != int(ds.canaries.y[j])  # each label changed
    x, y = ds[len(ds) - 1]  # the last IN canary, typed like the dataset's items
    j = ds.in_ids[-1]
    assert torch.equal(x, torch.as_tensor(ds.canaries.x[j])) and y.dtype == torch.int64
    assert int(y) == ds.canaries.y[j]
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_pool_keeps_the_training_set_and_random_inputs() -> None:
    base, pool = _data(), _data(50)
    ds = CanaryDataset(base, m=30, kind="in_distribution", seed=0, pool=pool)
    assert len(ds) == 200 + int(ds.canaries.membership.sum())
    rnd = CanaryDataset(base, m=30, kind="random_input", seed=0)
    assert rnd.canaries.x.shape == (30, 5) and rnd.canaries.n_classes == 4


def test_opacus_loop_on_the_wrapped_dataset_scores_and_audits() -> None:
    torch.manual_seed(0)
    ds = CanaryDataset(_data(), m=50, kind="mislabeled", seed=0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=DataLoader(ds, batch_size=32),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    for _ in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    s = ds.score(model)
    want = -nn.functional.cross_entropy(
        model(torch.as_tensor(ds.canaries.x)).double(),
        torch.as_tensor(ds.canaries.y),
        reduction="none",
    )
    np.testing.assert_allclose(s, want.detach().numpy(), rtol=1e-6)
    res = ds.audit(engine.get_epsilon(1e-5), delta=1e-5, accountant="rdp")
    assert res.score_file.meta["threat_model"] == "black_box_loss"
    assert res.score_file.meta["canary_type"] == "mislabeled"
    assert res.verdict["claimed_epsilon"].iloc[0] == pytest.approx(engine.get_epsilon(1e-5))


class _Unlabelled(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros(3)


@pytest.mark.parametrize("kind", ["mislabeled", "in_distribution", "random_input"])
def test_dataset_without_labels_is_a_clear_error(kind) -> None:
    with pytest.raises(
        ValueError, match=f"dataset item 0 is not an .input, integer label. pair.*{kind} canaries"
    ):
        CanaryDataset(_Unlabelled(), m=2, kind=kind)


def test_other_bad_inputs() -> None:
    with pytest.raises(
        ValueError, match="300 mislabeled canaries need 300 records; the dataset has 200"
    ):
        CanaryDataset(_data(), m=300)
    with pytest.raises(ValueError, match="score the canaries first"):
        CanaryDataset(_data(), m=10).audit(1.0, delta=1e-5)
    with pytest.raises(ValueError, match="canary kind must be one of"):
        CanaryDataset(_data(), m=10, kind="backdoor")
    ds = CanaryDataset(_data(), m=10)
    with pytest.raises(ValueError, match="score of canary 3 is nan"):
        ds.audit(1.0, delta=1e-5, scores=np.r_[np.zeros(3), np.nan, np.zeros(6)])
