"""The error family: each kind of failure is a type, and every error survives pickling (errors
cross from decoding processes and cluster workers to the caller)."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import normstats
from normstats.errors import (
    AccessError,
    EmptyDatasetError,
    IncompatibleImagesError,
    InvalidOptionError,
    NormstatsError,
    RefusedInputError,
    SkipKind,
    TransientInputError,
    UnreadableInputError,
    input_error,
)

ERRORS = (NormstatsError, EmptyDatasetError, IncompatibleImagesError, UnreadableInputError,
          RefusedInputError, TransientInputError, AccessError, InvalidOptionError)


def _raise(cls: type[NormstatsError]) -> None:
    raise cls("a reason\nover two lines", "a/b.png")


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_pickles_with_its_type_kind_reason_and_path(cls):
    error = cls("a reason\nover two lines", "a/b.png")
    loaded = pickle.loads(pickle.dumps(error))
    assert type(loaded) is cls and loaded.kind is error.kind
    assert (loaded.reason, loaded.path, str(loaded)) == \
        ("a reason over two lines", "a/b.png", "a/b.png: a reason over two lines")


def test_an_error_raised_in_another_process_arrives_with_its_type_and_kind():
    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(TransientInputError) as caught:
            pool.submit(_raise, TransientInputError).result()
    assert caught.value.kind is SkipKind.TRANSIENT and caught.value.path == "a/b.png"


def test_each_kind_has_its_type_and_the_types_are_unreadable_inputs():
    made = {kind: input_error(kind, "why", "x.png") for kind in SkipKind}
    assert {kind: type(error) for kind, error in made.items()} == {
        SkipKind.UNREADABLE: UnreadableInputError, SkipKind.REFUSED: RefusedInputError,
        SkipKind.TRANSIENT: TransientInputError, SkipKind.DUPLICATE: UnreadableInputError,
        SkipKind.ACCESS: AccessError}
    assert all(isinstance(e, UnreadableInputError) and str(e) == "x.png: why"
               for e in made.values())
    assert [made[k].kind for k in (SkipKind.REFUSED, SkipKind.TRANSIENT, SkipKind.ACCESS)] == \
        [SkipKind.REFUSED, SkipKind.TRANSIENT, SkipKind.ACCESS]


def test_the_kind_is_never_read_from_the_wording():
    assert TransientInputError("zero-byte file").kind is SkipKind.TRANSIENT
    assert UnreadableInputError("permission denied in its header").kind is SkipKind.UNREADABLE
    assert normstats.Skipped("a.png", "permission denied").kind is SkipKind.UNREADABLE


def test_the_kinds_and_their_errors_are_public():
    for name in ("SkipKind", "RefusedInputError", "TransientInputError", "AccessError"):
        assert name in normstats.__all__ and getattr(normstats, name) is globals()[name]
