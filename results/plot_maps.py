#!/usr/bin/python3
"""Heatmaps of lynx-heu's simulated speedup from the CSV of `lynxsim figures --maps`.

usage: plot_maps.py MAPS_CSV OUTDIR

One PNG per (map, variant), MAP_VARIANT.png: (a) lynx-heu over the best Megatron strategy that
fits (none, full, selective; its initial under the value), (b) lynx-heu over checkmate (what
overlap alone adds). Cells where every strategy is out of memory are hatched "OOM"; cells where
only Lynx-style plans fit are hatched "Lynx only"; invalid layouts are blank and counted with
their reason under the figure; cells confirmed in exact mode are outlined and their exact values
listed. Standard library and matplotlib only; the same CSV gives the same bytes.
"""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

# The paper figures' script beside this one: its CSV error type and its deterministic save.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_paper import CsvError, csv_records, file_token, plot_main  # noqa: E402

PROG = "plot_maps.py"
DPI = 200
WIDTH_IN = 7.0
NEEDED = ["map", "variant", "x", "y", "status", "reason", "best_megatron", "speedup_vs_megatron",
          "speedup_vs_checkmate", "confirmed_as", "exact_speedup_vs_megatron",
          "exact_speedup_vs_checkmate", "title", "variant_title", "x_label", "y_label"]
NUMBERS = ["speedup_vs_megatron", "speedup_vs_checkmate", "exact_speedup_vs_megatron",
           "exact_speedup_vs_checkmate"]
STATUSES = {"ok", "invalid", "oom", "lynx-only", "lynx-oom"}
RC = {
    "font.family": "DejaVu Sans",
    "font.size": 7,
    "axes.titlesize": 8,
    "axes.labelsize": 7,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "hatch.linewidth": 0.5,
    "savefig.dpi": DPI,
    "svg.hashsalt": "lynxsim",
}
INITIAL = {"none": "N", "full": "F", "selective": "S"}


def read_cells(path):
    """Rows as dicts (speedups as floats or None); raises CsvError."""
    rows, seen = [], {}
    for number, row in csv_records(path, NEEDED):
        row["_line"] = number
        for name in NUMBERS:
            text_value = row[name].strip()
            if text_value == "":
                row[name] = None
                continue
            try:
                row[name] = float(text_value)
            except ValueError:
                raise CsvError(number, f"column '{name}': bad number '{text_value}'") from None
            if not math.isfinite(row[name]) or row[name] <= 0:
                raise CsvError(number, f"column '{name}': not a positive number '{text_value}'")
        if row["status"] not in STATUSES:
            raise CsvError(number, f"column 'status': unknown status '{row['status']}'")
        key = (row["map"], row["variant"], row["x"], row["y"])
        if key in seen:
            raise CsvError(number, f"duplicate cell {key} (first on line {seen[key]})")
        seen[key] = number
        rows.append(row)
    return rows


def ordered(values):
    """Distinct values in first-seen order (the CSV is written in axis order)."""
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def draw_panel(ax, cells, xs, ys, column, title, with_initial):
    grid = [[None] * len(xs) for _ in ys]
    for c in cells:
        grid[ys.index(c["y"])][xs.index(c["x"])] = c
    values = [c[column] for c in cells if c[column] is not None]
    lo = min(values + [0.98])
    hi = max(values + [1.02])
    norm = TwoSlopeNorm(vmin=min(lo, 0.999), vcenter=1.0, vmax=max(hi, 1.001))
    cmap = plt.get_cmap("RdBu")
    for j, _ in enumerate(ys):
        for i, _ in enumerate(xs):
            c = grid[j][i]
            if c is None or c["status"] == "invalid":
                continue  # blank: counted under the figure
            value = c[column]
            if value is not None:
                colour = cmap(norm(value))
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=colour, edgecolor="white", linewidth=0.5))
                dark = abs(norm(value) - 0.5) > 0.3
                label = f"{value:.2f}"
                if with_initial and c["best_megatron"]:
                    label += "\n" + INITIAL.get(c["best_megatron"], c["best_megatron"][:1].upper())
                ax.text(i, j, label, ha="center", va="center", fontsize=5.5,
                        color="white" if dark else "black")
            else:
                text = {"oom": "OOM", "lynx-only": "Lynx\nonly", "lynx-oom": "Lynx\nOOM"}.get(c["status"], "n/a")
                if c["status"] == "ok" and column == "speedup_vs_checkmate":
                    text = "ckpt\nOOM"
                face = "#C8E6C9" if c["status"] == "lynx-only" else "#E0E0E0"
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=face, edgecolor="#777777",
                                       hatch="////", linewidth=0.4))
                ax.text(i, j, text, ha="center", va="center", fontsize=5, color="#B71C1C" if text == "OOM" else "black")
            if c["confirmed_as"]:
                ax.add_patch(Rectangle((i - 0.46, j - 0.46), 0.92, 0.92, fill=False, edgecolor="black", linewidth=1.1))
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs, rotation=35, ha="right")
    ax.set_yticks(range(len(ys)))
    ax.set_yticklabels(ys)
    ax.set_title(title)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    bar = ax.figure.colorbar(sm, ax=ax, fraction=0.05, pad=0.02, format="%.3f")
    bar.ax.tick_params(labelsize=6)
    bar.outline.set_linewidth(0.4)


def notes(cells):
    lines = []
    reasons = {}
    for c in cells:
        if c["status"] == "invalid":
            reasons[c["reason"]] = reasons.get(c["reason"], 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"Blank: {count} invalid cell{'s' if count > 1 else ''}: {reason}")
    for c in cells:
        if not c["confirmed_as"]:
            continue
        tags = ", ".join(t.replace("-vs-megatron", " (a)").replace("-vs-checkmate", " (b)")
                         for t in c["confirmed_as"].split())
        parts = []
        for name, fast, exact in (("(a)", "speedup_vs_megatron", "exact_speedup_vs_megatron"),
                                  ("(b)", "speedup_vs_checkmate", "exact_speedup_vs_checkmate")):
            if c[fast] is not None and c[exact] is not None:
                parts.append(f"{name} {c[fast]:.3f} fast, {c[exact]:.3f} exact ({100 * (c[fast] / c[exact] - 1):+.1f}%)")
        lines.append(f"Outlined, exact mode at {c['x']}, {c['y']} ({tags}): " + "; ".join(parts))
    return lines


def figure(cells):
    first = cells[0]
    xs = ordered(c["x"] for c in cells)
    ys = ordered(c["y"] for c in cells)
    note_lines = notes(cells)
    top_in, bottom_in = 0.85, 0.75 + 0.13 * len(note_lines)
    height = top_in + bottom_in + 0.3 * len(ys) + 0.4
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, height))
    draw_panel(axes[0], cells, xs, ys, "speedup_vs_megatron",
               "(a) lynx-heu / best Megatron strategy that fits\n(N none, F full, S selective)", True)
    draw_panel(axes[1], cells, xs, ys, "speedup_vs_checkmate",
               "(b) lynx-heu / checkmate\n(what overlapping the recomputation adds)", False)
    for ax in axes:
        ax.set_xlabel(first["x_label"])
    axes[0].set_ylabel(first["y_label"])
    fig.suptitle(f"Simulated speedup of lynx-heu (fast mode) \u2014 {first['title']}\n{first['variant_title']}",
                 fontweight="bold", fontsize=8)
    fig.subplots_adjust(left=0.1, right=0.94, top=1 - top_in / height, bottom=bottom_in / height, wspace=0.3)
    for k, line in enumerate(note_lines):
        fig.text(0.02, (0.05 + 0.13 * (len(note_lines) - 1 - k)) / height, line, fontsize=5.5, ha="left")
    return fig


def build_figures(rows):
    """One (file name, figure) per map and variant, in the CSV's order."""
    groups = {}
    for row in rows:
        groups.setdefault((row["map"], row["variant"]), []).append(row)
    for (name, variant), cells in groups.items():  # drawn one at a time: 24 figures at once warn
        yield f"{file_token(name)}_{file_token(variant)}.png", figure(cells)


def main(argv):
    return plot_main(argv, PROG, "MAPS_CSV", read_cells, build_figures, RC)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
