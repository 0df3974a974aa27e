"""Figures in one course style (and the text views beside them, `text.py`). Import matplotlib only
when a figure is drawn.

Palette (Okabe-Ito, colour-blind safe). Meaning is fixed across the course so a reader learns
it once: ``TRAINING`` green, ``HELD_IDLE`` vermillion (the warning colour: GPUs held but not
training), ``FREE`` light grey, ``KILLED`` black.
"""
from __future__ import annotations

from importlib import resources

BLUE = "#0072B2"
ORANGE = "#E69F00"
TRAINING = "#009E73"
HELD_IDLE = "#D55E00"
PINK = "#CC79A7"
SKY = "#56B4E9"
YELLOW = "#F0E442"
KILLED = "#000000"
FREE = "#DDDDDD"
PALETTE = [BLUE, ORANGE, TRAINING, HELD_IDLE, PINK, SKY, YELLOW, KILLED]


def style_path() -> str:
    return str(resources.files("courselib.plots").joinpath("course.mplstyle"))


def use_style() -> None:
    """Apply the course style and a deterministic SVG/PNG output (no timestamps)."""
    import matplotlib

    matplotlib.use(matplotlib.get_backend())
    import matplotlib.pyplot as plt

    plt.style.use(style_path())
    matplotlib.rcParams["svg.hashsalt"] = "all-or-nothing"


def mark_now(axes, t: float, end: float) -> None:
    """A stepper's "now": a dark line at ``t`` on each of ``axes`` and the time still to come veiled in white."""
    for ax in axes:
        ax.axvline(t, color="0.15", linewidth=1.2, zorder=6)
        if end > t:
            ax.axvspan(t, end, color="white", alpha=0.65, linewidth=0, zorder=5)
