"""Black-box input canaries for any map-style PyTorch dataset: :class:`CanaryDataset`.

``train_set = dpaudit.attach.CanaryDataset(train_set, m=500, kind="mislabeled", seed=0)``
before the ``DataLoader`` (and Opacus' ``make_private``); the loop stays as it is. After
training, ``train_set.score(model)`` scores every canary (IN and OUT) with the final model and
``train_set.audit(...)`` gives the score file, the audit table and the verdict
(:mod:`dpaudit.attach.core`, :class:`~dpaudit.attach.core.InputCanaries`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from dpaudit.attach.core import INPUT_KINDS, InputCanaries
from dpaudit.seeding import derive_seed

SCORES = ("minus_loss", "logit")


def _label(value: Any) -> int | None:
    """``value`` as an integer class label, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 0:
        if value.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8) or (
            isinstance(value, np.ndarray) and value.dtype.kind in "iu"
        ):
            return int(value.item())
    return None


def _pair(item: Any, index: int, kind: str) -> tuple[Any, int]:
    if not isinstance(item, tuple | list) or len(item) < 2 or _label(item[1]) is None:
        raise ValueError(
            f"dataset item {index} is not an (input, integer label) pair (got "
            f"{type(item).__name__}): {kind} canaries are scored by the model's loss on their "
            "label, so CanaryDataset needs a labelled classification dataset"
        )
    return item[0], _label(item[1])  # type: ignore[return-value]


def _as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _n_classes(dataset: Any) -> int | None:
    """The number of classes a dataset declares (``classes``, ``targets``, a
    ``TensorDataset``'s labels), else None."""
    classes = getattr(dataset, "classes", None)
    if classes is not None and len(classes) >= 2:
        return len(classes)
    targets = getattr(dataset, "targets", None)
    if targets is None and hasattr(dataset, "tensors") and len(dataset.tensors) >= 2:
        targets = dataset.tensors[1]
    if targets is not None:
        return int(np.asarray(_as_numpy(targets)).max()) + 1
    return None


class CanaryDataset(Dataset):
    """``dataset`` plus the IN ones of ``m`` black-box canaries (fair coins), appended at the
    end; a drop-in replacement for the training set.

    ``kind``: ``mislabeled`` or ``in_distribution`` (held-out records: m records drawn from
    ``pool`` when given, e.g. a held-out split, else drawn from ``dataset`` and *removed* from
    training, so an OUT canary is never trained on), or ``random_input`` (random inputs of the
    dataset's input shape, random labels). ``n_classes``: default from the dataset's
    ``classes`` / ``targets`` / labels. ``score``: ``minus_loss`` (cross-entropy) or ``logit``
    (log p_y - log(1 - p_y), Carlini et al. 2022).
    """

    def __init__(
        self,
        dataset: Any,
        m: int,
        kind: str = "mislabeled",
        seed: int = 0,
        *,
        pool: Any = None,
        n_classes: int | None = None,
        scale: float = 1.0,
        score: str = "minus_loss",
    ) -> None:
        if kind not in INPUT_KINDS:
            raise ValueError(f"canary kind must be one of {list(INPUT_KINDS)}, got {kind!r}")
        if score not in SCORES:
            raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
        if len(dataset) == 0:
            raise ValueError("the dataset is empty")
        x0, y0 = _pair(dataset[0], 0, kind)
        self.dataset = dataset
        self._x_dtype = x0.dtype if isinstance(x0, torch.Tensor) else torch.float32
        self._tensor_label = isinstance(dataset[0][1], torch.Tensor)
        n_classes = n_classes if n_classes is not None else _n_classes(dataset)
        kept = np.arange(len(dataset))
        if kind == "random_input":
            if n_classes is None:
                raise ValueError("random_input canaries need n_classes (the dataset declares none)")
            self.canaries = InputCanaries(
                m,
                kind,
                seed,
                n_classes=n_classes,
                input_shape=tuple(x0.shape),
                scale=scale,
                score=score,
            )
        else:
            source = dataset if pool is None else pool
            if isinstance(m, int) and not isinstance(m, bool) and m > len(source):
                what = "pool" if pool is not None else "dataset"
                raise ValueError(
                    f"{m} {kind} canaries need {m} records; the {what} has {len(source)}"
                )
            rng = np.random.default_rng(derive_seed(seed, "attach", "records") % 2**32)
            idx = np.sort(rng.choice(len(source), size=int(m), replace=False))
            pairs = [_pair(source[int(i)], int(i), kind) for i in idx]
            x_pool = np.stack([_as_numpy(x) for x, _ in pairs])
            y_pool = np.array([y for _, y in pairs], dtype=np.int64)
            if n_classes is None:
                n_classes = max(int(y_pool.max()) + 1, 2)
            self.canaries = InputCanaries(
                m, kind, seed, x_pool=x_pool, y_pool=y_pool, n_classes=n_classes, score=score
            )
            if pool is None:
                kept = np.setdiff1d(kept, idx)
        self.kept = kept
        self.in_ids = np.flatnonzero(self.canaries.membership == 1)
        self.scores: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kept) + len(self.in_ids)

    def __getitem__(self, i: int) -> Any:
        n = len(self.kept)
        if i < 0:
            i += len(self)
        if i < n:
            return self.dataset[int(self.kept[i])]
        j = self.in_ids[i - n]  # IndexError past the end, as a dataset should
        return self._canary(j)

    def _canary(self, j: int) -> tuple[torch.Tensor, Any]:
        x = torch.as_tensor(self.canaries.x[j]).to(self._x_dtype)
        y = int(self.canaries.y[j])
        return x, (torch.tensor(y) if self._tensor_label else y)

    @torch.no_grad()
    def score(
        self, model: torch.nn.Module, batch_size: int = 256, device: Any = None
    ) -> np.ndarray:
        """Score every canary (IN and OUT, (m,)) with the final ``model`` (its logits): minus
        its cross-entropy loss, or its logit-scaled confidence; kept for :meth:`audit`."""
        was_training = model.training
        model.eval()
        if device is None:
            device = next(model.parameters()).device
        out = []
        try:
            for a in range(0, self.canaries.m, batch_size):
                xb = torch.as_tensor(self.canaries.x[a : a + batch_size]).to(device, self._x_dtype)
                yb = torch.as_tensor(self.canaries.y[a : a + batch_size]).to(device)
                logits = model(xb).double()
                if self.canaries.score_name == "minus_loss":
                    s = -F.cross_entropy(logits, yb, reduction="none")
                else:
                    logp = F.log_softmax(logits, dim=1).gather(1, yb[:, None])[:, 0]
                    s = logp - torch.log1p(-logp.exp().clamp(max=1 - 1e-16))
                out.append(s.cpu().numpy())
        finally:
            model.train(was_training)
        self.scores = np.concatenate(out)
        return self.scores

    def score_file(self, claimed_epsilon: float | None = None, **kwargs: Any):
        """The score file of the scores of :meth:`score` (or ``scores=``); see
        :meth:`dpaudit.attach.core.InputCanaries.score_file` for the claim."""
        return self.canaries.score_file(claimed_epsilon, **self._with_scores(kwargs))

    def audit(self, claimed_epsilon: float | None = None, **kwargs: Any):
        """The audit table and verdict; see :meth:`dpaudit.attach.core.InputCanaries.audit`."""
        return self.canaries.audit(claimed_epsilon, **self._with_scores(kwargs))

    def _with_scores(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if kwargs.get("scores") is None:
            if self.scores is None:
                raise ValueError("score the canaries first: dataset.score(model) after training")
            kwargs = {**kwargs, "scores": self.scores}
        return kwargs
