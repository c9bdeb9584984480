"""Display names: what a reader sees in place of the config's internal names.

Every estimator block, selection rule, canary type, threat model, sampler and setting value has
a human label. A config may set its own (an estimator block's ``label``, an experiment's
``figure.labels``); otherwise these functions make one from the method and its parameters. The
names follow the papers: the one-run audit of Steinke, Nasr and Jagielski (2023,
arXiv:2305.08846), the tight f-DP one-run audit of Xiang et al. (2025), LiDP with XBern
intervals of Pillutla et al. (2023, arXiv:2305.18447; K = 1 is their "DP" baseline, Fig. 3),
the Clopper-Pearson audit of Annamalai et al. (Eq. 1) and the GDP fit of Nasr et al. (2023).
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any

from dpaudit.estimators.registry import block_assumes
from dpaudit.keys import CLAIMED_EPSILON

#: Estimator methods (``estimators.registry.METHODS``) -> display name.
METHOD_LABELS = {
    "one_run": "One run (Steinke et al.)",
    "fdp_one_run": "Tight f-DP (Xiang et al.)",
    "fdp_abstention": "f-DP in one run (Mahloujifar et al.)",
    "lidp": "LiDP",
    "multi_run_cp": "Clopper-Pearson",
    "gdp_fit": "GDP fit (estimate)",
    "attack_metrics": "Raw counts (estimate)",
}

#: Selection rules of the estimators (the audit table's ``selection`` column).
SELECTION_LABELS = {
    "fixed": "fixed guesses",
    "grid_max_uncorrected": "best of grid",
    "bonferroni": "Bonferroni",
    "sample_split": "sample split",
    "same_data": "threshold on the same runs",
    "heldout": "held-out threshold",
    "in_sample": "in-sample threshold",
}

#: Threat models (train experiments, and the simulated BGM's adversaries).
THREAT_MODEL_LABELS = {
    "black_box_loss": "black box (loss)",
    "black_box_logit": "black box (logit)",
    "white_box_dot": "white box (all iterates)",
    "final_model_cosine": "final model (cosine)",
    "per_step_dot": "per-step observations",
    "worst_case": "worst case",
    "natural": "natural",
    "partially_informed": "partially informed",
    "bgm_worst_case": "worst case",
    "bgm_natural": "natural",
    "bgm_partially_informed": "partially informed",
}

#: Canary types (``canaries.type``).
CANARY_LABELS = {
    "random_input": "random inputs",
    "mislabeled": "mislabelled records",
    "in_distribution": "in-distribution records",
    "clipbkd": "ClipBKD",
    "dirac": "Dirac gradients",
    "random_gradient": "random gradients",
}

#: Batch samplers (``train.sampler``).
SAMPLER_LABELS = {
    "poisson": "Poisson",
    "shuffle": "shuffle",
    "partial_shuffle": "partial shuffle",
    "batch_then_shuffle": "batch, then shuffle",
    "no_shuffle": "no shuffling",
}

#: Designs (score-file ``design``).
DESIGN_LABELS = {"one_run": "one run", "lidp": "LiDP", "multi_run": "multi run"}

#: Column -> {value -> label} for every column whose values have names of their own.
VALUE_LABELS: dict[str, dict[str, str]] = {
    "selection": SELECTION_LABELS,
    "threat_model": THREAT_MODEL_LABELS,
    "canary_type": CANARY_LABELS,
    "type": CANARY_LABELS,
    "sampler": SAMPLER_LABELS,
    "design": DESIGN_LABELS,
    "method": METHOD_LABELS,
    # Pillutla et al. (2023), Fig. 3: K = 1 is the DP baseline, K = sqrt(n) their LiDP audit.
    "K": {"1": "DP baseline (K = 1)", "sqrt_n": "K = √n"},
    # Xiang, Wang, Wang (2024, arXiv:2402.13087), Section 4: the threat models of the tuning
    # audit and its two selection statistics
    "setup": {"ntnv": "NTNV", "ntcv": "NTCV", "etcv": "ETCV (X empty)"},
    "statistic": {"lambda_a": "λ_a", "lambda_b": "λ_b"},
}

#: Columns -> axis label (units in words; epsilon is dimensionless).
COLUMN_LABELS = {
    "epsilon": "ε lower bound",
    CLAIMED_EPSILON: "claimed ε (accountant)",
    "target_epsilon": "target ε (accountant)",
    "m": "canaries m",
    "k": "inserted canaries per model k",
    "K": "canaries per trial K",
    "n": "trials n",
    "n_train": "training records n",
    "steps": "DP-SGD steps",
    "epochs": "epochs",
    "batch_size": "batch size",
    "noise_multiplier": "noise multiplier σ",
    "sigma": "noise multiplier σ",
    "runs_per_hypothesis": "runs per hypothesis",
    "epsilon_B": "base budget ε_B",
    "test_accuracy": "test accuracy",
    "delta": "δ",
}

#: Short symbols of columns whose values appear as "symbol = value" in legends.
COLUMN_SYMBOLS = {
    "target_epsilon": "ε",
    CLAIMED_EPSILON: "claimed ε",
    "noise_multiplier": "σ",
    "sigma": "σ",
    "epsilon_B": "ε_B",
    "n_train": "n",
    "runs_per_hypothesis": "runs",
}

#: Data sets and models of train experiments (``dataset.name``, ``model.name``) -> display name,
#: for :func:`experiment_label`.
DATASET_LABELS = {
    "digits": "digits",
    "location": "Location-30",
    "purchase": "Purchase-100",
    "fashionmnist": "FMNIST",
    "cifar10": "CIFAR-10",
    "synthetic": "synthetic",
}
MODEL_LABELS = {"logreg": "linear", "mlp": "MLP", "cnn": "CNN", "lenet": "LeNet", "wrn": "WRN"}
#: Canary types as an experiment's name says them: LiDP's two kinds (Pillutla et al. 2023,
#: arXiv:2305.18447, Sec. 5: "data poisoning" (ClipBKD) and "random gradient" canaries; the
#: ``canary`` column of its Table 1); other types by :data:`CANARY_LABELS`.
EXPERIMENT_CANARY_LABELS = {"clipbkd": "poisoning", "random_gradient": "random gradient"}

#: Spelled-out symbols of a config's axis label -> the symbol (:func:`symbols`).
GREEK = {
    "epsilon": "ε",
    "eps": "ε",
    "delta": "δ",
    "sigma": "σ",
    "mu": "μ",
    "lambda": "λ",
}
_GREEK = re.compile(r"\b(" + "|".join(sorted(GREEK, key=len, reverse=True)) + r")(?![A-Za-z])")

#: What a label must not look like: an internal identifier (words joined by underscores).
INTERNAL_NAME = re.compile(r"[A-Za-z0-9]+_[A-Za-z0-9_]+")

_ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}
_INTERVALS = {"wilson": "Wilson", "bernstein": "Bernstein", "clopper_pearson": "Clopper-Pearson"}
_FDP_FAMILIES = {"approx_dp": "(ε, δ) null"}  # the others are named by what they assume

#: What an estimator block's bounds assume (``dpaudit.estimators.registry.ASSUMPTIONS``), as
#: the end of its display name ("..., assumes GDP"): figures label every such line.
ASSUMES_LABELS = {
    "gdp": "GDP",
    "laplace": "Laplace",
    "subsampled_gaussian": "subsampled Gaussian",
    "subsampled_gaussian_steps": "DP-SGD curve",
    "approx_dp_delta>0": "independent δ-events",
}


def _ordinal(n: int) -> str:
    return _ORDINALS.get(n, f"{n}th")


def estimator_label(spec: Mapping[str, Any]) -> str:
    """The display name of an estimator block (``method`` plus its parameters): the block's
    own ``label`` if it has one, else made from the method and the parameters that tell
    blocks of one method apart (e.g. "LiDP, 2nd-order Wilson")."""
    if spec.get("label"):
        return str(spec["label"])
    method = spec["method"]
    base = METHOD_LABELS.get(method, method.replace("_", " "))
    parts = [base]
    if method == "lidp":
        interval = spec.get("interval", "wilson")
        name = _INTERVALS.get(interval, interval)
        order = spec.get("order")
        parts.append(f"{_ordinal(int(order))}-order {name}" if order else name)
        threshold = spec.get("threshold", "heldout")
        if isinstance(threshold, int | float) and not isinstance(threshold, bool):
            parts.append(f"threshold {threshold:g}")
    elif method in ("fdp_one_run", "fdp_abstention"):
        family = _FDP_FAMILIES.get(str(spec.get("family", "gdp")).replace("-", "_"), "")
        if family:
            parts.append(family)
        if spec.get("tail") == "exact":
            parts.append("exact tail")
        assumed = block_assumes(dict(spec))
        if assumed:
            parts.append(f"assumes {ASSUMES_LABELS.get(assumed, assumed)}")
    return ", ".join(parts)


def params_confidence(params: Any) -> float | None:
    """The ``confidence`` of an audit row's ``params`` (a JSON object, or a dict); None if the
    estimator states none."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return None
    if isinstance(params, Mapping) and params.get("confidence") is not None:
        return float(params["confidence"])
    return None


def confidence_text(confidence: float) -> str:
    """0.95 -> "95%"."""
    return f"{100 * confidence:.4g}%"


def _number(value: Any) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(x):
        return "∞"
    return f"{x:g}"


def value_label(
    column: str, value: Any, overrides: Mapping[str, Mapping[str, str]] | None = None
) -> str:
    """The display name of ``value`` in ``column`` (a series of a figure): the config's
    ``figure.labels[column][value]``, the library's name (selection rules, threat models, canary
    types, samplers, K), or "symbol = value" for numeric settings (m = 1000, ε = 4)."""
    text = str(value)
    if overrides and column in overrides and text in {str(k) for k in overrides[column]}:
        return str({str(k): v for k, v in overrides[column].items()}[text])
    if column in VALUE_LABELS and text in VALUE_LABELS[column]:
        return VALUE_LABELS[column][text]
    if column in ("series", "quantity", "reference"):
        return text
    if text in ("", "nan", "None"):
        return ""
    try:
        number = float(text)
    except ValueError:
        return text.replace("_", " ")
    if column == "order" and number.is_integer() and number > 0:  # an interval's order
        return f"{_ordinal(int(number))}-order interval"
    symbol = COLUMN_SYMBOLS.get(column, column.replace("_", " "))
    return f"{symbol} = {_number(text)}"


def symbols(text: str) -> str:
    """A config's axis label with its spelled-out symbols as symbols, as the library's labels
    write them: "base budget epsilon_B" -> "base budget ε_B", "noise sigma" -> "noise σ"
    (whole words only: "steps" and "multi" stay)."""
    return _GREEK.sub(lambda m: GREEK[m.group(1)], text)


#: Greek letters of the labels -> their mathtext commands (:func:`typeset`).
_MATH_GREEK = {"ε": r"\varepsilon", "δ": r"\delta", "λ": r"\lambda", "μ": r"\mu", "σ": r"\sigma"}
_SUBSCRIPT = re.compile(
    "(" + "|".join(_MATH_GREEK) + r")_(\{[^{}$]*\}|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)"
)


def typeset(text: str) -> str:
    r"""A label's subscripted symbols as matplotlib draws them: "ε_U-O" becomes the mathtext
    ``$\varepsilon_{\mathrm{U-O}}$`` (a plain "_" would be drawn as an underscore); text that
    holds mathtext already (a "$") is left as it is."""
    if "$" in text:
        return text

    def math(m: re.Match[str]) -> str:
        sub = m.group(2).strip("{}")
        return f"${_MATH_GREEK[m.group(1)]}_{{\\mathrm{{{sub}}}}}$"

    return _SUBSCRIPT.sub(math, text)


def experiment_label(block: Mapping[str, Any]) -> str:
    """The display name of a train experiment, for the figures of the analyses that gather
    several (a series column ``experiment``): data set, model and canary type, e.g. "digits
    linear, poisoning" (the naming of the LiDP Table 1 figure's cells); "" for anything else."""
    if block.get("kind") != "train":
        return ""
    dataset = str((block.get("dataset") or {}).get("name", ""))
    model = str((block.get("model") or {}).get("name", ""))
    canary = str((block.get("canaries") or {}).get("type", ""))
    head = " ".join(
        p for p in (DATASET_LABELS.get(dataset, dataset), MODEL_LABELS.get(model, model)) if p
    )
    kind = EXPERIMENT_CANARY_LABELS.get(canary) or CANARY_LABELS.get(canary, canary)
    return ", ".join(p for p in (head, kind.replace("_", " ")) if p)


def column_label(column: str) -> str:
    """An axis label for ``column`` (without the confidence level)."""
    return COLUMN_LABELS.get(column, column.replace("_", " "))


#: A title's last word that keeps its full stop (an abbreviation, not the end of a sentence).
_ABBREVIATIONS = ("al.", "etc.", "e.g.", "i.e.", "Fig.", "Figs.", "Sec.", "Eq.", "App.", "Alg.")


def short_title(description: str) -> str:
    """A title that fits a figure: the description up to its first colon (the rest belongs in
    the caption), or the whole description where that part is too short to say anything;
    without a closing full stop (a title is not a sentence), unless an abbreviation ends it."""
    head = description.split(": ", 1)[0].strip()
    text = head if len(head) >= 20 else description.strip()
    if text.endswith(".") and not text.endswith(_ABBREVIATIONS):
        text = text[:-1].rstrip()
    return text


def wrap_label(text: str, width: int = 34) -> str:
    """A legend label broken into lines of at most ``width`` characters, at spaces only ("1st-
    order" split at its hyphen reads as two words)."""
    if len(text) <= width:
        return text
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def internal_names(text: str) -> list[str]:
    """The internal identifiers (underscore-joined words) in ``text``; none in a good label."""
    return INTERNAL_NAME.findall(text)


#: Audit-table columns that get a display-name column beside them (``<column>_label``).
LABELLED_COLUMNS = ("selection", "threat_model", "design")


def add_label_columns(
    table: Any, estimator_labels: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> Any:
    """The audit table with human-readable columns beside the internal ones: ``estimator_label``
    (the block's ``label:`` or the library's name) and ``<column>_label`` for the selection
    rule, threat model and design; a table without a column gets no label column for it."""
    out = table.copy()
    if "estimator" in out.columns:
        names = out["estimator"].astype(str)
        out.insert(
            out.columns.get_loc("estimator") + 1,
            "estimator_label",
            names.map(lambda n: estimator_labels.get(n, n.replace("_", " "))),
        )
    for column in LABELLED_COLUMNS:
        if column in out.columns:
            labels = out[column].map(
                lambda v, c=column: value_label(c, v, overrides) if str(v) != "nan" else ""
            )
            out.insert(out.columns.get_loc(column) + 1, f"{column}_label", labels)
    return out
