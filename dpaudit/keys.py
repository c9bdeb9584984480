"""Score-file metadata keys and audit / verdict table column names: one owner for each name.

A score file's metadata (:mod:`dpaudit.scores`) and the audit and verdict tables
(:mod:`dpaudit.audit`, :mod:`dpaudit.tables`) share their names: the claimed epsilon of a run is
``claimed_epsilon`` in the file and in the tables. The names are written here once and imported
wherever a key is read or written, so a rename is one line and a misspelt key is an
``ImportError`` / ``NameError`` rather than a silently missing column. The strings are part of
the file and table formats (read by NumPy and pandas alone, without dpaudit): they do not
change. The config schema's property names (``dpaudit/schema.yaml``) are the config's own, not
these.

This module imports nothing, so every layer may import it.
"""

from __future__ import annotations

# ---- score-file metadata (dpaudit.scores.REQUIRED_META, and optional keys) ------------------

#: The score-file format version (its value: :data:`dpaudit.scores.FORMAT_VERSION`).
FORMAT_VERSION_KEY = "format_version"
#: The epsilon claimed by the accountant; ``null`` for a run without a guarantee. Also the
#: audit- and verdict-table column of the claim.
CLAIMED_EPSILON = "claimed_epsilon"
#: The on-disk dtype of the scores (:data:`dpaudit.scores.SCORE_DTYPES`).
SCORE_DTYPE = "score_dtype"
#: The inclusion law of the canaries (:data:`dpaudit.scores.INCLUSION_KEY`).
INCLUSION_KEY = "inclusion_probability"

# ---- audit-table columns ----------------------------------------------------------------------

#: Columns every audit table starts with, in this order (:mod:`dpaudit.audit`).
ID_COLUMNS = [
    "experiment",
    "setting",
    "seed",
    "design",
    "threat_model",
    CLAIMED_EPSILON,
    "delta",
    "accountant",
    "estimator",
    "method",
    "params",
]

#: The p-value of the IN count under the file's inclusion law (:func:`dpaudit.audit.audit`).
MEMBERSHIP_PVALUE = "membership_pvalue"

#: The conformance report of an audited training (:data:`CONFORMANCE_COLUMNS`).
CONFORMANCE_DEPARTS = "conformance_departs"
CONFORMANCE_UNSEEN = "conformance_unseen"
CONFORMANCE_ALPHA = "conformance_alpha"
CONFORMANCE_FIRST_STEP = "conformance_first_step"
#: The measured mechanism's epsilon (estimate, and at the rate's lower confidence bound).
MEASURED_EPSILON = "measured_epsilon"
MEASURED_EPSILON_LOWER = "measured_epsilon_lower"

#: The audit-table columns of a score file's conformance report, beside the bound (written by
#: :func:`dpaudit.audit.conformance_columns`).
CONFORMANCE_COLUMNS = (
    CONFORMANCE_DEPARTS,
    CONFORMANCE_UNSEEN,
    CONFORMANCE_ALPHA,
    CONFORMANCE_FIRST_STEP,
    MEASURED_EPSILON,
    MEASURED_EPSILON_LOWER,
)

# ---- verdict-table columns --------------------------------------------------------------------

#: The best valid lower bound of a verdict (:mod:`dpaudit.attach.claim`).
EPSILON_LOWER_BOUND = "epsilon_lower_bound"
