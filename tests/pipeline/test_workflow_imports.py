"""What the workflow imports while it builds its DAG stays light.

Every Snakemake process reads the workflow and evaluates the input functions of its jobs; on a
cluster that is one process per job (the SLURM plugin's jobstep executor runs each job of a
group job as its own ``snakemake`` process), so a heavy import there is paid once per job. The
estimator registry is read for the names and designs of the methods (``applicable_estimators``)
and must not import an estimator family, which would pull in SciPy (seconds per process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from dpaudit import defaults
from dpaudit.estimators import METHODS
from dpaudit.pipeline.settings import applicable_estimators


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_reading_the_estimator_registry_imports_no_estimator_family_nor_scipy():
    loaded = _modules_after(
        "from dpaudit.pipeline.settings import applicable_estimators\n"
        "config = {'experiments': {'e': {'kind': 'train', 'design': 'one_run'}},\n"
        "          'estimators': {'o': {'method': 'one_run'}, 'l': {'method': 'lidp'}}}\n"
        "assert applicable_estimators(config, 'e') == ['o']"
    )
    assert "scipy" not in loaded
    assert not [m for m in loaded if m.endswith("_audit") and m.startswith("dpaudit.")]


def test_the_config_check_imports_no_torch_scipy_pandas_nor_matplotlib():
    """Every Snakemake process imports dpaudit.config (rules/common.smk) to fill in defaults:
    the cross-key checks that need those libraries import them inside their function."""
    loaded = _modules_after("import dpaudit.config")
    assert not {"torch", "scipy", "pandas", "matplotlib"} & loaded


def test_every_method_resolves_to_its_runner():
    for name, method in METHODS.items():
        assert callable(method.run), name
        assert method.run.__module__ == method.runner.partition(":")[0], name
        assert method.doc == (method.run.__doc__ or "").strip(), name
    config = {
        "experiments": {"e": {"kind": "train", "design": "multi_run"}},
        "estimators": {n: {"method": n} for n in METHODS},
    }
    # listing none runs the family-free blocks (not the GDP fit, which assumes a GDP curve)
    assert applicable_estimators(config, "e") == ["attack_metrics", "multi_run_cp"]
    config["experiments"]["e"]["estimators"] = sorted(METHODS)
    assert applicable_estimators(config, "e") == ["attack_metrics", "gdp_fit", "multi_run_cp"]


def test_the_schema_loader_reads_the_schema_as_the_pure_python_loader_does():
    text = (Path(__file__).resolve().parents[2] / "dpaudit" / "schema.yaml").read_text()
    assert defaults.load_schema() == yaml.load(text, Loader=yaml.SafeLoader)


def test_reading_labels_and_captions_imports_no_matplotlib():
    # the audit table's and figures' params read labels while the DAG is built, in every job's
    # own Snakemake process on a cluster
    loaded = _modules_after(
        "from dpaudit.plots.labels import estimator_label, short_title\n"
        "from dpaudit.plots import captions\n"
        "assert estimator_label({'method': 'one_run'})\n"
        "assert short_title('A title. More.')"
    )
    assert "matplotlib" not in loaded


def test_drawing_selects_the_agg_backend():
    # another backend asked for by the environment: pyplot() still draws with Agg
    loaded = _modules_after(
        "import os\n"
        "os.environ['MPLBACKEND'] = 'svg'\n"
        "from dpaudit.plots import pyplot\n"
        "plt = pyplot()\n"
        "assert plt.get_backend().lower() == 'agg', plt.get_backend()"
    )
    assert "matplotlib.pyplot" in loaded
