"""The one look of every figure: the package's matplotlib style file, a fixed colour per
estimator method, and the styles of uncorrected curves, controls, reference lines and the
paper's printed values.

Every figure is drawn inside :func:`styled` and written by :func:`save`; figures added later
get the same look by going through :func:`dpaudit.plots.lines.draw_table` or
:func:`dpaudit.plots.eps.draw_empirical_vs_claimed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dpaudit.io import atomic_path
from dpaudit.plots import pyplot
from dpaudit.plots.labels import typeset

#: The style file shipped in the package.
STYLE = Path(__file__).with_name("dpaudit.mplstyle")

#: Okabe and Ito's colour-blind-safe palette (yellow left out), as in the style file.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")

#: Each estimator method keeps its colour in every figure. The methods of one design, which
#: share figures, have hues far apart: one_run blue, fdp_one_run vermillion, fdp_abstention
#: bluish green (not sky blue beside one_run's blue: with their uncorrected lighter lines that
#: made four similar blues), attack_metrics (every design) the first free colour. Two methods
#: that never share a figure may share a colour (lidp audits lidp files only).
METHOD_COLORS = {
    "one_run": "#0072B2",
    "fdp_one_run": "#D55E00",
    "fdp_abstention": "#009E73",
    "lidp": "#009E73",
    "multi_run_cp": "#CC79A7",
    "gdp_fit": "#E69F00",
}

#: Markers telling apart the lines of one colour (selection rules, K, threat models, ...).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")

#: The claimed epsilon (the accountant's), and reference values (exact epsilon, Chua et al.).
CLAIMED = {"color": "#7f7f7f", "lw": 1.0, "zorder": 1}
REFERENCE = {"color": "black", "lw": 0.9, "zorder": 1}

#: Further claims of one row (``claimed_epsilon_<name>`` columns, e.g. the tuned mechanism's
#: epsilon_U beside the base budget), each in its own grey style, told apart from the main claim.
EXTRA_CLAIMED = (
    {"color": "#4d4d4d", "lw": 1.2, "ls": "--", "marker": "d", "zorder": 1},
    {"color": "#4d4d4d", "lw": 1.2, "ls": (0, (6, 2, 1, 2)), "marker": "p", "zorder": 1},
)

#: The reference lines of one figure (``reference_<name>`` columns), each in its own black style
#: (line style and marker), so that two ceilings never look alike.
REFERENCE_STYLES = (
    {"ls": "-.", "marker": "v"},
    {"ls": (0, (1, 1.5)), "marker": "^"},
    {"ls": (0, (4, 1.5)), "marker": "s"},
    {"ls": (0, (3, 1, 1, 1, 1, 1)), "marker": "x"},
)

#: Uncorrected curves (not valid bounds): dashed and lighter; the legend says "(uncorrected)".
UNCORRECTED = {"ls": "--", "alpha": 0.55}
UNCORRECTED_SUFFIX = " (uncorrected)"

#: Positive and negative controls (no noise, null): small, dotted, one style everywhere.
CONTROL = {"ls": ":", "lw": 0.9, "ms": 2.5, "alpha": 0.8}
CONTROL_LABEL = "no-noise control (dotted)"

#: A value printed in the paper, drawn on top of ours.
PAPER = {"marker": "*", "ms": 10, "mfc": "none", "mec": "black", "mew": 0.9, "ls": "none"}
PAPER_LABEL = "paper (printed value)"
#: A value the paper prints for its own setup, which a reduced config only stands in for.
PAPER_OTHER = {"marker": "D", "ms": 6, "mec": "#4d4d4d"}
PAPER_OTHER_LABEL = "paper (printed, the paper's data and model)"


@contextlib.contextmanager
def styled() -> Iterator[None]:
    """Draw (and save) inside this context to get the package's style."""
    plt = pyplot()

    with plt.style.context(str(STYLE)):
        yield


def assign_colors(keys: Sequence[tuple[Any, str | None]]) -> dict[Any, str]:
    """A colour per key: the key's method colour (:data:`METHOD_COLORS`) for the first key of
    each method, the free palette colours in order for the others (keys without a method,
    second blocks of a method)."""
    colors: dict[Any, str] = {}
    used: set[str] = set()
    for key, method in keys:
        color = METHOD_COLORS.get(method or "")
        if color and color not in used and key not in colors:
            colors[key] = color
            used.add(color)
    free = [c for c in PALETTE if c not in used] or list(PALETTE)
    i = 0
    for key, _ in keys:
        if key not in colors:
            colors[key] = free[i % len(free)]
            i += 1
    return colors


#: A legend of more entries than this, or of longer labels, goes below the axes: beside them
#: it would be taller than the figure (matplotlib then draws it past the canvas).
LEGEND_BESIDE_MAX = (8, 36)
#: Height of one legend text line, in inches (legend.fontsize 7 pt, line spacing 1.5).
_LEGEND_LINE_IN = 7 * 1.5 / 72


def legend(fig: Any, ax: Any, below: bool | None = None, others: Sequence[Any] = ()) -> None:
    """The legend of ``ax`` (and of the ``others`` axes drawn over it, e.g. a second y axis)
    without repeats: to the right of the axes when it is short, below them in two columns when
    it is long (``below``: force either), the figure made taller so that the legend fits inside
    it."""
    from matplotlib.container import ErrorbarContainer

    handles, labels = ax.get_legend_handles_labels()
    for other in others:
        more, names = other.get_legend_handles_labels()
        handles, labels = [*handles, *more], [*labels, *names]
    seen: dict[str, Any] = {}
    for handle, label in zip(handles, labels, strict=True):
        if label and not label.startswith("_") and label not in seen:
            seen[label] = handle
    # the lines of data first, then the references (claimed, paper, controls)
    order = sorted(seen, key=lambda label: not isinstance(seen[label], ErrorbarContainer))
    if not order:
        return
    lines = [len(label.split("\n")) for label in order]
    widest = max(len(part) for label in order for part in label.split("\n"))
    if below is None:
        below = len(order) > LEGEND_BESIDE_MAX[0] or widest > LEGEND_BESIDE_MAX[1]
    if not below:
        fig.legend([seen[label] for label in order], order, loc="outside right upper")
        return
    ncols = 1 if widest > 60 else 2
    rows = [max(lines[i : i + ncols]) for i in range(0, len(lines), ncols)]
    need = sum(rows) * _LEGEND_LINE_IN + 0.3
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, max(height, 2.6 + need))
    fig.legend([seen[label] for label in order], order, loc="outside lower center", ncols=ncols)


def title(ax: Any, text: str, width: int = 60) -> None:
    """A title above the axes, wrapped to fit them (the long context goes in the caption)."""
    import textwrap

    if text:
        ax.set_title("\n".join(textwrap.wrap(text, width)))


def fits_canvas(fig: Any, tolerance: float = 0.5) -> bool:
    """Whether everything drawn (matplotlib's tight bounding box, in inches) lies within the
    figure; ``tolerance`` in points."""
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    width, height = fig.get_size_inches()
    slack = tolerance / 72
    return (
        box.x0 >= -slack
        and box.y0 >= -slack
        and box.x1 <= width + slack
        and box.y1 <= height + slack
    )


def typeset_figure(fig: Any) -> None:
    """Every text of ``fig`` (titles, axis labels, legends, fixed tick labels) with its
    subscripted symbols typeset (:func:`dpaudit.plots.labels.typeset`: "ε_B" is drawn with a
    subscript B, not an underscore). Run on the finished figure, just before it is written."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter

    for text in fig.findobj(Text):
        new = typeset(text.get_text())
        if new != text.get_text():
            text.set_text(new)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, FixedFormatter):
                formatter.seq = [typeset(str(t)) for t in formatter.seq]


def save(fig: Any, outputs: Sequence[str | Path]) -> None:
    """Write ``fig`` to each output (format from the suffix, atomically; its subscripts typeset,
    :func:`typeset_figure`) and close it."""
    plt = pyplot()

    typeset_figure(fig)
    with styled():
        for out in outputs:
            with atomic_path(out) as tmp:
                # tight: whatever is drawn is saved, even past the figure's nominal size
                fig.savefig(tmp, format=Path(out).suffix.lstrip("."), bbox_inches="tight")
    plt.close(fig)
