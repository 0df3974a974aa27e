"""The learning path: the chapters in reading order, what each needs first, and the lab beside each."""
from __future__ import annotations

from courselib import course
from courselib.plots import FREE, ORANGE, PINK, SKY, use_style

_PART_COLOUR = {course.PARTS[0]: SKY, course.PARTS[1]: ORANGE, course.PARTS[2]: PINK}
# (column, row) of each chapter: the machine underneath on the top rows, the gang below, choosing last
# (chapter 6 is two pages, side by side)
_POS = {"01-container-is-a-process": (0, 1), "02-cgroups": (1, 1), "03-oom-killer": (2, 1), "04-images": (1, 2),
        "05-slurm": (0, 0), "06-gang-deadlock": (1, 0), "06-native-gang-and-failures": (2, 0),
        "07-nccl-barrier": (3, 0), "08-cost": (4, 0), "09-choosing": (5, 0.5)}


def direct_needs() -> dict[str, set[str]]:
    """Each chapter's needs without the ones another need already implies (the arrows worth drawing)."""
    needs = {c.doc: set(c.needs) for c in course.CHAPTERS}

    def reach(doc, seen=None):
        seen = set() if seen is None else seen
        for n in needs[doc]:
            if n not in seen:
                seen.add(n)
                reach(n, seen)
        return seen

    return {doc: {n for n in ns if not any(n in reach(m) for m in ns if m != n)} for doc, ns in needs.items()}


def learning_path(title: str = "The learning path: read a chapter after the ones its arrows come from"):
    """Boxes for chapters (coloured by part, with their minutes), arrows for "read first", labs beneath."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Patch

    use_style()
    fig, ax = plt.subplots(figsize=(12.5, 4.6))
    w, h = 0.92, 0.34
    centre = {}
    for c in course.CHAPTERS:
        x, y = _POS[c.doc.split("/")[-1]]
        y = y * 0.9
        centre[c.doc] = (x, y)
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                    facecolor=_PART_COLOUR[c.part], edgecolor="#333333", alpha=0.9))
        ax.text(x, y + 0.05, f"{c.number}  {c.short}", ha="center", va="center", fontsize=8, weight="bold")
        ax.text(x, y - 0.09, f"{c.read_min} + {c.exercises_min} min", ha="center", va="center", fontsize=7.5)
    drawn = direct_needs()
    for c in course.CHAPTERS:
        for need in sorted(drawn[c.doc]):
            (x0, y0), (x1, y1) = centre[need], centre[c.doc]
            ax.annotate("", xy=(x1 - (w / 2 if x1 > x0 else 0), y1 + (0 if x1 > x0 else h / 2)),
                        xytext=(x0 + (w / 2 if x1 > x0 else 0), y0 - (0 if x1 > x0 else h / 2)),
                        arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.1,
                                        connectionstyle="arc3,rad=0.12" if y0 != y1 else "arc3"))
    for lab in course.LABS:
        x, y = centre[lab.chapter]
        ly = y - 0.36 if y < 0.5 else y + 0.36
        ax.add_patch(FancyBboxPatch((x - w / 2 + 0.06, ly - 0.09), w - 0.12, 0.18, boxstyle="round,pad=0.01",
                                    facecolor=FREE, edgecolor="#666666", linestyle="--"))
        ax.text(x, ly, f"lab {lab.doc.split('/')[-1][:2]}: {lab.short} ({lab.minutes} min)", ha="center",
                va="center", fontsize=7)
        ax.plot([x, x], [y + (h / 2 if ly > y else -h / 2), ly + (-0.09 if ly > y else 0.09)], color="#666666",
                lw=0.8, linestyle="--")
    ax.set_xlim(-0.55, 5.55)
    ax.set_ylim(-0.6, 2.35)
    ax.axis("off")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(color=_PART_COLOUR[p], label=p) for p in course.PARTS]
              + [Patch(facecolor=FREE, edgecolor="#666666", linestyle="--", label="autograded lab")],
              loc="upper right", fontsize=7.5, frameon=False)
    fig.tight_layout()
    return fig
