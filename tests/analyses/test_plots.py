"""The comparison figure: what is drawn in each panel, with which labels, and where it goes.

The panels are drawn on a recorder that keeps every call (matplotlib's own drawing is
matplotlib's business), so each test states the figure exactly and runs in milliseconds;
one test draws a real PNG through matplotlib's Agg backend.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from normstats.analyses import plots
from normstats.analyses.compare import Compared, Comparison
from normstats.analyses.plots import _channel_panel, _label, plot_comparison
from normstats.errors import NormstatsError
from normstats.results.stats import DatasetStats

Call = tuple[str, tuple, dict]


def plain(value: Any) -> Any:
    """Arrays as lists, so that recorded calls compare with ``==``."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | list):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Recorder:
    """Stands for a matplotlib object: every method call is kept as (name, args, kwargs);
    ``violinplot`` answers with recorders for its bodies and mean line, as matplotlib does."""

    def __init__(self, log: list[Call], prefix: str = "") -> None:
        self.log, self.prefix = log, prefix

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.log.append((self.prefix + name, plain(args), plain(kwargs)))
            if name == "violinplot":
                return {"bodies": [Recorder(self.log, self.prefix + "body.")],
                        "cmeans": Recorder(self.log, self.prefix + "cmeans.")}
            return None
        return call


def _stats(std: tuple[float, ...], per_image: tuple[float, ...] | None = None,
           channels: tuple[str, ...] = ("R", "G"), scale: float = 255.0) -> DatasetStats:
    n = len(channels)
    return DatasetStats(channels=channels, mean=(0.5,) * n, std=std, std_ddof1=std,
                        per_image_std=per_image, per_image_std_ddof1=per_image,
                        rms_per_image_std=per_image, min=(0.0,) * n, max=(1.0,) * n, images=3,
                        pixels_per_channel=12, dtype="uint8", scale=scale)


SPREAD = Compared("a", _stats((0.25, 0.5), (0.125, 0.25)),
                  per_image_std=np.array([[0.1, 0.2], [0.3, 0.4], [0.2, 0.6]]))
FLAT = Compared("flat", _stats((0.5, 0.0), (0.25, 0.0)), per_image_std=np.full((2, 2), 0.25))
NONE = Compared("vectors", _stats((0.75, 1.0)))
#: Each dataset's own channel for the first's channels 0 and 1: the same ones.
SAME = [{0: 0, 1: 1}]


def test_long_names_keep_their_end() -> None:
    assert _label("short") == "short"
    assert _label("x" * 22) == "x" * 22
    assert _label("/data/" + "y" * 30) == "…" + "y" * 21
    assert _label("abcdef", width=4) == "…def"


def test_a_panel_draws_a_violin_or_a_mean_line_and_the_pooled_bar() -> None:
    log: list[Call] = []
    _channel_panel(Recorder(log), [SPREAD, FLAT, NONE], 1, ["C0", "C1", "C2"], SAME * 3)
    assert log == [
        ("violinplot", ([0.2, 0.4, 0.6],), {"positions": [0], "widths": 0.7,
                                            "showextrema": False, "showmeans": True}),
        ("body.set_facecolor", ("C0",), {}), ("body.set_edgecolor", ("C0",), {}),
        ("body.set_alpha", (0.45,), {}), ("cmeans.set_color", ("C0",), {}),
        ("plot", ([-0.38, 0.38], [0.5, 0.5]), {"color": "black", "linewidth": 2.5,
                                               "solid_capstyle": "butt"}),
        ("annotate", ("0.500", (0, 0.5)), {"textcoords": "offset points", "xytext": (0, 4),
                                           "ha": "center", "va": "bottom", "fontsize": 8}),
        ("annotate", ("ratio 0.50", (0, 0)), {"textcoords": "offset points", "xytext": (0, 4),
                                              "ha": "center", "va": "bottom", "fontsize": 8,
                                              "color": "0.3"}),
        ("plot", ([0.75, 1.25], [0.25, 0.25]), {"color": "C1", "linewidth": 2}),
        ("plot", ([0.62, 1.38], [0.0, 0.0]), {"color": "black", "linewidth": 2.5,
                                             "solid_capstyle": "butt"}),
        ("annotate", ("0.000", (1, 0.0)), {"textcoords": "offset points", "xytext": (0, 4),
                                           "ha": "center", "va": "bottom", "fontsize": 8}),
        ("plot", ([1.62, 2.38], [1.0, 1.0]), {"color": "black", "linewidth": 2.5,
                                             "solid_capstyle": "butt"}),
        ("annotate", ("1.000", (2, 1.0)), {"textcoords": "offset points", "xytext": (0, 4),
                                           "ha": "center", "va": "bottom", "fontsize": 8}),
        ("set_xticks", ([0, 1, 2], ["a", "flat", "vectors"]),
         {"rotation": 0, "ha": "center", "fontsize": 8}),
        ("set_xlim", (-0.6, 2.6), {}),
        ("set_title", ("channel G",), {}),
        ("grid", (), {"axis": "y", "alpha": 0.3})]


def test_one_image_gets_a_line_and_long_names_are_tilted() -> None:
    single = Compared("one-image-dataset", _stats((0.5, 0.5), (0.25, 0.25)),
                      per_image_std=np.array([[0.25, 0.125]]))
    empty = Compared("e", _stats((0.5, 0.5)), per_image_std=np.zeros((0, 2)))
    log: list[Call] = []
    _channel_panel(Recorder(log), [single, empty], 0, ["C0", "C1"], SAME * 2)
    names = [name for name, _, _ in log]
    assert names.count("violinplot") == 0 and log[0] == (
        "plot", ([-0.25, 0.25], [0.25, 0.25]), {"color": "C0", "linewidth": 2})
    assert log[3][1] == ("ratio 0.50", (0, 0))
    assert [call for call in log if call[0] == "plot"][-1][2]["color"] == "black"
    assert log[-4] == ("set_xticks", ([0, 1], ["one-image-dataset", "e"]),
                       {"rotation": 15, "ha": "right", "fontsize": 8})
    assert log[-3] == ("set_xlim", (-0.6, 1.6), {})
    ten = Compared("ten-chars!", _stats((0.5, 0.5)))
    log.clear()
    _channel_panel(Recorder(log), [ten], 0, ["C0"], SAME * 1)
    assert log[-4][2] == {"rotation": 0, "ha": "center", "fontsize": 8}
    eleven = Compared("eleven-char", _stats((0.5, 0.5)))
    log.clear()
    _channel_panel(Recorder(log), [eleven], 0, ["C0"], SAME * 1)
    assert log[-4][2] == {"rotation": 15, "ha": "right", "fontsize": 8}


def test_two_images_that_differ_make_a_violin() -> None:
    pair = Compared("p", _stats((0.5, 0.5), (0.25, 0.25)),
                    per_image_std=np.array([[0.125, 0.25], [0.375, 0.25]]))
    log: list[Call] = []
    _channel_panel(Recorder(log), [pair], 0, ["C0"], SAME * 1)
    assert log[0] == ("violinplot", ([0.125, 0.375],), {"positions": [0], "widths": 0.7,
                                                        "showextrema": False,
                                                        "showmeans": True})
    log.clear()
    _channel_panel(Recorder(log), [pair], 1, ["C0"], SAME * 1)  # the same std twice: a line
    assert log[0] == ("plot", ([-0.25, 0.25], [0.25, 0.25]), {"color": "C0", "linewidth": 2})


class Pyplot:
    """A stand-in for `matplotlib.pyplot` that records the figure it is asked for."""

    def __init__(self) -> None:
        self.log: list[Call] = []
        self.figure = Recorder(self.log, "fig.")

    def subplots(self, rows: int, columns: int, **kwargs: Any) -> tuple[Any, np.ndarray]:
        self.log.append(("subplots", (rows, columns), kwargs))
        axes = np.empty((rows, columns), dtype=object)
        for r in range(rows):
            for c in range(columns):
                axes[r, c] = Recorder(self.log, f"ax{r}{c}.")
        return self.figure, axes

    def close(self, figure: Any) -> None:
        self.log.append(("close", (figure is self.figure,), {}))


def _drawn(entries: list[Compared], path: Any, monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    pyplot = Pyplot()
    monkeypatch.setattr(plots, "require_matplotlib", lambda: pyplot)
    assert plot_comparison(entries, path, SAME * len(entries)) == str(path)
    return pyplot.log


def test_the_figure_has_a_panel_per_channel_a_shared_scale_and_a_legend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "figure.svg"
    log = _drawn([SPREAD, FLAT, NONE], out, monkeypatch)
    assert log[0] == ("subplots", (1, 2), {"figsize": (2 * 4.1, 4.4), "sharey": True,
                                          "squeeze": False})
    titles = [(name, args) for name, args, _ in log if name.endswith("set_title")]
    assert titles == [("ax00.set_title", ("channel R",)), ("ax01.set_title", ("channel G",))]
    assert ("ax00.set_ylabel", ("std (pixel values / 255)",), {}) in log
    assert ("ax00.set_ylim", (0, 1.0 * 1.15), {}) in log
    (name, args, kwargs), = [call for call in log if call[0] == "fig.legend"]
    handles = kwargs.pop("handles")
    assert kwargs == {"loc": "upper center", "ncol": 3, "frameon": False, "fontsize": 9}
    assert [h.get_label() for h in handles] == [
        "per-image std of each image (line: their mean)", "pooled std",
        "ratio: mean per-image std / pooled std"]
    assert handles[0].get_alpha() == 0.6 and handles[0].get_facecolor()[:3] == (0.6,) * 3
    assert (handles[1].get_color(), handles[1].get_linewidth()) == ("black", 2.5)
    assert handles[2].get_linestyle() == "None"
    assert log[-3:] == [("fig.tight_layout", (), {"rect": (0, 0, 1, 0.93)}),
                        ("fig.savefig", (str(out),), {"dpi": 110}),
                        ("close", (True,), {})]


def test_vector_data_is_drawn_as_features_in_its_own_units(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vectors were drawn with the images' words: "channel c0", "std (pixel values / 1)"
    and a legend of per-image stds and their ratio, which vector data does not have."""
    def vectors(name: str, std: tuple[float, ...], scale: float = 1.0) -> Compared:
        stats = replace(_stats(std, channels=("h", "w"), scale=scale), kind="vectors")
        return Compared(name, stats)

    log = _drawn([vectors("a", (1.5, 2.0)), vectors("b", (3.0, 0.5))], tmp_path / "v.png",
                 monkeypatch)
    titles = [args for name, args, _ in log if name.endswith("set_title")]
    assert titles == [("feature h",), ("feature w",)]
    assert ("ax00.set_ylabel", ("std (raw values)",), {}) in log
    (_, _, kwargs), = [call for call in log if call[0] == "fig.legend"]
    assert [h.get_label() for h in kwargs["handles"]] == ["std of each feature over its rows"]
    assert kwargs["ncol"] == 1
    scaled = _drawn([vectors("a", (1.5, 2.0), scale=10.0)], tmp_path / "s.png", monkeypatch)
    assert ("ax00.set_ylabel", ("std (values / 10)",), {}) in scaled


def test_the_scale_reaches_the_tallest_per_image_std(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = _drawn([SPREAD], str(tmp_path / "a.png"), monkeypatch)
    assert ("ax00.set_ylim", (0, 0.6 * 1.15), {}) in log
    assert log[0][2]["figsize"] == (2 * 3.2, 4.4)  # one dataset: the narrowest panels
    many = [Compared(f"d{i}", _stats((0.5, 0.5))) for i in range(4)]
    assert _drawn(many, tmp_path / "b.png", monkeypatch)[0][2]["figsize"] == (
        2 * (0.9 * 4 + 1.4), 4.4)
    black = Compared("black", _stats((0.0, 0.0), (0.0, 0.0), scale=1.0),
                     per_image_std=np.zeros((2, 2)))
    log = _drawn([black], tmp_path / "c.png", monkeypatch)
    assert ("ax00.set_ylim", (0, 1), {}) in log
    assert ("ax00.set_ylabel", ("std (pixel values / 1)",), {}) in log
    gray = Compared("gray", _stats((0.5,), channels=("L",)))
    assert _drawn([gray], tmp_path / "d.png", monkeypatch)[0] == (
        "subplots", (1, 1), {"figsize": (3.2, 4.4), "sharey": True, "squeeze": False})


def test_the_figure_is_closed_when_drawing_fails(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pyplot = Pyplot()
    monkeypatch.setattr(plots, "require_matplotlib", lambda: pyplot)

    def failing(*args: Any) -> None:
        raise OSError("disk full")
    monkeypatch.setattr(plots, "_channel_panel", failing)
    with pytest.raises(OSError, match="disk full"):
        plot_comparison([SPREAD], tmp_path / "x.png", SAME)
    assert pyplot.log[-1] == ("close", (True,), {})


def test_each_panel_shows_the_channel_the_table_pairs_with_it_or_none() -> None:
    """The figure paired channels by position and refused other channel counts, while
    the table pairs them by name: BGR data against RGB showed B's spread in the R panel.
    Now a panel of the first dataset's channel draws each dataset's channel of that name
    (else the one at its position), and "no R" where a dataset has none (grey L beside R)."""
    swapped = Compared("swapped", _stats((0.5, 0.25), channels=("G", "R")),
                       per_image_std=np.array([[0.4, 0.1], [0.6, 0.2]]))
    gray = Compared("gray", _stats((0.75,), channels=("L",)), per_image_std=np.full((2, 1), 0.5))
    for entries, channel, expected in (((SPREAD, swapped), 0, 0.25), ((SPREAD, swapped), 1, 0.5)):
        log: list[Call] = []
        columns = [{0: 0, 1: 1}, {0: 1, 1: 0}]
        _channel_panel(Recorder(log), list(entries), channel, ["C0", "C1"], columns)
        bars = [call for call in log if call[0] == "plot" and call[2].get("color") == "black"]
        assert bars[1][1][1] == [expected, expected]  # swapped's own channel of that name
    log = []
    _channel_panel(Recorder(log), [SPREAD, gray], 0, ["C0", "C1"], [{0: 0, 1: 1}, {}])
    assert ("annotate", ("no R", (1, 0)), {"textcoords": "offset points", "xytext": (0, 4),
                                           "ha": "center", "va": "bottom", "fontsize": 8,
                                           "color": "0.3"}) in log
    assert not any(call[0] == "plot" and call[1][0][0] > 0.5 for call in log)  # nothing at 1


def test_the_figure_pairs_channels_as_the_table_does(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    drawn: list[tuple[int, list[dict[int, int]]]] = []
    monkeypatch.setattr(plots, "require_matplotlib", Pyplot)
    monkeypatch.setattr(plots, "_channel_panel", lambda ax, entries, channel, colors, columns,
                        unit: drawn.append((channel, columns)))
    swapped = Compared("swapped", _stats((0.5, 0.25), channels=("G", "R")))
    gray = Compared("gray", _stats((0.5,), channels=("L",)))
    Comparison((SPREAD, swapped, gray)).plot(tmp_path / "x.png")
    assert drawn == [(0, [{0: 0, 1: 1}, {0: 1, 1: 0}, {}]),
                     (1, [{0: 0, 1: 1}, {0: 1, 1: 0}, {}])]


def test_a_real_png_through_the_agg_backend(tmp_path: Path) -> None:
    out = tmp_path / "real.png"
    plot_comparison([SPREAD, FLAT, NONE], out, SAME * 3)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib

    assert matplotlib.get_backend().lower() == "agg"


def test_without_matplotlib_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(NormstatsError) as caught:
        plots.require_matplotlib()
    assert str(caught.value) == "matplotlib is not installed: pip install 'normstats[plot]'"


def test_with_matplotlib_pyplot_on_agg_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib
    import matplotlib.pyplot

    chosen: list[str] = []
    monkeypatch.setattr(matplotlib, "use", chosen.append)
    assert plots.require_matplotlib() is matplotlib.pyplot
    assert chosen == ["Agg"]
