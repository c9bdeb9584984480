"""A pytest fixture that runs the conformance checks in the user's own tests (issue 37, item 6).

Enable it in a test module (or the project's root ``conftest.py``) with::

    pytest_plugins = ["dpaudit.attach.testing"]

then, in a test that builds the training and runs a few of its steps::

    def test_my_training(dpaudit_conformance):
        auditor = dpaudit_conformance.opacus(optimizer, data_loader=loader)
        ...  # a few steps of the training
        dpaudit_conformance.check(auditor, engine.get_epsilon(1e-5), delta=1e-5)

``check`` raises :class:`~dpaudit.attach.ConformanceError` with the report on a departure
(:func:`dpaudit.attach.ci.check_conformance`); the auditors attached through the fixture are
detached when the test ends. ``examples/test_my_training.py`` is such a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dpaudit.attach.ci import check_conformance
from dpaudit.attach.conformance import ConformanceReport


class ConformanceHelper:
    """What the :func:`dpaudit_conformance` fixture yields: :meth:`opacus` attaches an auditor
    (detached at the test's end), :meth:`check` audits it and raises on a departure."""

    def __init__(self) -> None:
        self.attached: list[Any] = []

    def opacus(self, optimizer: Any, **kwargs: Any) -> Any:
        """:func:`dpaudit.attach.opacus` (same arguments; ``m`` defaults to 100, plenty for the
        conformance checks of a few steps), detached when the test ends."""
        from dpaudit.attach.opacus_adapter import opacus

        kwargs.setdefault("m", 100)
        auditor = opacus(optimizer, **kwargs)
        self.attached.append(auditor)
        return auditor

    def check(
        self, auditor: Any, claimed_epsilon: float | None = None, **kwargs: Any
    ) -> ConformanceReport:
        """:func:`dpaudit.attach.ci.check_conformance` (same arguments)."""
        return check_conformance(auditor, claimed_epsilon, **kwargs)

    def close(self) -> None:
        """Detach the auditors this helper attached and has not detached yet."""
        for auditor in self.attached:
            if getattr(auditor.optimizer, "_dpaudit_auditor", None) is auditor:
                auditor.detach()
        self.attached.clear()


@pytest.fixture
def dpaudit_conformance() -> Iterator[ConformanceHelper]:
    """The conformance checks in a test (:class:`ConformanceHelper`)."""
    helper = ConformanceHelper()
    yield helper
    helper.close()
