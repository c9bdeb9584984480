"""Importing Opacus through dpaudit leaves the root logger alone (dpaudit.opacus_import)."""

import subprocess
import sys

import pytest

_SCRIPT = """
import logging
before = len(logging.getLogger().handlers)
{body}
print(before, len(logging.getLogger().handlers))
"""


def _handlers(body: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after = out.stdout.split()
    return int(before), int(after)


@pytest.mark.slow
def test_plain_opacus_import_adds_a_root_handler():
    # The behaviour the wrapper exists for (Opacus 1.4-1.6 call logging.basicConfig at import).
    assert _handlers("import opacus") == (0, 1)


@pytest.mark.slow
def test_accountant_through_dpaudit_adds_no_root_handler():
    body = (
        "from dpaudit.accounting.dpsgd import epsilon_rdp\n"
        "assert epsilon_rdp(1.0, 0.01, 10, 1e-5) > 0\n"
        "import opacus.utils.module_utils"
    )
    assert _handlers(body) == (0, 0)


class _BrokenTorchvision:
    """A meta-path finder whose torchvision fails to import as one built for another torch
    does (torchvision/_meta_registrations.py registers a kernel torch does not have)."""

    def find_spec(self, name, path=None, target=None):
        import importlib.util

        if name != "torchvision":
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise RuntimeError("operator torchvision::nms does not exist")


def test_issue36_item12_torch_torchvision_mismatch_is_one_line_naming_both(monkeypatch):
    """Issue 36, item 12: a torchvision built for another torch stops at dpaudit's first import
    of torchvision with one line naming both versions and the fix, not a deep RuntimeError."""
    from importlib import metadata

    from dpaudit.data import vision
    from dpaudit.opacus_import import TORCH_PAIR_FIX, import_torchvision

    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_BrokenTorchvision(), *sys.meta_path])
    with pytest.raises(ImportError) as caught:
        import_torchvision()
    message = str(caught.value)
    assert "\n" not in message
    assert f"torchvision {metadata.version('torchvision')}" in message
    assert f"torch {metadata.version('torch')}" in message
    assert "torchvision::nms" in message and TORCH_PAIR_FIX in message
    # the library's own torchvision users go through it
    with pytest.raises(ImportError, match="cannot be imported beside torch"):
        vision.vision_resources("mnist")


def test_torchvision_imports_when_it_matches():
    from dpaudit.opacus_import import import_torchvision

    assert hasattr(import_torchvision(), "datasets")
