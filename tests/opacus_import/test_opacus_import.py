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
