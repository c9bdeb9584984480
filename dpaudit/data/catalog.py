"""The dataset catalog: one entry per dataset name, the one owner of its facts.

Each :class:`DatasetEntry` says where the records come from, how they are split, what a
prepared example looks like (shape, classes), which checksum guards the download and which
module loads it. Config validation (:mod:`dpaudit.config`: allowed keys, sizes, the model's
input shape), preparation (:mod:`dpaudit.data.prepare`) and the loaders
(:mod:`dpaudit.data.vision`, :mod:`dpaudit.data.tabular`, :mod:`dpaudit.data.bundled`) read
it; the schema's ``dataset.name`` enum lists the same names (tested). Adding a dataset is an
entry here, its loader, and the name in ``dpaudit/schema.yaml``.

The entry imports nothing heavy (no torch, no torchvision): validation reads it without
preparing any data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_COMMON_KEYS = frozenset({"n_train", "n_test", "canary_pool"})
_REAL_KEYS = _COMMON_KEYS | {"classes"}
#: Dataset keys (besides ``name`` and ``seed``) each kind of dataset takes.
KIND_KEYS: dict[str, frozenset[str]] = {
    "synthetic": _COMMON_KEYS | {"n_features", "n_classes", "separation"},
    "vision": _REAL_KEYS | {"normalize", "checksums"},
    # tables and the bundled digits are split by test_fraction and checked by sha256
    "tabular": _REAL_KEYS | {"test_fraction", "sha256"},
    "bundled": _REAL_KEYS | {"test_fraction", "sha256"},
}
#: Fraction of a split-by-rows dataset's rows in its test split when ``test_fraction`` is null.
DEFAULT_TEST_FRACTION = 0.2
#: Training records, features and classes of the synthetic data when the dataset block leaves
#: them null (:func:`dpaudit.data.synthetic.make_synthetic`'s defaults; tested).
SYNTHETIC_N_TRAIN, SYNTHETIC_FEATURES, SYNTHETIC_CLASSES = 2000, 20, 10

_PRIVACYTRUSTLAB = "https://github.com/privacytrustlab/datasets/raw/master"


@dataclass(frozen=True)
class DatasetEntry:
    """The facts of one dataset.

    ``kind``: ``synthetic``, ``vision`` (torchvision's class ``torchvision_class`` parses the
    files), ``tabular`` (a Shokri et al. 2017 table archive at ``urls``) or ``bundled`` (shipped
    inside an installed package). ``splits``: (training, test) records of the source's own
    splits; ``rows``: the records of a source that is split by ``test_fraction`` instead.
    ``shape``: one prepared example's shape (None: synthetic, ``(n_features,)``); ``classes``:
    the labels before any class filter. ``sha256``: the pinned checksum (None: not pinned; the
    vision files' MD5s are torchvision's, read at call time); ``checksum_key``: the dataset key
    that overrides it, ``checksum_required`` when nothing is pinned. ``loader``: the function
    that returns the raw records."""

    name: str
    kind: str
    source: str
    loader: str
    shape: tuple[int, ...] | None = None
    classes: int | None = None
    splits: tuple[int, int] | None = None
    rows: int | None = None
    sha256: str | None = None
    checksum_key: str | None = None
    checksum_required: bool = False
    torchvision_class: str | None = None
    urls: tuple[str, ...] = ()
    filename: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KIND_KEYS:
            raise ValueError(
                f"dataset {self.name!r}: kind {self.kind!r}; allowed: {list(KIND_KEYS)}"
            )
        if self.kind != "synthetic" and (self.shape is None or self.classes is None):
            raise ValueError(f"dataset {self.name!r}: a real dataset needs its shape and classes")
        if self.kind != "synthetic" and (self.splits is None) == (self.rows is None):
            raise ValueError(f"dataset {self.name!r}: give its source splits or its rows")

    @property
    def keys(self) -> frozenset[str]:
        """Dataset keys (besides ``name`` and ``seed``) that apply to this dataset."""
        return KIND_KEYS[self.kind]


def _vision(name: str, tv: str, shape: tuple[int, ...], splits: tuple[int, int]) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        kind="vision",
        source=f"torchvision.datasets.{tv} (files fetched by dpaudit.data.download)",
        loader="dpaudit.data.vision.load_vision",
        shape=shape,
        classes=10,
        splits=splits,
        checksum_key="checksums",
        torchvision_class=tv,
    )


def _shokri(
    name: str, title: str, features: int, classes: int, rows: int, *mirrors: str, **checksum: Any
) -> DatasetEntry:
    """A tabular set of Shokri et al. (2017) from privacytrustlab/datasets (``mirrors``: further
    URLs of the same file; ``checksum``: its ``sha256`` or ``checksum_required``)."""
    filename = f"dataset_{name}.tgz"
    return DatasetEntry(
        name=name,
        kind="tabular",
        source=f"{title} of Shokri et al. (2017), privacytrustlab/datasets",
        loader="dpaudit.data.tabular.load_tabular",
        shape=(features,),
        classes=classes,
        rows=rows,
        checksum_key="sha256",
        urls=(f"{_PRIVACYTRUSTLAB}/{filename}", *mirrors),
        filename=filename,
        **checksum,
    )


#: Every dataset, by the name the config's ``dataset.name`` takes.
CATALOG: dict[str, DatasetEntry] = {
    "synthetic": DatasetEntry(
        name="synthetic",
        kind="synthetic",
        source="generated from dataset.seed (dpaudit.data.synthetic)",
        loader="dpaudit.data.synthetic.make_synthetic",
    ),
    "mnist": _vision("mnist", "MNIST", (1, 28, 28), (60000, 10000)),
    "fashionmnist": _vision("fashionmnist", "FashionMNIST", (1, 28, 28), (60000, 10000)),
    "cifar10": _vision("cifar10", "CIFAR10", (3, 32, 32), (50000, 10000)),
    "svhn": _vision("svhn", "SVHN", (3, 32, 32), (73257, 26032)),
    "location": _shokri(
        "location",
        "Location-30",
        446,
        30,
        5010,
        sha256="927203f85a868f8ee17a0ded1dc61699efe602167beabe34fbf45b4b1de94b33",
    ),
    "purchase": _shokri(
        "purchase",
        "Purchase-100",
        600,
        100,
        197324,
        "https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
        checksum_required=True,
    ),
    "digits": DatasetEntry(
        name="digits",
        kind="bundled",
        source="scikit-learn's bundled UCI handwritten digits (Alpaydin and Kaynak 1998)",
        loader="dpaudit.data.bundled.load_digits",
        shape=(1, 8, 8),
        classes=10,
        rows=1797,
        # SHA-256 of images.astype(uint8).tobytes() + target.astype(int64).tobytes()
        # (scikit-learn 1.9.1; the bundled file has not changed since scikit-learn 0.x)
        sha256="65e5b4619795efb40c1082f4c350c049e4ad552200d369b6ae99e21eef5e72c5",
        checksum_key="sha256",
    ),
}
#: Every dataset name, in the schema's order.
DATASET_NAMES: tuple[str, ...] = tuple(CATALOG)


def entry(name: str) -> DatasetEntry:
    """The catalog entry of dataset ``name``; an unknown name raises ``ValueError`` listing
    the known ones."""
    if name not in CATALOG:
        raise ValueError(f"unknown data set {name!r}; known: {list(CATALOG)}")
    return CATALOG[name]


def of_kind(kind: str) -> dict[str, DatasetEntry]:
    """The entries of one kind (``vision``, ``tabular``, ...), by name."""
    return {n: e for n, e in CATALOG.items() if e.kind == kind}


def source_split_sizes(name: str, dataset: Mapping[str, Any]) -> tuple[int, int] | None:
    """(training, test) records a real data set's source splits hold before any class filter
    (None for synthetic data); a dataset split by rows puts ``test_fraction`` of them (default
    :data:`DEFAULT_TEST_FRACTION`) in the test split, as :mod:`dpaudit.data.prepare` does."""
    e = entry(name)
    if e.splits is not None:
        return e.splits
    if e.rows is not None:
        frac = dataset.get("test_fraction")
        n_test = int(round((DEFAULT_TEST_FRACTION if frac is None else float(frac)) * e.rows))
        return e.rows - n_test, n_test
    return None


def known_n_train(dataset: Mapping[str, Any]) -> int | None:
    """Training records of a dataset block as far as they are known before any data is
    prepared: ``n_train``, or the synthetic data's default (:data:`SYNTHETIC_N_TRAIN`) when it
    is null; None for a real dataset with ``n_train`` null (all of its training split, whose
    size after a class filter is known only once it is prepared)."""
    n_train = dataset.get("n_train")
    if n_train is None and entry(dataset.get("name", "synthetic")).kind == "synthetic":
        return SYNTHETIC_N_TRAIN
    return None if n_train is None else int(n_train)


def data_shape(dataset: Mapping[str, Any]) -> tuple[tuple[int, ...], int]:
    """(example shape, number of classes) of a dataset block, as the prepared data will have
    them (``dataset.classes`` keeps that many classes), without preparing any data."""
    e = entry(dataset.get("name", "synthetic"))
    if e.kind == "synthetic":
        shape = (int(dataset.get("n_features") or SYNTHETIC_FEATURES),)
        k = int(dataset.get("n_classes") or SYNTHETIC_CLASSES)
    else:
        shape, k = e.shape, e.classes  # type: ignore[assignment]
    if dataset.get("classes"):
        k = len(dataset["classes"])
    return shape, k
