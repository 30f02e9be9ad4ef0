"""The mean image on every path of the engine: folders (in process, threads, a process
pool), arrays, map-style datasets, Dask arrays and the record cache; equal to the exact
oracle, bit for bit, whatever the task size or worker count; one image size only."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from oracle import exact_histogram, exact_mean_image
from PIL import Image

import normstats
from normstats.errors import IncompatibleImagesError, InvalidOptionError


def same_size_images(rng: np.random.Generator, count: int = 40,
                     shape=(6, 5, 3)) -> np.ndarray:
    """Images with a per-image brightness, so that the std over images is not uniform."""
    centres = rng.integers(40, 216, (count, 1, 1, 1))
    return (centres + rng.integers(-40, 40, (count, *shape))).astype(np.uint8)


def write_pngs(folder, images) -> str:
    folder.mkdir(parents=True)
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(folder / f"{i:03d}.png")
    return str(folder)


def assert_exact(stats, images, scale=255) -> None:
    expected_mean, expected_std = exact_mean_image(images, scale)
    assert stats.mean_image.dtype == np.float64 and stats.mean_image.shape == images.shape[1:]
    assert np.array_equal(stats.mean_image, expected_mean)
    assert np.array_equal(stats.mean_image_std, expected_std)
    assert stats.images == len(images)


@pytest.mark.parametrize("run", [{"workers": 1}, {"workers": 2, "task_size": 3},
                                 {"workers": 2, "task_size": 7, "scheduler": "threads"},
                                 {"workers": 2, "scheduler": "processes"}])
def test_a_folder_gives_the_exact_mean_image_however_it_is_run(tmp_path, rng, run):
    images = same_size_images(rng)
    folder = write_pngs(tmp_path / "pngs", images)
    stats = normstats.compute(folder, mean_image_std=True, cache=False, **run)
    assert_exact(stats, images)
    assert stats == normstats.compute(folder, cache=False, workers=1)  # same constants


@pytest.mark.parametrize("task_size", [1, 7, 40])
def test_an_array_gives_the_same_bits_for_any_task_size(rng, task_size):
    images = same_size_images(rng, 40).astype(np.uint16) * 257
    stats = normstats.compute(images, mean_image_std=True, task_size=task_size, workers=2,
                              scheduler="threads")
    assert_exact(stats, images, scale=65535)


def test_mean_image_alone_has_no_std_and_the_user_scale(rng):
    images = same_size_images(rng)
    stats = normstats.compute(images, mean_image=True, scale=1)
    assert stats.mean_image_std is None
    assert np.array_equal(stats.mean_image, exact_mean_image(images, 1)[0])


def test_float_images_holding_nan_are_left_out_as_the_statistics_leave_them(rng):
    images = rng.normal(0.5, 0.2, (30, 4, 3, 2))
    images[4, 1, 1, 0] = np.nan
    stats = normstats.compute(images, mean_image_std=True, task_size=8, layout="NHWC")
    kept = np.delete(images, 4, axis=0)
    assert stats.images == 29 and len(stats.skipped) == 1
    expected_mean, expected_std = exact_mean_image(kept, 1)
    np.testing.assert_allclose(stats.mean_image, expected_mean, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(stats.mean_image_std, expected_std, rtol=1e-14)


def test_a_map_style_dataset(rng):
    images = same_size_images(rng, 12)
    stats = normstats.compute(list(images), mean_image_std=True, task_size=5, workers=2,
                              scheduler="threads")
    assert_exact(stats, images)


@pytest.mark.parametrize("chunks", [(40, 6, 5, 3), (7, 6, 5, 3), (9, 2, 3, 2), (1, 6, 1, 1)])
def test_a_dask_array_is_reduced_by_dask_to_the_same_bits(rng, chunks):
    images = same_size_images(rng)
    stats = normstats.compute(da.from_array(images, chunks=chunks), mean_image_std=True,
                              scheduler="threads")
    assert_exact(stats, images)


def test_percentiles_and_the_mean_image_in_one_pass(rng):
    images = same_size_images(rng)
    both = normstats.compute(da.from_array(images, chunks=(9, 6, 5, 3)), percentiles=True,
                             mean_image_std=True, scheduler="sync")
    assert_exact(both, images)
    assert both.percentiles == normstats.compute(images, percentiles=True).percentiles


def test_images_of_two_sizes_are_refused_naming_both(tmp_path, rng):
    images = [*same_size_images(rng, 5), rng.integers(0, 256, (9, 5, 3), dtype=np.uint8)]
    folder = tmp_path / "mixed"
    write_pngs(folder, images)
    with pytest.raises(IncompatibleImagesError) as error:
        normstats.compute(folder, mean_image=True, workers=1, cache=False)
    message = str(error.value)
    assert "\n" not in message
    assert "000.png is 6×5×3 uint8 but 005.png is 9×5×3 uint8" in message
    assert "--resize/--center-crop" in message
    stats = normstats.compute(folder, mean_image=True, resize=4, center_crop=4, workers=1,
                              cache=False)
    assert stats.mean_image.shape == (4, 4, 3) and stats.images == 6


@pytest.mark.parametrize("wants", [{"percentiles": True}, {"mean_image": True}])
def test_modes_that_cannot_be_pooled_are_named_as_the_plain_run_names_them(tmp_path, wants):
    """RGB and grey images in two tasks: the run with pixel totals stops with the plain
    run's message (both files, what each is, the decode modes that make them alike),
    not with a histogram's or a mean image's of their channel counts."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    Image.new("RGB", (6, 5), (1, 2, 3)).save(folder / "a.png")
    Image.new("L", (6, 5), 7).save(folder / "b.png")
    expected = ("images cannot be pooled: (a.png is uint8 R,G,B but b.png is uint8 L|b.png is "
                "uint8 L but a.png is uint8 R,G,B); choose a decode mode")  # tasks' order
    with pytest.raises(IncompatibleImagesError, match=expected):
        normstats.compute(str(folder), mode="keep", cache=False, workers=1, task_size=1)
    for run in ({"workers": 1}, {"workers": 2, "scheduler": "processes"}):
        with pytest.raises(IncompatibleImagesError, match=expected):
            normstats.compute(str(folder), mode="keep", cache=False, task_size=1, **run,
                              **wants)


def test_two_sizes_in_two_tasks_are_refused_too(tmp_path, rng):
    images = [*same_size_images(rng, 6), *same_size_images(rng, 6, shape=(5, 6, 3))]
    folder = write_pngs(tmp_path / "mixed", images)
    with pytest.raises(IncompatibleImagesError, match="6×5×3 uint8 but .* is 5×6×3 uint8"):
        normstats.compute(folder, mean_image=True, workers=2, task_size=6, cache=False)


def test_a_warm_cache_run_decodes_for_the_mean_image(tmp_path, rng):
    images = same_size_images(rng)
    folder = write_pngs(tmp_path / "pngs", images)
    cache = tmp_path / "cache"
    cold = normstats.compute(folder, cache=cache, workers=1)
    warm = normstats.compute(folder, cache=cache, workers=1)
    assert warm.images_cached == len(images)
    asked = normstats.compute(folder, cache=cache, workers=1, mean_image_std=True)
    assert asked == cold and asked.images_cached == 0
    assert_exact(asked, images)


def test_what_has_no_mean_image_is_refused(rng):  # vectors: the test below
    with pytest.raises(InvalidOptionError, match="the mean image is computed for image "
                                                 "folders, .* not for"):
        normstats.compute(iter(list(same_size_images(rng, 3))), mean_image=True)
    with pytest.raises(InvalidOptionError, match="--mean-image needs every image"):
        normstats.compute(same_size_images(rng), mean_image=True, sample=5)
    with pytest.raises(InvalidOptionError, match="--mean-image"):
        normstats.compute(same_size_images(rng), mean_image_std=True, verify_cache=3)


def test_the_mean_image_survives_json(rng):
    stats = normstats.compute(same_size_images(rng), mean_image_std=True)
    again = normstats.DatasetStats.from_json(stats.to_json())
    assert np.array_equal(again.mean_image, stats.mean_image)
    assert np.array_equal(again.mean_image_std, stats.mean_image_std)


def test_the_mean_image_is_always_height_width_channels(rng):
    images = same_size_images(rng)  # (N, 6, 5, 3)
    stats = normstats.compute(np.ascontiguousarray(images.transpose(0, 3, 1, 2)),
                              layout="NCHW", mean_image=True)
    assert np.array_equal(stats.mean_image, exact_mean_image(images, 255)[0])


@pytest.mark.parametrize("wants", [("mean_image_std",), ("histogram",)])
def test_the_values_tasks_hand_on_result_are_never_added_into(rng, wants):
    """Pooling adds later tasks into a total of its own (no fresh int64 image a task), not
    into the first task's value, which the caller's ``on_result`` may hold: 16-bit images,
    whose tasks' totals are int64 already, exact after the run and untouched."""
    from normstats.engine.pixel_run import compute_with_pixels

    images = same_size_images(rng, 40).astype(np.uint16) * 257
    images[:, 0, :2] = [[0], [65535]]  # every task's histogram spans the same values
    seen = []

    def keep(result):
        value = result.values[wants[0]]
        arrays = [value.total, value.square_low] if wants[0] != "histogram" else [value.counts]
        seen.append((arrays, [a.copy() for a in arrays]))

    stats, found = compute_with_pixels(images, None, wants, task_size=7, workers=1,
                                       on_result=keep)
    assert len(seen) == 6
    assert all(np.array_equal(a, b) for arrays, saved in seen for a, b in zip(arrays, saved))
    if wants[0] == "histogram":
        assert found["histogram"].counts.sum() == images.size
    else:
        expected_mean, expected_std = exact_mean_image(images, 65535)
        mean, std = found["mean_image_std"].finalize(65535)
        assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)


def test_vectors_have_no_percentiles_nor_mean_image_and_say_so(rng):
    """An (N, d) array was told percentiles "are computed for ... arrays ..., not for array
    (30, 2) float64", and "the mean image are computed"."""
    vectors = rng.normal(size=(30, 2))
    for wanted, says in (({"percentiles": True}, "percentiles are computed for images, and "
                          "array (30, 2) float64 holds vectors (N, d): compute its per-feature "
                          "statistics without them"),
                         ({"mean_image": True}, "the mean image is computed for images, and "
                          "array (30, 2) float64 holds vectors (N, d): compute its per-feature "
                          "statistics without it")):
        with pytest.raises(InvalidOptionError) as caught:
            normstats.compute(vectors, **wanted)
        assert str(caught.value) == says


def test_a_task_counts_its_images_onto_one_count_and_cuts_it_to_the_values_seen(rng):
    """The accumulator of a task adds every 8- or 16-bit image onto one count over the
    dtype's range (C, 2**bits), its valid values only, and cuts it to the values seen at
    the end: the counts of every valid value, whatever the order; images of another
    channel count or dtype are refused as a merge of their histograms refuses them."""
    from normstats.engine.pixel_run import PIXEL_ACCUMULATORS

    images = rng.integers(20, 240, size=(4, 5, 6, 3)).astype(np.uint8)
    images[1, 0, 0] = (255, 254, 3)
    valid = rng.random((5, 6, 1)) < 0.5
    columns = [[] for _ in range(3)]
    for pixels, kept in ((images[0], None), (images[1], valid), (images[2:], None)):
        values = pixels.reshape(-1, 3) if kept is None else pixels[kept[..., 0]]
        for c in range(3):
            columns[c] += values[:, c].tolist()
    for order in ([0, 1, 2], [1, 2, 0]):
        accumulator = PIXEL_ACCUMULATORS["histogram"]()
        feeds = [("add", "a", images[0], None), ("add", "m", images[1], valid),
                 ("add_stack", "s", images[2:], None)]
        for i in order:
            method, key, pixels, kept = feeds[i]
            getattr(accumulator, method)(key, pixels, kept)
        h = accumulator.result()
        assert (h.offset, h.counts.tolist(), h.dtype) == exact_histogram(columns, "uint8")
    signed = rng.integers(-300, 300, size=(3, 4, 5, 2)).astype(np.int16)  # 16-bit bands
    mask = rng.random((4, 5, 1)) < 0.5
    accumulator = PIXEL_ACCUMULATORS["histogram"]()
    accumulator.add("a", signed[0], mask)
    accumulator.add_stack("s", signed[1:])
    h = accumulator.result()
    columns = [signed[0, ..., c][mask[..., 0]].tolist() + signed[1:, ..., c].ravel().tolist()
               for c in range(2)]
    assert (h.offset, h.counts.tolist(), h.dtype) == exact_histogram(columns, "int16")
    accumulator = PIXEL_ACCUMULATORS["histogram"]()
    accumulator.add("rgb", images[0])
    accumulator.add("grey", images[0][..., :1])
    with pytest.raises(IncompatibleImagesError, match="x3 and uint8 x1|x1 and uint8 x3"):
        accumulator.result()
    accumulator = PIXEL_ACCUMULATORS["histogram"]()  # the same bins, another dtype
    accumulator.add("unsigned", images[0])
    accumulator.add("signed", images[0].view(np.int8))
    with pytest.raises(IncompatibleImagesError, match="uint8 x3 and int8 x3|int8 x3 and uint8"):
        accumulator.result()
