"""Handing free heap memory back: glibc's ``malloc_trim(0)`` is called where it exists, and
the answer says whether it was."""

from __future__ import annotations

import ctypes
import platform

import pytest

from normstats.sources import heap


@pytest.fixture
def fresh_lookup():
    """The C library is looked up once per process: forget it around each test."""
    heap._malloc_trim.cache_clear()
    yield
    heap._malloc_trim.cache_clear()


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(pad)
        return 1


class NoTrim:
    """A C library without ``malloc_trim`` (musl, macOS): ctypes raises AttributeError."""


def test_glibc_here_is_found_and_trimmed(fresh_lookup):
    assert platform.libc_ver()[0] == "glibc"  # the machines normstats is tested on
    assert heap.release_free_memory() is True
    assert heap._malloc_trim() is not None


def test_trim_is_called_with_no_padding(fresh_lookup, monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    assert heap.release_free_memory() is True
    assert heap.release_free_memory() is True
    assert libc.calls == [0, 0]  # keep no free memory at the top of the heap


@pytest.mark.parametrize("error", [OSError, AttributeError, TypeError])
def test_a_c_library_without_trim_answers_false(fresh_lookup, monkeypatch, error):
    def missing(name):
        if error is AttributeError:
            return NoTrim()
        raise error("no C library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert heap.release_free_memory() is False
