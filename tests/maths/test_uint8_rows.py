"""Records of 8-bit images decoded into the rows' own buffers, reduced now or in batches,
are the records of the images: the oracle is numpy int64 on copies of the pixels."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normstats.maths import uint8_rows
from normstats.maths.uint8_rows import ARENA_BYTES, BATCH_IMAGE_BYTES, Uint8Rows

NAMES = {1: ("L",), 2: ("L", "A"), 3: ("R", "G", "B"), 4: ("R", "G", "B", "A")}


def oracle(image: np.ndarray) -> tuple:
    wide = image.reshape(-1, image.shape[2]).astype(np.int64)
    return (image.shape[0] * image.shape[1], wide.sum(0).tolist(), (wide**2).sum(0).tolist(),
            wide.min(0).tolist(), wide.max(0).tolist())


def records_by_key(rows: Uint8Rows) -> dict[str, tuple]:
    out = {}
    for records in rows.records():
        for i, key in enumerate(records.keys):
            out[key] = (int(records.pixels[i]), records.sums[i].tolist(),
                        records.sums_sq[i].tolist(), records.minimum[i].astype(int).tolist(),
                        records.maximum[i].astype(int).tolist())
    return out


def decode_into(rows: Uint8Rows, image: np.ndarray, how: str) -> np.ndarray:
    """What a decoder hands back: its slot (``slot``), a conversion of it (``view``: a
    channel dropped, not contiguous), or an array of its own (``fresh``)."""
    if how == "fresh":
        return image.copy()
    if how == "view":
        slot = rows.take(image[:, :, :1].size * (image.shape[2] + 1))
        wider = slot.reshape(image.shape[0], image.shape[1], image.shape[2] + 1)
        wider[:, :, :-1] = image
        wider[:, :, -1] = 7
        return wider[:, :, :-1]
    slot = rows.take(image.size).reshape(image.shape)
    slot[:] = image
    return slot


image_strategy = st.tuples(st.integers(1, 80), st.integers(1, 80), st.sampled_from([1, 2, 3, 4]),
                           st.integers(0, 2**32 - 1),
                           st.sampled_from(["slot", "slot", "slot", "view", "fresh", "lost"]))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(images=st.lists(image_strategy, min_size=1, max_size=40))
def test_records_equal_the_oracle_however_images_arrive(images):
    """Small and large images, four channel layouts, slots, converted views, arrays of their
    own and slots taken for a decode that failed (``lost``), in any order."""
    rows, expected = Uint8Rows(len(images)), {}
    for index, (height, width, channels, seed, how) in enumerate(images):
        image = np.random.default_rng(seed).integers(0, 256, (height, width, channels),
                                                     dtype=np.uint8)
        if how == "lost":
            rows.take(image.size)  # the decoder gave up: nothing is added
            continue
        pixels = decode_into(rows, image, how)
        rows.add(str(index), pixels, NAMES[channels])
        expected[str(index)] = oracle(image)
    assert records_by_key(rows) == expected


def test_a_full_arena_reduces_its_waiting_images_before_handing_their_bytes_out_again(
        rng, monkeypatch):
    size = 32 * 32 * 3
    count = 3 * (ARENA_BYTES // size)  # three full arenas
    rows, expected = Uint8Rows(count), {}
    reduced = []
    real = uint8_rows.fused.uint8_moments_rows

    def counting(block, row, *outputs):
        reduced.append(len(block))
        real(block, row, *outputs)

    monkeypatch.setattr(uint8_rows.fused, "uint8_moments_rows", counting)
    for index in range(count):
        image = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        rows.add(str(index), decode_into(rows, image, "slot"), NAMES[3])
        expected[str(index)] = oracle(image)
    assert records_by_key(rows) == expected
    assert sum(reduced) == count
    assert len(reduced) == 3  # one kernel call an arena, not one an image


def test_large_images_are_reduced_at_once_in_one_reused_buffer(rng):
    rows = Uint8Rows(2)
    side = int(np.sqrt(BATCH_IMAGE_BYTES // 3)) + 8  # just over the batch size
    first = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    second = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    slot = decode_into(rows, first, "slot")
    rows.add("a", slot, NAMES[3])
    again = decode_into(rows, second, "slot")  # overwrites the first image's pixels
    assert np.shares_memory(slot, again)
    rows.add("b", again, NAMES[3])
    assert records_by_key(rows) == {"a": oracle(first), "b": oracle(second)}
