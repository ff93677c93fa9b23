"""How the charts of `report/figures.py` tell their series and parts apart: by colour, by shape and by text, so that
they are still told apart in grey, in print and with any colour vision.

A series' colour is Okabe and Ito's palette, made for colour-blind readers (red and green, the deuteranopia pair of
tab10's fp32, fused and bf16, are not both in it), past eight series Paul Tol's 'muted', and its marker one of
`MARKERS`, both by the series' place in `palette`'s order: `torch bf16` has one colour and one shape in every chart of
a report. A stacked bar's parts keep the profile's category colours and carry their share written on them where it
fits (`segment_labels`).
"""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": blue, vermillion, bluish green, reddish purple, black, then the three
# under WCAG 1.4.11's 3:1 on white (orange 2.3, sky blue 2.3, yellow 1.3), so that a chart of up to five series has
# none of them. Their greys differ too, so that a chart printed in grey keeps them apart.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9", "#F0E442")
# Paul Tol's colour-blind-safe 'muted' set (its grey, his "bad data", left out): indigo, wine, green, purple, rose,
# olive, then teal, cyan and sand (under 3:1). After Okabe and Ito's eight, so that a ninth to a seventeenth series
# have colours of their own: a ninth bar was the first's blue again, its legend patch too (tab10 then tab20 gave 20)
TOL_MUTED = ("#332288", "#882255", "#117733", "#AA4499", "#CC6677", "#999933", "#44AA99", "#88CCEE", "#DDCC77")
PALETTE = OKABE_ITO + TOL_MUTED
# one shape a series, so that two series of like colour (or an eighteenth series, its colour the first's) differ
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
SEGMENT = "_segment"  # a part's written share (`segment_labels`): underscored, it has no legend entry


def palette(labels: list[str]) -> dict[str, str]:
    """One colour per label, in order."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def marker(colors: dict, label: str) -> str:
    """The series' marker: its place in the palette's order (a label not in it, a circle)."""
    order = list(colors)
    return MARKERS[order.index(label) % len(MARKERS)] if label in order else MARKERS[0]


INK = "#1d2329"  # the report's text colour


def ink_on(colour: str) -> str:
    """Text legible on `colour` (#rrggbb): white or near-black, whichever contrasts with it more (WCAG 2's ratio)."""
    on = luminance(colour) + 0.05
    return "white" if 1.05 / on > on / (luminance(INK) + 0.05) else INK


def luminance(colour: str) -> float:
    """WCAG 2's relative luminance of an sRGB #rrggbb colour."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i : i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def segment(bar, name: str, share: float) -> None:
    """Mark a stacked part to carry its name and share ("matmul 40%"), written once the figure is laid out."""
    bar.segment = (name, share)


def segment_labels(fig) -> None:
    """Once the figure is laid out, each marked part's name and share written at its middle where they fit inside it
    with a little room either side, else its share alone, else nothing (a 3% part of a narrow chart has no room)."""
    from matplotlib.colors import to_hex

    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for bar in [b for b in ax.patches if hasattr(b, "segment")]:
            (name, share), box = bar.segment, bar.get_window_extent(renderer)
            x, y = bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2
            text = ax.text(x, y, f"{name} {share:.0f}%", ha="center", va="center", fontsize=7,
                           color=ink_on(to_hex(bar.get_facecolor())))  # fmt: skip
            text.set_label(SEGMENT)
            if text.get_window_extent(renderer).width > box.width - 4:  # 2 px a side
                text.set_text(f"{share:.0f}%")
            if text.get_window_extent(renderer).width > box.width - 4:
                text.remove()
