"""Observe the records a PyTorch ``DataLoader`` really delivers: wrap its batch sampler.

:func:`observe_loader` makes the loader's own batch sampler object report every logical batch
of dataset indices it yields to a :class:`~dpaudit.attach.sampling_record.SamplingRecord`,
without changing what it yields, its type (the object's class becomes a subclass of its class
whose ``__iter__`` passes each batch on after recording it) or its length. Opacus'
``DPDataLoader`` (``UniformWithReplacementSampler``, Poisson), a plain ``DataLoader``
(``BatchSampler`` over any sampler: shuffled, sequential, a ``WeightedRandomSampler``) and
``BatchMemoryManager`` (whose ``BatchSplittingSampler`` iterates this same object and splits its
logical batches) are all observed at the logical batch. The batch sampler runs in the main
process, so worker processes do not hide it; they fetch ahead, so with ``num_workers > 0`` the
record pairs batches with noisy steps by order (``by_order``). :func:`release` restores the
sampler's class.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader

from dpaudit.attach.sampling_record import SamplingRecord

_PROBED: dict[type, type] = {}
_ATTR = "_dpaudit_sampling_record"


def _probed_class(cls: type) -> type:
    """The subclass of ``cls`` that records each batch its ``__iter__`` yields."""
    if cls not in _PROBED:

        def __iter__(self: Any) -> Any:  # noqa: N807 (the sampler's own protocol)
            record = getattr(self, _ATTR)
            for batch in cls.__iter__(self):
                record.deliver(batch)
                yield batch

        _PROBED[cls] = type(cls.__name__, (cls,), {"__iter__": __iter__, "_dpaudit_base": cls})
    return _PROBED[cls]


def check_observable(data_loader: Any) -> None:
    """``ValueError`` naming why the records ``data_loader`` delivers cannot be observed (not
    a ``DataLoader``, no batch sampler, an iterable-style dataset), else nothing."""
    way_out = (
        "pass the torch DataLoader that PrivacyEngine.make_private returned (with "
        "BatchMemoryManager, that loader, not the memory manager's), or sample_rate= instead "
        "(the sampling stage is then not checked)"
    )
    if not isinstance(data_loader, DataLoader):
        raise ValueError(
            f"data_loader is a {type(data_loader).__name__}, not a torch DataLoader: dpaudit "
            f"cannot observe the records it delivers; {way_out}"
        )
    if data_loader.batch_sampler is None:
        raise ValueError(
            "data_loader has no batch sampler (batch_size=None): dpaudit cannot observe which "
            f"records each step receives; {way_out}"
        )
    try:
        len(data_loader.dataset)
    except TypeError:
        raise ValueError(
            "data_loader's dataset has no length (an iterable-style dataset): the sampling "
            f"checks need the dataset's size; {way_out}"
        ) from None
    if getattr(data_loader.batch_sampler, _ATTR, None) is not None:
        raise ValueError(
            "data_loader is already observed by another auditor: detach() it first"
        )


def observe_loader(data_loader: DataLoader) -> SamplingRecord:
    """Start recording the logical batches ``data_loader`` yields (:func:`check_observable`
    first); returns the record."""
    check_observable(data_loader)
    sampler = data_loader.batch_sampler
    association = "by_order" if data_loader.num_workers > 0 else "by_time"
    record = SamplingRecord(
        len(data_loader.dataset), association, source=type(sampler).__name__  # type: ignore
    )
    try:
        sampler.__class__ = _probed_class(type(sampler))
    except TypeError as exc:
        raise ValueError(
            f"cannot observe the batch sampler {type(sampler).__name__} ({exc}); pass "
            "sample_rate= instead (the sampling stage is then not checked)"
        ) from None
    setattr(sampler, _ATTR, record)
    return record


def release(data_loader: DataLoader) -> None:
    """Stop recording: the batch sampler's own class again."""
    sampler = data_loader.batch_sampler
    base = getattr(type(sampler), "_dpaudit_base", None)
    if base is not None:
        sampler.__class__ = base
    if hasattr(sampler, _ATTR):
        delattr(sampler, _ATTR)
