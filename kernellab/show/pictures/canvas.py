"""What every picture shares: the `Picture` it returns, the palette, and a canvas for a projector.

A picture is drawn for the back of a room: at least `plots.MIN_WIDTH_IN` inches wide (1200 px),
every text at least `MIN_POINTS`, colours from Okabe and Ito's palette (told apart with every
common colour-vision deficiency), one colour per meaning in a panel, and a one-line caption that
says what to look for.
"""

from __future__ import annotations

import dataclasses
import io

from kernellab.show import plots

MIN_POINTS = 14.0
TRACED = "traced in Numba's CUDA simulator"

# Okabe & Ito (2008): 8 colours a reader with any common colour-vision deficiency tells apart.
BLUE, ORANGE, GREEN, PURPLE = "#0072B2", "#E69F00", "#009E73", "#CC79A7"
SKY, YELLOW, VERMILLION, BLACK = "#56B4E9", "#F0E442", "#D55E00", "#000000"
GREY = "#BBBBBB"           # what is idle or free: the only colour outside the palette
BLOCK_COLOURS = (BLUE, ORANGE, GREEN, PURPLE, SKY, YELLOW)   # one per block, step or kind
PROBLEM = VERMILLION       # what costs: a conflict, a wasted sector, the limiter


@dataclasses.dataclass(repr=False)
class Picture:
    """A drawn picture: `figure` (matplotlib), `data` (what the tests check), `caption`."""

    figure: object
    data: dict
    caption: str

    def __repr__(self) -> str:   # what a notebook shows beside the image as text: the caption, not the data
        return f"Picture: {self.caption}"

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=plots.DPI)
        return buffer.getvalue()

    def save(self, path) -> None:
        self.figure.savefig(path, dpi=plots.DPI)

    def close(self) -> None:
        plots.plt.close(self.figure)


def canvas(title: str, source: str, ncols: int = 1, width: float = plots.MIN_WIDTH_IN,
           height: float = 6.0, **subplots):
    """A blank picture figure: its title and where its data came from on top."""
    fig, axes = plots.figure(width, height, ncols, **subplots)
    fig.suptitle(f"{title}\n{source}", fontsize=18)
    return fig, list(axes[0])


def finish(fig, caption: str, data: dict) -> Picture:
    """Every text at MIN_POINTS or more, the caption under the panels, and the Picture."""
    for ax in fig.axes:
        ax.tick_params(labelsize=MIN_POINTS)
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts):
            text.set_fontsize(max(text.get_fontsize(), MIN_POINTS))
        legend = ax.get_legend()
        if legend is not None:
            for text in legend.get_texts():
                text.set_fontsize(max(text.get_fontsize(), MIN_POINTS))
    fig.supxlabel(caption, fontsize=16)
    return Picture(fig, data, caption)


def picture(draw, data: dict, title: str, caption: str, source: str) -> Picture:
    """`draw(data, title, source)`'s figure, finished, as a Picture (out of pyplot's list of open
    figures: a notebook shows the Picture once, not the figure again at the cell's end)."""
    fig = draw(data, title, source)
    plots.plt.close(fig)
    return finish(fig, caption, data)


def small_texts(fig) -> list[str]:
    """The drawn texts under MIN_POINTS, and those that leave the canvas, one line each (empty: all
    readable from the back), multi-line ones included (`plots.drawn_texts`)."""
    renderer = fig.canvas.get_renderer()
    problems = []
    for text in plots.drawn_texts(fig):
        if text.get_fontsize() < MIN_POINTS - 0.05:
            problems.append(f"{text.get_text()!r} at {text.get_fontsize():.1f} pt")
        box = text.get_window_extent(renderer)
        if min(box.x0, box.y0) < -1 or box.x1 > fig.bbox.x1 + 1 or box.y1 > fig.bbox.y1 + 1:
            problems.append(f"{text.get_text()[:40]!r} leaves the canvas")
    return problems


def colours_used(fig) -> set[str]:
    """The fill and line colours a figure's panels draw its data in (text and white excluded)."""
    from matplotlib import colors
    found = set()
    for ax in fig.axes:
        arrows = [text.arrow_patch for text in ax.texts if getattr(text, "arrow_patch", None) is not None]
        for artist in (*ax.patches, *ax.lines, *ax.collections, *arrows):
            for rgba in _rgba(artist):
                if rgba[3] > 0:
                    found.add(colors.to_hex(rgba, keep_alpha=False))
    return found - {"#ffffff"}


def _rgba(artist) -> list:
    from matplotlib import colors
    if hasattr(artist, "get_facecolor") and not hasattr(artist, "get_xydata"):
        faces = artist.get_facecolor()
        faces = [faces] if len(faces) == 4 and not hasattr(faces[0], "__len__") else list(faces)
        edges = []
        if hasattr(artist, "get_array") and artist.get_array() is not None:   # an image-like mesh
            edges = [artist.cmap(artist.norm(value)) for value in set(artist.get_array().ravel().tolist())]
        return [colors.to_rgba(c) for c in faces] + [colors.to_rgba(c) for c in edges]
    return [colors.to_rgba(artist.get_color())]
