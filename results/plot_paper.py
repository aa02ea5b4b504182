#!/usr/bin/python3
"""Paper-style figures from the CSV that `lynxsim figures` writes.

Usage: plot_paper.py CSV OUTDIR

Writes into OUTDIR (created if missing), and prints each path written:
  throughput_<cluster>.png  tokens/s normalised to full recomputation, per model and strategy
                            (in tokens/s, saying so, when full was not run)
  memory_<cluster>.png      peak GPU memory per model and strategy, with the capacity line
  breakdown_<cluster>.png   where the slowest stage's iteration went (seconds), per model
  search_time.png           total planning time per planner (search + baseline simulation +
                            confirmations), log scale, all clusters

Bars are grouped by the strategy requested (`strategy_requested`); where the engine ran a
narrower plan (`strategy` differs) the bar is dotted and names the plan that ran. Columns are
read by name from the header (any order; extra columns are ignored); a malformed CSV (missing
column, bad number, duplicate row) is reported as one line "plot_paper.py: CSV:LINE: message"
on stderr with exit status 2.

Standard library + matplotlib only; runs headless (Agg). The output depends only on the CSV's
rows: inputs are sorted, figure size and dpi are fixed and no date is written into the images.
build_figures(rows) returns the figures without saving them (tests/results inspect their text).
"""

import csv
import math
import os
import sys
import textwrap
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PROG = "plot_paper.py"

# The columns the figures read, by name: how each cell is parsed and what needs it (for the
# error naming a missing column). Empty cells are allowed everywhere and read as None (a reduced
# or partly failed run leaves some empty), except the three key columns.
COLUMNS = {
    "cluster": ("str", "grouping"), "model": ("str", "grouping"),
    "strategy_requested": ("str", "grouping"), "strategy": ("str", "marking fallbacks"),
    "profile": ("str", "titles"), "gpu": ("str", "titles"), "parameters": ("int", "model order"),
    "tp": ("int", "layout labels"), "pp": ("int", "layout labels"), "dp": ("int", "layout labels"),
    "oom": ("bool", "every figure"), "iteration_time_s": ("float", "the breakdown figure"),
    "tokens_per_s": ("float", "the throughput figure"),
    "throughput_vs_full": ("float", "the throughput figure"),
    "peak_memory_bytes": ("int", "the memory figure"),
    "memory_capacity_bytes": ("int", "the memory figure"),
    "compute_s": ("float", "the breakdown figure"), "recompute_s": ("float", "the breakdown figure"),
    "recompute_overlapped_s": ("float", "the breakdown figure"),
    "contention_s": ("float", "the breakdown figure"),
    "tp_exposed_s": ("float", "the breakdown figure"), "pp_exposed_s": ("float", "the breakdown figure"),
    "dp_exposed_s": ("float", "the breakdown figure"), "bubble_s": ("float", "the breakdown figure"),
    "search_seconds": ("float", "the planning-time figure"),
    "baseline_seconds": ("float", "the planning-time figure"),
    "confirm_seconds": ("float", "the planning-time figure"),
    "solver_gap": ("float", "the planning-time figure"),
}
KEY_COLUMNS = ("cluster", "model", "strategy_requested")
# Columns read when present: the global batch joins the layout label (`figures --global-batch`).
OPTIONAL_COLUMNS = {"global_batch": ("int", "layout labels")}
# Columns that may hold infinity (a MILP without a bound reports an infinite gap).
INFINITE_OK_COLUMNS = {"solver_gap"}
GIB = float(1 << 30)

# Fixed strategy order, display names and colours (Okabe-Ito palette: colour-blind safe and
# distinguishable in grey-scale print by lightness). The names and order repeat
# lynx::kRecomputeKindNames (scenarios/scenario.hpp, the paper's bar order) on purpose: this is
# the figure's order, next to its styles, and the script reads only CSV.
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
    ("recompute_s", "Recompute, exposed", "#D55E00", None),
    ("comm_exposed_s", "Communication exposed (TP+PP+DP)", "#56B4E9", None),
    ("bubble_s", "Bubble / idle", "#C8C8C8", None),
    ("recompute_overlapped_s", "Recompute on the recompute stream", "#FFFFFF", "////"),
)
OVERLAP_EDGE = "#E69F00"  # hatch colour of the overlapped-recompute segment
# Contention (kernels slowed by sharing SMs with overlapped work) is part of compute +
# exposed recompute: drawn as a cross-hatched band at the top of those two segments.
CONTENTION_LABEL = "of which contention (overlap's cost)"
CONTENTION_EDGE = "white"  # the hatch of the contention band
FALLBACK_HATCH = "...."  # a bar whose plan is narrower than the one requested
PLANNERS = ("checkmate", "lynx-heu", "lynx-opt")

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
    kind = (COLUMNS.get(column) or OPTIONAL_COLUMNS[column])[0]
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
    if value < 0:
        raise CsvError(line, f"column '{column}': negative value '{text}'")
    return value


def csv_records(path, required, needed_for=lambda name: ""):
    """(line number, {column: cell}) for each data row of a CSV whose blank and '#' lines are
    skipped: the header names each column once and every `required` one (`needed_for(name)`
    says why in the message), every row has the header's field count; raises CsvError."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CsvError(0, f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise CsvError(0, "not UTF-8 text") from None
    header = None
    data_rows = 0
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
            missing = [name for name in required if name not in header]
            if missing:
                raise CsvError(number, f"missing column '{missing[0]}' in header{needed_for(missing[0])}"
                               + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
            continue
        if len(fields) != len(header):
            raise CsvError(number, f"expected {len(header)} fields as in the header, "
                                   f"got {len(fields)}")
        data_rows += 1
        yield number, dict(zip(header, fields))
    if header is None:
        raise CsvError(max(len(lines), 1), "no header row")
    if data_rows == 0:
        raise CsvError(len(lines), "no data rows")


def read_results(path):
    """Reads the CSV into a list of row dicts (typed cells plus '_line'); raises CsvError."""
    rows = []
    seen = {}
    for number, cells in csv_records(path, COLUMNS, lambda name: f", needed for {COLUMNS[name][1]}"):
        row = {"_line": number}
        for name, cell in cells.items():
            if name in COLUMNS or name in OPTIONAL_COLUMNS:
                row[name] = parse_cell(name, cell, number)
        for name in KEY_COLUMNS:
            if row[name] == "":
                raise CsvError(number, f"column '{name}' is empty")
        key = (row["cluster"], row["model"], row["strategy_requested"])
        if key in seen:
            raise CsvError(number, f"duplicate row for cluster '{key[0]}', model '{key[1]}', "
                                   f"strategy requested '{key[2]}' (first on line {seen[key]})")
        seen[key] = number
        if row["oom"] is None:
            row["oom"] = False
        if not row["strategy"]:
            row["strategy"] = row["strategy_requested"]  # no fallback recorded: it ran as asked
        for column, gib in (("peak_memory_bytes", "peak_memory_gib"),
                            ("memory_capacity_bytes", "memory_capacity_gib")):
            row[gib] = None if row[column] is None else row[column] / GIB
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------
# Organising


class Cluster:
    """Rows of one cluster, indexed by (model, strategy requested), with sorted models and
    strategies, and a label naming the hardware profile the runs were simulated on."""

    def __init__(self, name, rows):
        self.name = name
        self.by_key = {(r["model"], r["strategy_requested"]): r for r in rows}
        self.models = sort_models(rows)
        self.strategies = sort_strategies({r["strategy_requested"] for r in rows})
        gpus = sorted({r["gpu"] for r in rows if r["gpu"]})
        profiles = sorted({r["profile"] for r in rows if r["profile"]})
        hardware = ", ".join(gpus)
        if profiles:
            hardware += (" " if hardware else "") + f"(profile {', '.join(profiles)})"
        self.label = f"{name}: {hardware}" if hardware else name

    def row(self, model, strategy):
        return self.by_key.get((model, strategy))

    def capacities(self):
        return sorted({r["memory_capacity_gib"] for r in self.by_key.values()
                       if r["memory_capacity_gib"] is not None})

    def has_full(self):
        return any(s == "full" for (_, s) in self.by_key)

    def has_fallback(self):
        return any(fallback(r) for r in self.by_key.values())


def sort_models(rows):
    """Model names ordered by size (parameters), models without a size last, then by name."""
    size = {}
    for r in rows:
        if r["parameters"] is not None:
            size.setdefault(r["model"], r["parameters"])
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
    """'TP2·PP2·DP2' (with '·B512' when the CSV has global batches) when every strategy of this
    model ran the same layout, else ''."""
    layouts = {(r["tp"], r["pp"], r["dp"], r.get("global_batch")) for (m, _), r in cluster.by_key.items()
               if m == model}
    if len(layouts) != 1:
        return ""
    tp, pp, dp, batch = layouts.pop()
    if None in (tp, pp, dp):
        return ""
    return f"TP{tp}\u00b7PP{pp}\u00b7DP{dp}" + (f"\u00b7B{batch}" if batch is not None else "")


def fallback(row):
    """The plan that ran when the engine kept a narrower one than requested, else None."""
    ran = row["strategy"]
    return ran if ran and ran != row["strategy_requested"] else None


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


def note_lines(notes, width=128):
    """Notes wrapped for the figure's foot, one paragraph each."""
    return ["\n".join(textwrap.wrap(n, width)) for n in notes]


def figure_grid(height_in, legend_height_in, row_heights_in, n_cols, note_height_in=0.0):
    """A figure whose top grid row is an invisible axes holding the legend (constrained layout
    in matplotlib 3.6 ignores figure legends) and, optionally, a bottom row for notes.
    Returns (figure, grid, legend axes, note axes or None); plot rows are grid rows 1..n."""
    fig = plt.figure(figsize=(FULL_WIDTH_IN, height_in), layout="constrained")
    ratios = [legend_height_in] + list(row_heights_in) + ([note_height_in] if note_height_in else [])
    grid = fig.add_gridspec(len(ratios), n_cols, height_ratios=ratios)
    legend_ax = fig.add_subplot(grid[0, :])
    legend_ax.axis("off")
    note_ax = None
    if note_height_in:
        note_ax = fig.add_subplot(grid[len(ratios) - 1, :])
        note_ax.axis("off")
    return fig, grid, legend_ax, note_ax


def figure_with_legend_row(n_rows, n_cols, height_in, legend_height_in, sharey=False, notes=()):
    """figure_grid with n_rows × n_cols plot axes. Returns (figure, legend axes, 2-D list of
    plot axes); `notes` are written at the foot."""
    paragraphs = note_lines(notes)
    note_height = 0.12 + 0.13 * sum(p.count("\n") + 1 for p in paragraphs) if paragraphs else 0.0
    plot_height = (height_in - legend_height_in) / n_rows
    fig, grid, legend_ax, note_ax = figure_grid(height_in + note_height, legend_height_in,
                                                [plot_height] * n_rows, n_cols, note_height)
    axes = []
    first = None
    for r in range(n_rows):
        row_axes = []
        for c in range(n_cols):
            ax = fig.add_subplot(grid[r + 1, c], sharey=first if sharey else None)
            first = first or ax
            row_axes.append(ax)
        axes.append(row_axes)
    if note_ax is not None:
        write_notes(note_ax, paragraphs)
    return fig, legend_ax, axes


def write_notes(note_ax, paragraphs):
    note_ax.text(0.0, 1.0, "\n".join(paragraphs), transform=note_ax.transAxes, ha="left",
                 va="top", fontsize=6.5, color="#333333")


def fallback_handle():
    return Patch(facecolor="white", edgecolor="black", hatch=FALLBACK_HATCH, linewidth=0.4,
                 label="Engine kept a narrower plan (named on the bar)")


def fallback_label(ax, x, ymax, row):
    """Names the plan that ran inside a bar whose plan is narrower than the one requested."""
    ran = fallback(row)
    if ran:
        ax.text(x, 0.03 * ymax, f"ran {ran}", ha="center", va="bottom", rotation=90,
                fontsize=5.5, color="black", zorder=5,
                bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "none",
                      "alpha": 0.85})


def plain_bar(ax, x, height, width, colour, row):
    """A strategy's bar, dotted when the engine ran a narrower plan than requested."""
    ax.bar(x, height, width, color=colour, edgecolor="black", linewidth=0.4, zorder=2,
           hatch=FALLBACK_HATCH if fallback(row) else None)


def save(fig, path, written):
    # metadata Software=None keeps the matplotlib version out of the file, so the bytes depend
    # only on the drawing.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    written.append(path)


# ----------------------------------------------------------------------------------------------
# Figures


def figure_throughput(cluster):
    models, strategies = cluster.models, cluster.strategies
    normalised = cluster.has_full()
    handles = strategy_handles(strategies)
    if cluster.has_fallback():
        handles.append(fallback_handle())
    notes = []
    if not normalised:
        notes.append("Full recomputation was not run for this cluster, so there is nothing to "
                     "normalise to: the bars show tokens/s instead.")
    elif any(throughput_ratio(cluster, r) is None and not r["oom"] for r in cluster.by_key.values()):
        notes.append("n/a: full recomputation of that model did not fit in memory or was not "
                     "run, so there is nothing to normalise to.")
    columns, legend_height = legend_shape(len(handles), 4)
    fig, legend_ax, axes = figure_with_legend_row(1, 1, 2.7 + legend_height, legend_height,
                                                  notes=notes)
    ax = axes[0][0]
    width, offsets = group_positions(len(strategies))
    rotate = len(strategies) * len(models) > 14 or len(strategies) > 4

    def value(row):
        return throughput_ratio(cluster, row) if normalised else row["tokens_per_s"]

    values = [value(r) for r in cluster.by_key.values() if not r["oom"]]
    top = max([1.0 if normalised else 0.0] + [v for v in values if v is not None])
    ymax = max(1.25, top * (1.28 if rotate else 1.15)) if normalised else max(top, 1.0) * 1.28
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
            height = value(row)
            if height is None:
                marker_text(ax, x, 0.01 * ymax, "n/a", "#777777", rotate=True)
                continue
            plain_bar(ax, x, height, width * 0.9, colour, row)
            fallback_label(ax, x, ymax, row)
            if strategy.startswith("lynx"):
                text = f"{height:.2f}\u00d7" if normalised else f"{height / 1e3:.1f}k"
                ax.text(x, height + 0.01 * ymax, text, ha="center", va="bottom",
                        rotation=90 if rotate else 0, fontsize=6.5, color="black")

    if normalised:
        ax.axhline(1.0, color="black", linestyle=(0, (4, 3)), linewidth=0.8, zorder=3)
        ax.set_ylabel("Simulated throughput\nnormalised to full recomputation")
    else:
        ax.set_ylabel("Simulated throughput\n(tokens/s, not normalised)")
    ax.set_ylim(0, ymax)
    model_ticks(ax, cluster, models)
    fig.suptitle(f"Simulated throughput \u2014 {cluster.label}", fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, columns)
    return fig


def figure_memory(cluster):
    models, strategies = cluster.models, cluster.strategies
    handles = strategy_handles(strategies)
    handles.append(Line2D([], [], color="#B00000", linestyle=(0, (4, 3)), linewidth=0.9,
                          label="GPU capacity"))
    if any(r["oom"] and r["peak_memory_gib"] is not None for r in cluster.by_key.values()):
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="xxxx",
                             linewidth=0.4, label="Over capacity (OOM)"))
    if cluster.has_fallback():
        handles.append(fallback_handle())
    columns, legend_height = legend_shape(len(handles), 5)
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
                plain_bar(ax, x, shown, width * 0.9, colour, row)
            fallback_label(ax, x, ymax, row)
            if peak > limit:
                axis_break(ax, x, width * 0.9, shown * 0.93, 0.02 * ymax)
                ax.text(x, shown + 0.01 * ymax, f"{peak:.0f}\u2191", ha="center", va="bottom",
                        rotation=90, fontsize=6.5, color="#B00000")

    for capacity in capacities:
        ax.axhline(capacity, color="#B00000", linestyle=(0, (4, 3)), linewidth=0.9, zorder=3)
        ax.text(1.0, capacity, f" {capacity:g} GiB", transform=ax.get_yaxis_transform(),
                ha="left", va="center", fontsize=6.5, color="#B00000", clip_on=False)
    ax.set_ylim(0, ymax)
    ax.set_ylabel("Simulated peak GPU memory (GiB)\n(max over stages)")
    model_ticks(ax, cluster, models)
    fig.suptitle(f"Simulated peak memory \u2014 {cluster.label}", fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, columns)
    return fig


def breakdown_values(row):
    """Seconds per breakdown part (missing cells read as 0), or None if none is present."""
    comm = [row[c] for c in ("tp_exposed_s", "pp_exposed_s", "dp_exposed_s")]
    cells = {"compute_s": row["compute_s"], "recompute_s": row["recompute_s"],
             "comm_exposed_s": None if all(c is None for c in comm)
             else sum(c or 0.0 for c in comm),
             "bubble_s": row["bubble_s"], "recompute_overlapped_s": row["recompute_overlapped_s"]}
    if all(v is None for v in cells.values()):
        return None
    values = {k: (v or 0.0) for k, v in cells.items()}
    # Contention lies inside compute + exposed recompute; never more than them.
    values["contention_s"] = min(row["contention_s"] or 0.0,
                                 values["compute_s"] + values["recompute_s"])
    return values


def breakdown_drawable(cluster, model):
    """Whether some strategy of this model has a breakdown to draw (it fits and has cells)."""
    return any(r is not None and not r["oom"] and breakdown_values(r) is not None
               for r in (cluster.row(model, s) for s in cluster.strategies))


def panel_slots(n_panels):
    """(rows, panels per row) for n panels: at most 3 per row, rows as full as possible; the
    last row is centred rather than padded with empty panels."""
    rows = math.ceil(n_panels / 3)
    return rows, math.ceil(n_panels / rows)


def figure_breakdown(cluster):
    strategies = cluster.strategies
    models = [m for m in cluster.models if breakdown_drawable(cluster, m)]
    skipped = [m for m in cluster.models if m not in models]
    notes = []
    if skipped:
        def why(model):
            runs = [r for (m, _), r in cluster.by_key.items() if m == model]
            return "every strategy out of memory" if all(r["oom"] for r in runs) \
                else "no breakdown in the CSV"
        notes.append("Not shown: " + "; ".join(f"{model_label(m)} ({why(m)})" for m in skipped)
                     + ".")
    if any(fallback(r) for (m, _), r in cluster.by_key.items() if m in models):
        notes.append("\"ran X\" on a bar: the engine kept X, a narrower plan than the strategy "
                     "requested (it was faster, or the only one that fits).")
    paragraphs = note_lines(notes)
    note_height = 0.12 + 0.13 * sum(p.count("\n") + 1 for p in paragraphs) if paragraphs else 0.0
    n_rows, per_row = panel_slots(max(len(models), 1))
    row_height = 2.3
    fig, grid, legend_ax, note_ax = figure_grid(0.75 + row_height * n_rows + note_height, 0.48,
                                                [row_height] * n_rows, 2 * per_row, note_height)
    if note_ax is not None:
        write_notes(note_ax, paragraphs)
    xs = list(range(len(strategies)))
    if not models:
        ax = fig.add_subplot(grid[1, :])
        ax.axis("off")
        ax.text(0.5, 0.5, "No run of this cluster fits in memory: nothing to break down.",
                transform=ax.transAxes, ha="center", va="center", color="#777777")

    for index, model in enumerate(models):
        r, c = divmod(index, per_row)
        in_row = min(per_row, len(models) - r * per_row)
        start = (per_row - in_row) + 2 * c  # half-panel offset centres a shorter last row
        ax = fig.add_subplot(grid[r + 1, start:start + 2])
        top = 0.0
        pending = []  # OOM / n/a markers and fallback labels, placed once the height is known
        for x, strategy in zip(xs, strategies):
            row = cluster.row(model, strategy)
            if row is None:
                continue
            values = None if row["oom"] else breakdown_values(row)
            if values is None:
                pending.append((x, "OOM" if row["oom"] else "n/a", row))
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
            busy = values["compute_s"] + values["recompute_s"]
            if values["contention_s"] > 0:
                ax.bar(x, values["contention_s"], 0.7, bottom=busy - values["contention_s"],
                       facecolor="none", edgecolor=CONTENTION_EDGE, hatch="xxxx", linewidth=0,
                       zorder=3)
            top = max(top, base)
            if row["iteration_time_s"] is not None:
                ax.plot([x - 0.45, x + 0.45], [row["iteration_time_s"]] * 2, color="black",
                        linewidth=1.4, zorder=4, solid_capstyle="butt")
                top = max(top, row["iteration_time_s"])
            pending.append((x, None, row))
        ymax = top * 1.08 if top > 0 else 1.0
        ax.set_ylim(0, ymax)
        for x, text, row in pending:
            if text is None:
                fallback_label(ax, x, ymax, row)
                continue
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
        if start == 0 or index % per_row == 0:
            ax.set_ylabel("Simulated time per iteration (s)")

    handles = [Patch(facecolor=colour, hatch=hatch, linewidth=0.6 if hatch else 0.3,
                     edgecolor=OVERLAP_EDGE if hatch else "black", label=label)
               for _, label, colour, hatch in BREAKDOWN_PARTS]
    handles.append(Patch(facecolor="#0072B2", edgecolor=CONTENTION_EDGE, hatch="xxxx",
                         linewidth=0, label=CONTENTION_LABEL))
    handles.append(Line2D([], [], color="black", linewidth=1.4, label="Iteration time"))
    fig.suptitle(f"Simulated: where the slowest pipeline stage's iteration goes\n{cluster.label}",
                 fontweight="bold", fontsize=9)
    draw_legend(legend_ax, handles, 3)
    return fig


def planning_seconds(row):
    """Total planning time (search + baseline simulation + confirmations), or None."""
    parts = [row[c] for c in ("search_seconds", "baseline_seconds", "confirm_seconds")]
    if all(p is None for p in parts):
        return None
    total = sum(p or 0.0 for p in parts)
    return total if total > 0 else None


def shortcut_cases(clusters):
    """(cluster, model) where Lynx-OPT's search took less time than Lynx-HEU's."""
    cases = []
    for cluster in clusters:
        for model in cluster.models:
            heu, opt = cluster.row(model, "lynx-heu"), cluster.row(model, "lynx-opt")
            if heu is None or opt is None:
                continue
            if heu["search_seconds"] and opt["search_seconds"] and \
                    opt["search_seconds"] < heu["search_seconds"]:
                cases.append((cluster.name, model))
    return cases


def figure_search_time(clusters):
    planners = [p for p in PLANNERS if any(p in c.strategies for c in clusters)]
    shown = [c for c in clusters if any(s in c.strategies for s in planners)] or clusters
    notes = ["Wall-clock time of lynxsim on the machine that ran `lynxsim figures` (not "
             "simulated time). The wide bar is the total; the narrow black bar inside it is "
             "the search alone; the rest is engine runs (the keep-everything baseline that "
             "measures the overlap windows, and the confirmations)."]
    cases = shortcut_cases(shown)
    if cases:
        where = ", ".join(f"{model_label(m)} ({c})" for c, m in cases)
        notes.append(f"Lynx-OPT searches faster than Lynx-HEU on {where}: there every layer's "
                     "fastest option fits the memory budget together, so the MILP planner "
                     "answers exactly without calling CBC (its short cut in "
                     "strategies/milp_planner.cpp), while the heuristic always scans all its "
                     "(B, A, A\u2032, j) combinations.")
    fig, legend_ax, axes = figure_with_legend_row(len(shown), 1, 0.6 + 2.0 * len(shown), 0.28,
                                                  sharey=True, notes=notes)
    totals = [planning_seconds(r) for c in shown for (_, s), r in c.by_key.items()
              if s in planners]
    searches = [r["search_seconds"] for c in shown for (_, s), r in c.by_key.items()
                if s in planners and r["search_seconds"]]
    values = [v for v in totals + searches if v and v > 0]
    low = min(values) if values else 1e-2
    high = max(values) if values else 1.0
    # Headroom above the tallest bar for its rotated value label (1.3 decades).
    ylim = (10 ** math.floor(math.log10(low) - 0.3), high * 10 ** 1.3)
    width, offsets = group_positions(max(len(planners), 1), 0.7)

    for ax, cluster in zip((row[0] for row in axes), shown):
        ax.set_yscale("log")
        ax.set_ylim(*ylim)
        ax.set_ylabel("Planning time (s)")
        models = [m for m in cluster.models
                  if any(cluster.row(m, s) is not None for s in planners)]
        if not models:
            ax.text(0.5, 0.5, "no checkmate / lynx-heu / lynx-opt runs", transform=ax.transAxes,
                    ha="center", va="center", color="#777777")
            ax.set_xticks([])
        for i, model in enumerate(models):
            for j, strategy in enumerate(planners):
                row = cluster.row(model, strategy)
                x = i + offsets[j]
                if row is None:
                    continue
                total = planning_seconds(row)
                if total is None:
                    ax.text(x, ylim[0] * 1.3, "n/a", ha="center", va="bottom", rotation=90,
                            fontsize=6.5, color="#777777", fontweight="bold")
                    continue
                ax.bar(x, total, width * 0.9, color=strategy_style(strategy)[2],
                       edgecolor="black", linewidth=0.4, zorder=2)
                search = row["search_seconds"]
                if search and search > 0:
                    ax.bar(x, search, width * 0.3, color="black", linewidth=0, zorder=3)
                label = format_seconds(total)
                gap = row["solver_gap"]
                if strategy != "lynx-heu" and gap is not None and gap > 1e-9:
                    label += "\ngap \u221e" if math.isinf(gap) else f"\ngap {gap * 100:.1f}%"
                ax.text(x, total * 1.2, label, ha="center", va="bottom", rotation=90,
                        fontsize=6.5)
        if models:
            model_ticks(ax, cluster, models)
        ax.set_title(cluster.label, fontsize=8.5)
    fig.suptitle("Planning time per planner: search + baseline simulation + confirmations",
                 fontweight="bold", fontsize=9)
    kinds = {"checkmate": " (MILP, no overlap)", "lynx-heu": " (heuristic)", "lynx-opt": " (MILP)"}
    handles = [Patch(facecolor=strategy_style(s)[2], edgecolor="black", linewidth=0.4,
                     label=strategy_style(s)[0] + kinds[s]) for s in planners]
    handles.append(Patch(facecolor="black", label="of which search"))
    draw_legend(legend_ax, handles, len(handles))
    return fig


# ----------------------------------------------------------------------------------------------


def build_figures(rows):
    """(file name, figure) for every figure the rows give, unsaved; raises ValueError when
    cluster names collide as file names."""
    names = sorted({r["cluster"] for r in rows})
    clusters = [Cluster(n, [r for r in rows if r["cluster"] == n]) for n in names]
    tokens = [file_token(n) for n in names]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"cluster names {names} collide as file names")
    figures = []
    with plt.rc_context(PAPER_RC):
        for cluster, token in zip(clusters, tokens):
            figures.append((f"throughput_{token}.png", figure_throughput(cluster)))
            figures.append((f"memory_{token}.png", figure_memory(cluster)))
            figures.append((f"breakdown_{token}.png", figure_breakdown(cluster)))
        figures.append(("search_time.png", figure_search_time(clusters)))
    return figures


def plot_main(argv, prog, csv_name, read, build, rc):
    """The command line of the plot scripts: `prog CSV OUTDIR`. read(path) gives the rows (CsvError
    names the line), build(rows) the (file name, figure) pairs drawn under the rc settings, a list
    or a generator (ValueError: the data cannot be drawn); the PNGs are written into OUTDIR and
    their paths printed."""
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(f"usage: {prog} {csv_name} OUTDIR", file=sys.stderr)
        return 2
    csv_path, out_dir = argv[1], argv[2]
    try:
        rows = read(csv_path)
    except CsvError as e:
        where = f"{csv_path}:{e.line}" if e.line > 0 else csv_path
        print(f"{prog}: {where}: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        print(f"{prog}: {out_dir}: cannot create: {e.strerror}", file=sys.stderr)
        return 2

    written = []
    try:
        with plt.rc_context(rc):  # build may yield figures one by one: each is saved and closed
            for name, fig in build(rows):
                save(fig, os.path.join(out_dir, name), written)
    except ValueError as e:
        print(f"{prog}: {csv_path}: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


def main(argv):
    return plot_main(argv, PROG, "CSV", read_results, build_figures, PAPER_RC)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
