#!/usr/bin/python3
"""Paper-style figures from the CSV that `lynxsim figures` writes.

Usage: plot_paper.py CSV OUTDIR

Writes into OUTDIR (created if missing), and prints each path written:
  throughput_<cluster>.png  tokens/s normalised to full recomputation, per model and strategy
  memory_<cluster>.png      peak GPU memory per model and strategy, with the capacity line
  breakdown_<cluster>.png   where the slowest stage's iteration went (seconds), per model
  search_time.png           lynx-heu vs lynx-opt planner search time (log scale), all clusters

A malformed CSV (missing column, bad number, duplicate row) is reported as one line
"plot_paper.py: CSV:LINE: message" on stderr with exit status 2.

Standard library + matplotlib only; runs headless (Agg). The output depends only on the CSV's
rows: inputs are sorted, figure size and dpi are fixed and no date is written into the images.
"""

import csv
import math
import os
import sys
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PROG = "plot_paper.py"

# Column name -> how its cells are parsed. Empty cells are allowed everywhere and read as None
# (a reduced or partly failed run leaves some empty), except the three key columns.
COLUMN_KINDS = {
    "cluster": "str", "cluster_label": "str", "model": "str", "params_b": "float",
    "gpus": "int", "tp": "int", "pp": "int", "dp": "int", "micro_batch": "int",
    "global_batch": "int", "strategy": "str", "oom": "bool", "oom_stage": "int",
    "iteration_time_s": "float", "tokens_per_s": "float", "throughput_vs_full": "float",
    "mfu": "float", "hfu": "float", "peak_memory_gib": "float", "memory_capacity_gib": "float",
    "compute_s": "float", "recompute_s": "float", "recompute_overlapped_s": "float",
    "tp_exposed_s": "float", "pp_exposed_s": "float", "dp_exposed_s": "float",
    "bubble_s": "float", "search_seconds": "float", "solver_gap": "float",
}
KEY_COLUMNS = ("cluster", "model", "strategy")
# Columns that may hold a negative value (oom_stage = -1 means "none" in SimResult) or
# infinity (a MILP without a bound reports an infinite gap).
SIGNED_COLUMNS = {"oom_stage", "solver_gap"}
INFINITE_OK_COLUMNS = {"solver_gap"}

# Fixed strategy order, display names and colours (Okabe-Ito palette: colour-blind safe and
# distinguishable in grey-scale print by lightness).
STRATEGY_ORDER = ("none", "full", "selective", "checkmate", "lynx-heu", "lynx-opt")
STRATEGY_STYLE = {
    "none": ("No recomputation", "None", "#C8C8C8"),
    "full": ("Full recomputation", "Full", "#4D4D4D"),
    "selective": ("Selective", "Sel.", "#56B4E9"),
    "checkmate": ("Checkmate", "Ckpt.", "#009E73"),
    "lynx-heu": ("Lynx-HEU", "L-HEU", "#E69F00"),
    "lynx-opt": ("Lynx-OPT", "L-OPT", "#D55E00"),
}
OTHER_STRATEGY_COLOURS = ("#CC79A7", "#0072B2", "#F0E442", "#999933")

# Iteration-time components of the slowest pipeline stage; the first four lie on its compute
# stream and add up to its iteration time, the last runs on the recompute stream beside it.
BREAKDOWN_PARTS = (
    ("compute_s", "Compute", "#0072B2", None),
    ("recompute_s", "Recompute (exposed)", "#D55E00", None),
    ("comm_exposed_s", "Communication exposed (TP+PP+DP)", "#56B4E9", None),
    ("bubble_s", "Pipeline bubble / idle", "#C8C8C8", None),
    ("recompute_overlapped_s", "Recompute overlapped (recompute stream)", "#FFFFFF", "////"),
)
OVERLAP_EDGE = "#E69F00"  # hatch colour of the overlapped-recompute segment

DPI = 200
FULL_WIDTH_IN = 7.0  # a two-column paper's text width

PAPER_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.7,
    "axes.axisbelow": True,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#DDDDDD",
    "grid.linestyle": "-",
    "grid.linewidth": 0.5,
    "xtick.major.size": 0,
    "ytick.major.width": 0.7,
    "hatch.linewidth": 0.6,
    "savefig.dpi": DPI,
    "svg.hashsalt": "lynxsim",
}


class CsvError(Exception):
    """A malformed input CSV; carries the 1-based line number of the offending line."""

    def __init__(self, line, message):
        super().__init__(message)
        self.line = line


# ----------------------------------------------------------------------------------------------
# Reading


def parse_cell(column, text, line):
    """Parses one cell by its column's kind; an empty cell is None."""
    kind = COLUMN_KINDS[column]
    text = text.strip()
    if kind == "str":
        return text
    if text == "":
        return None
    if kind == "bool":
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise CsvError(line, f"column '{column}': expected true or false, got '{text}'")
    if kind == "int":
        try:
            value = int(text)
        except ValueError:
            raise CsvError(line, f"column '{column}': bad integer '{text}'") from None
    else:
        try:
            value = float(text)
        except ValueError:
            raise CsvError(line, f"column '{column}': bad number '{text}'") from None
        if math.isnan(value) or (math.isinf(value) and column not in INFINITE_OK_COLUMNS):
            raise CsvError(line, f"column '{column}': not a finite number '{text}'")
    if value < 0 and column not in SIGNED_COLUMNS:
        raise CsvError(line, f"column '{column}': negative value '{text}'")
    return value


def read_results(path):
    """Reads the CSV into a list of row dicts (typed cells plus '_line'); raises CsvError."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CsvError(0, f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise CsvError(0, "not UTF-8 text") from None

    header = None
    rows = []
    seen = {}
    for number, text in enumerate(lines, start=1):
        if text.strip() == "" or text.lstrip().startswith("#"):
            continue
        try:
            fields = next(csv.reader([text], strict=True))
        except csv.Error as e:
            raise CsvError(number, f"cannot parse CSV line: {e}") from None
        if header is None:
            header = [name.strip() for name in fields]
            duplicated = sorted({n for n in header if header.count(n) > 1})
            if duplicated:
                raise CsvError(number, f"duplicate column '{duplicated[0]}' in header")
            missing = [name for name in COLUMN_KINDS if name not in header]
            if missing:
                raise CsvError(number, f"missing column '{missing[0]}' in header"
                               + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
            continue
        if len(fields) != len(header):
            raise CsvError(number, f"expected {len(header)} fields as in the header, "
                                   f"got {len(fields)}")
        row = {"_line": number}
        for name, cell in zip(header, fields):
            if name in COLUMN_KINDS:
                row[name] = parse_cell(name, cell, number)
        for name in KEY_COLUMNS:
            if row[name] == "":
                raise CsvError(number, f"column '{name}' is empty")
        key = (row["cluster"], row["model"], row["strategy"])
        if key in seen:
            raise CsvError(number, f"duplicate row for cluster '{key[0]}', model '{key[1]}', "
                                   f"strategy '{key[2]}' (first on line {seen[key]})")
        seen[key] = number
        if row["oom"] is None:
            row["oom"] = False
        rows.append(row)
    if header is None:
        raise CsvError(max(len(lines), 1), "no header row")
    if not rows:
        raise CsvError(len(lines), "no data rows")
    return rows


# ----------------------------------------------------------------------------------------------
# Organising


class Cluster:
    """Rows of one cluster, indexed by (model, strategy), with sorted models and strategies."""

    def __init__(self, name, rows):
        self.name = name
        labels = [r["cluster_label"] for r in rows if r["cluster_label"]]
        self.label = labels[0] if labels else name
        self.by_key = {(r["model"], r["strategy"]): r for r in rows}
        self.models = sort_models(rows)
        self.strategies = sort_strategies({r["strategy"] for r in rows})

    def row(self, model, strategy):
        return self.by_key.get((model, strategy))

    def capacities(self):
        return sorted({r["memory_capacity_gib"] for r in self.by_key.values()
                       if r["memory_capacity_gib"] is not None})


def sort_models(rows):
    """Model names ordered by size (params_b), models without a size last, then by name."""
    size = {}
    for r in rows:
        if r["params_b"] is not None:
            size.setdefault(r["model"], r["params_b"])
    names = {r["model"] for r in rows}
    return sorted(names, key=lambda m: (m not in size, size.get(m, 0.0), m))


def sort_strategies(names):
    """The fixed paper order; strategies the script does not know come after it, by name."""
    known = [s for s in STRATEGY_ORDER if s in names]
    return known + sorted(n for n in names if n not in STRATEGY_ORDER)


def strategy_style(strategy):
    """(long name, short name, colour) of a strategy; one the script does not know gets a
    colour picked by a stable checksum of its name, so reruns draw it alike."""
    if strategy in STRATEGY_STYLE:
        return STRATEGY_STYLE[strategy]
    colour = OTHER_STRATEGY_COLOURS[zlib.crc32(strategy.encode()) % len(OTHER_STRATEGY_COLOURS)]
    return (strategy, strategy[:6], colour)


def model_label(model):
    """'gpt-1.3b' -> 'GPT-1.3B'; other names are kept as they are."""
    head, sep, tail = model.partition("-")
    if head.lower() == "gpt" and sep:
        return "GPT-" + tail.upper()
    return model


def parallel_label(cluster, model):
    """'TP2·PP2·DP2' when every strategy of this model ran the same layout, else ''."""
    layouts = {(r["tp"], r["pp"], r["dp"]) for (m, _), r in cluster.by_key.items() if m == model}
    if len(layouts) != 1:
        return ""
    tp, pp, dp = layouts.pop()
    if None in (tp, pp, dp):
        return ""
    return f"TP{tp}\u00b7PP{pp}\u00b7DP{dp}"


def throughput_ratio(cluster, row):
    """Tokens/s relative to full recomputation of the same cluster and model, or None."""
    if row["oom"]:
        return None
    if row["throughput_vs_full"] is not None:
        return row["throughput_vs_full"]
    full = cluster.row(row["model"], "full")
    if (full is None or full["oom"] or not full["tokens_per_s"]
            or row["tokens_per_s"] is None):
        return None
    return row["tokens_per_s"] / full["tokens_per_s"]


def file_token(name):
    """A cluster name made safe for a file name (letters, digits, '.', '_', '-')."""
    token = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in name)
    return token or "cluster"


def format_seconds(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} \u00b5s"
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms" if seconds < 0.1 else f"{seconds:.2f} s"
    if seconds < 100:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s"


# ----------------------------------------------------------------------------------------------
# Drawing helpers


def group_positions(n_bars, group_width=0.8):
    """Bar width and the offset of each bar from its group's centre."""
    width = group_width / max(n_bars, 1)
    return width, [(j - (n_bars - 1) / 2) * width for j in range(n_bars)]


def model_ticks(ax, cluster, models):
    ax.set_xticks(range(len(models)))
    labels = []
    for m in models:
        layout = parallel_label(cluster, m)
        labels.append(model_label(m) + (f"\n{layout}" if layout else ""))
    ax.set_xticklabels(labels)
    ax.set_xlim(-0.55, len(models) - 0.45)


def marker_text(ax, x, y, text, colour, rotate, size=6.5):
    """A small label standing at the base of a bar slot (OOM, n/a)."""
    ax.text(x, y, text, ha="center", va="bottom", rotation=90 if rotate else 0,
            fontsize=size, color=colour, fontweight="bold", clip_on=False)


def oom_stub(ax, x, width, height, colour):
    """A short hatched bar marking an out-of-memory run, so it never looks like a gap."""
    ax.bar(x, height, width, facecolor="white", edgecolor=colour, hatch="////",
           linewidth=0.6, zorder=2)


def axis_break(ax, x, width, y, depth):
    """A slanted white band with black edges across a bar that is cut at the top of the axis."""
    left, right = x - width * 0.6, x + width * 0.6
    ax.fill([left, right, right, left], [y - depth, y, y + depth, y], color="white", zorder=3)
    for offset in (-depth / 2, depth / 2):
        ax.plot([left, right], [y - depth / 2 + offset, y + depth / 2 + offset], color="black",
                linewidth=0.5, zorder=4)


def oom_bar(ax, x, width, height, colour):
    """A full-height bar of an out-of-memory run: cross-hatched in the strategy's colour (the
    hatch takes the edge colour, so the black outline is a second, unfilled bar)."""
    hatch_colour = "#8C8C8C" if colour == STRATEGY_STYLE["none"][2] else colour
    ax.bar(x, height, width, facecolor="white", edgecolor=hatch_colour, hatch="xxxx",
           linewidth=0, zorder=2)
    ax.bar(x, height, width, fill=False, edgecolor="black", linewidth=0.4, zorder=2)


def strategy_handles(strategies):
    return [Patch(facecolor=strategy_style(s)[2], edgecolor="black", linewidth=0.4,
                  label=strategy_style(s)[0]) for s in strategies]


def legend_shape(n_entries, max_columns):
    """(columns, legend row height in inches) for a legend of n_entries, rows balanced."""
    rows = math.ceil(n_entries / max_columns)
    return math.ceil(n_entries / rows), 0.08 + 0.2 * rows


def draw_legend(legend_ax, handles, columns):
    legend_ax.legend(handles=handles, loc="center", ncol=columns, frameon=False,
                     handlelength=1.4, handletextpad=0.5, columnspacing=1.2, borderaxespad=0)


def figure_with_legend_row(n_rows, n_cols, height_in, legend_height_in, sharey=False):
    """A figure whose top grid row is an invisible axes holding the legend, so constrained
    layout (which in matplotlib 3.6 ignores figure legends) keeps title, legend and plots apart.
    Returns (figure, legend axes, 2-D list of plot axes)."""
    fig = plt.figure(figsize=(FULL_WIDTH_IN, height_in), layout="constrained")
    plot_height = (height_in - legend_height_in) / n_rows
    grid = fig.add_gridspec(n_rows + 1, n_cols,
                            height_ratios=[legend_height_in] + [plot_height] * n_rows)
    legend_ax = fig.add_subplot(grid[0, :])
    legend_ax.axis("off")
    axes = []
    first = None
    for r in range(n_rows):
        row_axes = []
        for c in range(n_cols):
            ax = fig.add_subplot(grid[r + 1, c], sharey=first if sharey else None)
            first = first or ax
            row_axes.append(ax)
        axes.append(row_axes)
    return fig, legend_ax, axes


def save(fig, path, written):
    # metadata Software=None keeps the matplotlib version out of the file, so the bytes depend
    # only on the drawing.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    written.append(path)


# ----------------------------------------------------------------------------------------------
# Figures


def plot_throughput(cluster, path, written):
    models, strategies = cluster.models, cluster.strategies
    handles = strategy_handles(strategies)
    columns, legend_height = legend_shape(len(handles), 6)
    fig, legend_ax, axes = figure_with_legend_row(1, 1, 2.7 + legend_height, legend_height)
    ax = axes[0][0]
    width, offsets = group_positions(len(strategies))
    rotate = len(strategies) * len(models) > 14 or len(strategies) > 4

    ratios = [throughput_ratio(cluster, r) for r in cluster.by_key.values()]
    top = max([1.0] + [r for r in ratios if r is not None])
    ymax = max(1.25, top * (1.28 if rotate else 1.15))
    stub = 0.035 * ymax

    for i, model in enumerate(models):
        for j, strategy in enumerate(strategies):
            x = i + offsets[j]
            colour = strategy_style(strategy)[2]
            row = cluster.row(model, strategy)
            if row is None:
                continue  # this strategy was not run for this model (reduced sweep)
            if row["oom"]:
                oom_stub(ax, x, width * 0.9, stub, "#444444")
                marker_text(ax, x, stub * 1.3, "OOM", "#B00000", rotate=True)
                continue
            ratio = throughput_ratio(cluster, row)
            if ratio is None:
                marker_text(ax, x, 0.01 * ymax, "n/a", "#777777", rotate=True)
                continue
            ax.bar(x, ratio, width * 0.9, color=colour, edgecolor="black", linewidth=0.4,
                   zorder=2)
            if strategy.startswith("lynx"):
                ax.text(x, ratio + 0.01 * ymax, f"{ratio:.2f}\u00d7", ha="center",
                        va="bottom", rotation=90 if rotate else 0, fontsize=6.5,
                        color="black")

    ax.axhline(1.0, color="black", linestyle=(0, (4, 3)), linewidth=0.8, zorder=3)
    ax.set_ylim(0, ymax)
    ax.set_ylabel("Throughput normalised\nto full recomputation")
    model_ticks(ax, cluster, models)
    fig.suptitle(cluster.label, fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, columns)
    save(fig, path, written)


def plot_memory(cluster, path, written):
    models, strategies = cluster.models, cluster.strategies
    handles = strategy_handles(strategies)
    handles.append(Line2D([], [], color="#B00000", linestyle=(0, (4, 3)), linewidth=0.9,
                          label="GPU capacity"))
    if any(r["oom"] and r["peak_memory_gib"] is not None for r in cluster.by_key.values()):
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="xxxx",
                             linewidth=0.4, label="Over capacity (OOM)"))
    columns, legend_height = legend_shape(len(handles), 6)
    fig, legend_ax, axes = figure_with_legend_row(1, 1, 2.7 + legend_height, legend_height)
    ax = axes[0][0]
    width, offsets = group_positions(len(strategies))
    capacities = cluster.capacities()
    peaks = [r["peak_memory_gib"] for r in cluster.by_key.values()
             if r["peak_memory_gib"] is not None]
    highest = max(peaks + capacities + [1.0])
    # Runs far over capacity (no recomputation of a large model) would flatten the rest: the
    # axis stops at twice the capacity and taller bars are cut and labelled with their value.
    cap_axis = 2.0 * max(capacities) if capacities else highest
    limit = min(highest, cap_axis)
    ymax = limit * 1.18
    stub = 0.035 * ymax

    for i, model in enumerate(models):
        for j, strategy in enumerate(strategies):
            x = i + offsets[j]
            colour = strategy_style(strategy)[2]
            row = cluster.row(model, strategy)
            if row is None:
                continue
            peak = row["peak_memory_gib"]
            if peak is None:
                if row["oom"]:
                    oom_stub(ax, x, width * 0.9, stub, "#444444")
                    marker_text(ax, x, stub * 1.3, "OOM", "#B00000", rotate=True)
                else:
                    marker_text(ax, x, 0.01 * ymax, "n/a", "#777777", rotate=True)
                continue
            shown = min(peak, limit)
            if row["oom"]:
                oom_bar(ax, x, width * 0.9, shown, colour)
            else:
                ax.bar(x, shown, width * 0.9, color=colour, edgecolor="black", linewidth=0.4,
                       zorder=2)
            if peak > limit:
                axis_break(ax, x, width * 0.9, shown * 0.93, 0.02 * ymax)
                ax.text(x, shown + 0.01 * ymax, f"{peak:.0f}\u2191", ha="center", va="bottom",
                        rotation=90, fontsize=6.5, color="#B00000")

    for capacity in capacities:
        ax.axhline(capacity, color="#B00000", linestyle=(0, (4, 3)), linewidth=0.9, zorder=3)
        ax.text(1.0, capacity, f" {capacity:g} GiB", transform=ax.get_yaxis_transform(),
                ha="left", va="center", fontsize=6.5, color="#B00000", clip_on=False)
    ax.set_ylim(0, ymax)
    ax.set_ylabel("Peak GPU memory (GiB)\n(max over stages)")
    model_ticks(ax, cluster, models)
    fig.suptitle(cluster.label, fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, columns)
    save(fig, path, written)


def breakdown_values(row):
    """Seconds per breakdown part (missing cells read as 0), or None if none is present."""
    comm = [row[c] for c in ("tp_exposed_s", "pp_exposed_s", "dp_exposed_s")]
    cells = {"compute_s": row["compute_s"], "recompute_s": row["recompute_s"],
             "comm_exposed_s": None if all(c is None for c in comm)
             else sum(c or 0.0 for c in comm),
             "bubble_s": row["bubble_s"], "recompute_overlapped_s": row["recompute_overlapped_s"]}
    if all(v is None for v in cells.values()):
        return None
    return {k: (v or 0.0) for k, v in cells.items()}


def plot_breakdown(cluster, path, written):
    models, strategies = cluster.models, cluster.strategies
    per_row = min(len(models), 4)
    n_rows = math.ceil(len(models) / per_row)
    fig, legend_ax, axes = figure_with_legend_row(n_rows, per_row, 0.75 + 2.3 * n_rows, 0.48)
    xs = list(range(len(strategies)))

    for index, model in enumerate(models):
        ax = axes[index // per_row][index % per_row]
        top = 0.0
        pending = []  # OOM / n/a markers, placed once the axis height is known
        for x, strategy in zip(xs, strategies):
            row = cluster.row(model, strategy)
            if row is None:
                continue
            values = None if row["oom"] else breakdown_values(row)
            if values is None:
                pending.append((x, "OOM" if row["oom"] else "n/a"))
                continue
            base = 0.0
            for key, _, colour, hatch in BREAKDOWN_PARTS:
                height = values[key]
                if height <= 0:
                    continue
                ax.bar(x, height, 0.7, bottom=base, color=colour, hatch=hatch,
                       edgecolor=OVERLAP_EDGE if hatch else "black",
                       linewidth=0.6 if hatch else 0.3, zorder=2)
                base += height
            top = max(top, base)
            if row["iteration_time_s"] is not None:
                ax.plot([x - 0.45, x + 0.45], [row["iteration_time_s"]] * 2, color="black",
                        linewidth=1.4, zorder=4, solid_capstyle="butt")
                top = max(top, row["iteration_time_s"])
        ymax = top * 1.08 if top > 0 else 1.0
        ax.set_ylim(0, ymax)
        if top <= 0:
            ax.set_yticks([])  # nothing ran: no scale to read
        for x, text in pending:
            if text == "OOM":
                oom_stub(ax, x, 0.7, 0.035 * ymax, "#444444")
            marker_text(ax, x, 0.05 * ymax, text,
                        "#B00000" if text == "OOM" else "#777777", rotate=True)
        ax.set_xticks(xs)
        ax.set_xticklabels([strategy_style(s)[1] for s in strategies], rotation=35,
                           ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.6, len(strategies) - 0.4)
        layout = parallel_label(cluster, model)
        ax.set_title(model_label(model) + (f"\n{layout}" if layout else ""), fontsize=8)
        if index % per_row == 0:
            ax.set_ylabel("Time per iteration (s)")
    for index in range(len(models), n_rows * per_row):
        axes[index // per_row][index % per_row].set_visible(False)

    handles = [Patch(facecolor=colour, hatch=hatch, linewidth=0.6 if hatch else 0.3,
                     edgecolor=OVERLAP_EDGE if hatch else "black", label=label)
               for _, label, colour, hatch in BREAKDOWN_PARTS]
    handles.append(Line2D([], [], color="black", linewidth=1.4, label="Iteration time"))
    fig.suptitle(f"{cluster.label}: where the slowest pipeline stage's iteration goes",
                 fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, 3)
    save(fig, path, written)


def plot_search_time(clusters, path, written):
    planners = ("lynx-heu", "lynx-opt")
    with_data = [c for c in clusters if any(s in c.strategies for s in planners)]
    shown = with_data or clusters
    fig, legend_ax, axes = figure_with_legend_row(len(shown), 1, 0.6 + 2.0 * len(shown), 0.28,
                                                  sharey=True)
    values = [r["search_seconds"] for c in shown for (_, s), r in c.by_key.items()
              if s in planners and r["search_seconds"] and r["search_seconds"] > 0]
    low = min(values) if values else 1e-2
    high = max(values) if values else 1.0
    # Headroom above the tallest bar for its rotated value label (1.3 decades).
    ylim = (10 ** math.floor(math.log10(low) - 0.3), high * 10 ** 1.3)
    width, offsets = group_positions(len(planners), 0.7)

    for ax, cluster in zip((row[0] for row in axes), shown):
        ax.set_yscale("log")
        ax.set_ylim(*ylim)
        ax.set_ylabel("Search time (s)")
        models = [m for m in cluster.models
                  if any(cluster.row(m, s) is not None for s in planners)]
        if not models:
            ax.text(0.5, 0.5, "no lynx-heu / lynx-opt runs", transform=ax.transAxes,
                    ha="center", va="center", color="#777777")
            ax.set_xticks([])
        for i, model in enumerate(models):
            for j, strategy in enumerate(planners):
                row = cluster.row(model, strategy)
                x = i + offsets[j]
                if row is None:
                    continue
                seconds = row["search_seconds"]
                if not seconds or seconds <= 0:
                    ax.text(x, ylim[0] * 1.3, "n/a", ha="center", va="bottom", rotation=90,
                            fontsize=6.5, color="#777777", fontweight="bold")
                    continue
                ax.bar(x, seconds, width * 0.9, color=strategy_style(strategy)[2],
                       edgecolor="black", linewidth=0.4, zorder=2)
                label = format_seconds(seconds)
                gap = row["solver_gap"]
                if strategy == "lynx-opt" and gap is not None and gap > 1e-9:
                    label += "\ngap \u221e" if math.isinf(gap) else f"\ngap {gap * 100:.1f}%"
                ax.text(x, seconds * 1.2, label, ha="center", va="bottom", rotation=90,
                        fontsize=6.5)
        if models:
            model_ticks(ax, cluster, models)
        ax.set_title(cluster.label, fontsize=8.5)
    fig.suptitle("Lynx planner search time", fontweight="bold", fontsize=9)
    handles = [Patch(facecolor=strategy_style(s)[2], edgecolor="black", linewidth=0.4,
                     label=strategy_style(s)[0] + (" (heuristic)" if s == "lynx-heu"
                                                   else " (MILP)")) for s in planners]
    draw_legend(legend_ax, handles, 2)
    save(fig, path, written)


# ----------------------------------------------------------------------------------------------


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(f"usage: {PROG} CSV OUTDIR", file=sys.stderr)
        return 2
    csv_path, out_dir = argv[1], argv[2]
    try:
        rows = read_results(csv_path)
    except CsvError as e:
        where = f"{csv_path}:{e.line}" if e.line > 0 else csv_path
        print(f"{PROG}: {where}: {e}", file=sys.stderr)
        return 2

    names = sorted({r["cluster"] for r in rows})
    clusters = [Cluster(n, [r for r in rows if r["cluster"] == n]) for n in names]
    tokens = [file_token(n) for n in names]
    if len(set(tokens)) != len(tokens):
        print(f"{PROG}: {csv_path}: cluster names {names} collide as file names", file=sys.stderr)
        return 2

    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        print(f"{PROG}: {out_dir}: cannot create: {e.strerror}", file=sys.stderr)
        return 2

    written = []
    with plt.rc_context(PAPER_RC):
        for cluster, token in zip(clusters, tokens):
            plot_throughput(cluster, os.path.join(out_dir, f"throughput_{token}.png"), written)
            plot_memory(cluster, os.path.join(out_dir, f"memory_{token}.png"), written)
            plot_breakdown(cluster, os.path.join(out_dir, f"breakdown_{token}.png"), written)
        plot_search_time(clusters, os.path.join(out_dir, "search_time.png"), written)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
