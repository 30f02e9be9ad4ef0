"""`Summary`: exact dataset totals that merge in any order, keep every skip, and refuse to
pool images that differ, naming one of each."""

from __future__ import annotations

import numpy as np
import pytest

from normstats.errors import IncompatibleImagesError
from normstats.maths.records import Skipped, records_from_stack
from normstats.maths.summary import Summary, summarize


def test_images_of_different_kinds_are_refused_naming_one_of_each():
    a = summarize(records_from_stack(np.zeros((1, 2, 2, 3), np.uint8), keys=("a.png",)))
    b = summarize(records_from_stack(np.zeros((1, 2, 2, 1), np.uint16), keys=("b.png",)))
    with pytest.raises(IncompatibleImagesError) as raised:
        a.merge(b)
    assert str(raised.value) == (
        "images cannot be pooled: a.png is uint8 c0,c1,c2 but b.png is uint16 L; choose a "
        "decode mode that makes them alike (--mode RGB or --mode L), or compute them separately")
    unnamed = summarize(records_from_stack(np.zeros((1, 2, 2, 1), np.float32)))
    assert (unnamed.example, unnamed.description) == ("an array", "float32 L")


def test_skips_are_kept_in_order_whichever_side_is_empty():
    one, two, three = (Skipped(f"{i}.png", "truncated") for i in range(3))
    full = summarize(records_from_stack(np.ones((2, 1, 1, 1), np.uint8), keys=("x", "y")),
                     (one,))
    empty = summarize(None, (two,))
    assert empty.merge(full).skipped == (two, one) and empty.merge(full).images == 2
    assert full.merge(empty).skipped == (one, two) and full.merge(empty).images == 2
    assert empty.merge(summarize(None, (three,))) == Summary(skipped=(two, three))
    assert summarize(records_from_stack(np.ones((0, 1, 1, 1), np.uint8)), (one,)) == \
        Summary(skipped=(one,))


def test_totals_add_up_and_extremes_are_kept():
    images = np.arange(2 * 3 * 1 * 2, dtype=np.uint8).reshape(2, 3, 1, 2)
    a = summarize(records_from_stack(images[:1]))
    b = summarize(records_from_stack(images[1:]))
    both = summarize(records_from_stack(images))
    assert a.merge(b) == both == b.merge(a)
    assert (both.minimum, both.maximum, both.images, both.images_ddof1) == \
        ((0.0, 1.0), (10.0, 11.0), 2, 2)


def test_only_images_of_two_pixels_or_more_have_a_sample_std():
    single = summarize(records_from_stack(np.full((3, 1, 1, 1), 7, np.uint8)))
    assert (single.images, single.images_ddof1, single.std_ddof1_sum) == (3, 0, (0,))
    pair = summarize(records_from_stack(np.array([0, 2], np.uint8).reshape(1, 1, 2, 1)))
    assert pair.images_ddof1 == 1 and pair.std_ddof1_sum != (0,)  # sqrt(2) > 0
    merged = single.merge(pair)
    assert (merged.images, merged.images_ddof1) == (4, 1)


def test_integer_records_summarise_the_same_with_or_without_the_compiled_spreads(
        rng, monkeypatch):
    """Each image's std, sample std and variance take one compiled pass for integer
    records (`fused.integer_spreads`); numpy's passes give the same exact sums, images
    of one pixel (no sample std) among them."""
    from normstats.maths import fused
    from normstats.maths.records import concat_records

    records = concat_records([
        records_from_stack(rng.integers(0, 256, (300, 5, 7, 3), dtype=np.uint8)),
        records_from_stack(rng.integers(0, 256, (20, 1, 1, 3), dtype=np.uint8)),
        records_from_stack(np.full((4, 3, 3, 3), 9, np.uint8))])
    compiled = summarize(records)
    monkeypatch.setattr(fused, "integer_spreads", lambda *arguments: None)
    assert summarize(records) == compiled
    assert compiled.images_ddof1 == 304 and compiled.std_sum != compiled.std_ddof1_sum
