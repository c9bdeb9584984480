"""The normalisation check (dpaudit.attach.normalisation_checks, issue 37 item 2: normalisation as
a stage of the data path): an update divided by a function of the private dataset size that
differs at a neighbouring dataset departs, measured from the user's own Opacus objects."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpaudit.attach
from dpaudit.attach import GradientCanaries
from dpaudit.attach.conformance import UNSEEN_TEXT
from dpaudit.attach.normalisation_checks import (
    Normalisation,
    normalisation_check,
    opacus_divisor,
)
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402


def test_opacus_divisor_is_make_privates_floor() -> None:
    assert opacus_divisor(1400, 0.25) == 350 and opacus_divisor(1399, 0.25) == 349
    assert opacus_divisor(40, 0.25) == 10 and opacus_divisor(39, 0.25) == 9
    assert {opacus_divisor(n, 0.25) for n in (1437, 1438, 1439)} == {359}


@pytest.mark.parametrize(
    "n, q, fewer, more",
    [(1400, 0.25, 349, 350), (40, 0.25, 9, 10), (1403, 0.25, 350, 351)],
)
def test_a_floor_that_jumps_at_a_neighbour_departs(n, q, fewer, more) -> None:
    """Issue 37, Done when: the catalogue's Opacus #819 (1,400 records) and #571 (40 records)
    depart, and so does a floor that jumps only with one record *more* (1,403 records)."""
    check = normalisation_check(Normalisation("mean", float(int(n * q)), n, q, None))
    assert check.departs and check.stage == "normalisation"
    assert check.level == 0.0 and check.anytime and check.first_flagged_step == 1
    assert f"would be by {fewer} with one record fewer and by {more} with one more" in (
        check.measured
    )
    assert "reveals the dataset size" in check.note and "#819" in check.note


def test_a_floor_that_neighbours_share_conforms() -> None:
    """The catalogue's correct scripts: 1,438 records at q = 1/4, int(n q) = 359 for 1,437,
    1,438 and 1,439 records."""
    check = normalisation_check(Normalisation("mean", 359.0, 1438, 0.25, (359.0, 359.0), 40))
    assert not check.departs and check.note == ""
    assert "divisor applied 359 in 40 noisy steps" in check.measured


def test_sum_reduction_and_a_constant_of_the_users_conform_with_what_is_seen() -> None:
    summed = normalisation_check(Normalisation("sum", None, 1400, 0.25, (1.0, 1.0), 3))
    assert not summed.departs and "not divided" in summed.measured
    own = normalisation_check(Normalisation("mean", 256.0, 1400, 0.25, None))
    assert not own.departs
    assert "not make_private's int(n q) = 350" in own.measured
    assert "whether it depends on n is not visible" in own.measured


def test_a_divisor_applied_other_than_expected_batch_size_is_noted() -> None:
    check = normalisation_check(Normalisation("mean", 359.0, 1438, 0.25, (718.0, 718.0), 5))
    assert "not expected_batch_size = 359" in check.note


def _opacus(n: int, batch: int, steps: int = 6, **attach):
    """An Opacus training of ``steps`` noisy steps on ``n`` random records in batches of
    ``batch`` (Poisson), audited as the README says."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(n, 8, generator=gen), torch.randint(0, 3, (n,), generator=gen))
    model = nn.Linear(8, 3)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=DataLoader(data, batch_size=batch),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    if "sample_rate" not in attach:
        attach["data_loader"] = loader
    aud = dpaudit.attach.opacus(opt, m=8, seed=0, **attach)
    done = 0
    while done < steps:
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            done += 1
            if done == steps:
                break
    return aud, opt, aud.audit(engine.get_epsilon(1e-5), delta=1e-5, accountant="rdp")


def test_opacus_on_a_dataset_whose_floor_jumps_departs_at_normalisation() -> None:
    """Issue 37, Done when (Opacus #571): 40 records in batches of 10, make_private's divisor
    int(40 / 4) = 10 is 9 with one record fewer; measured from the optimizer and the loader,
    and the divisor really applied in every step. Fails without the normalisation check."""
    aud, opt, res = _opacus(40, 10)
    rep = res.conformance
    assert rep.departing_stages == ["normalisation"], str(rep)
    norm = aud._normalisation_measured()
    assert norm.n_records == 40 and norm.expected_batch_size == 10.0
    assert norm.applied == pytest.approx((10.0, 10.0)) and norm.applied_steps == 6
    text = str(res)
    assert "int(n q) = 10" in text and "by 9 with one record fewer" in text
    assert res.score_file.meta["conformance"]["departs"] == ["normalisation"]
    accounting = [c for c in rep.checks if c.stage == "accounting"][0]
    assert "reveals the dataset size" in accounting.note
    aud.detach()
    assert opt.scale_grad.__func__ is type(opt).scale_grad  # Opacus' own scale_grad again


def test_opacus_on_a_dataset_whose_floor_does_not_jump_conforms() -> None:
    """42 records in batches of 10 (q = 1/5): int(n q) = 8 for 41, 42 and 43 records."""
    _, _, res = _opacus(42, 10)
    rep = res.conformance
    assert "normalisation" in rep.seen and not rep.departs, str(rep)


def test_normalisation_is_unseen_without_the_loader_or_in_a_handwritten_loop() -> None:
    """The dataset size is the loader's: with ``sample_rate=`` only, or in a hand-written loop
    that divides after observe(), the stage is listed unseen, never passed."""
    _, _, res = _opacus(40, 10, steps=2, sample_rate=0.25)
    assert "normalisation" in res.conformance.unseen
    assert UNSEEN_TEXT["normalisation"] in str(res)
    c = GradientCanaries(16, 64, sample_rate=0.5, clip_norm=1.0, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3):
        c.draw_step()
        c.observe(rng.normal(size=64))
    rep = c.audit(delta=1e-5, accountant="rdp", noise_multiplier=1.0).conformance
    assert "normalisation" in rep.unseen and "normalisation" not in rep.seen
