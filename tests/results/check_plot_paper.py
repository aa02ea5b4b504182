#!/usr/bin/python3
"""CTest driver for results/plot_paper.py (run from the repository root).

  check_plot_paper.py render PLOT CSV CLUSTER[,CLUSTER...]
      PLOT must exit 0 and print exactly the files it wrote: throughput_/memory_/breakdown_<c>.png
      for each named cluster plus search_time.png, nothing else in the folder; each a valid PNG
      (signature, IHDR at least 600x300 px) and non-trivial (> 25 KB); a second run into another
      folder must give byte-identical files (deterministic output).

  check_plot_paper.py malformed PLOT CSV LINE [TEXT]
      PLOT must exit 2, print one stderr line starting "plot_paper.py: CSV:LINE: " (and
      containing TEXT, e.g. the missing column's name) and write no PNG.

  check_plot_paper.py inspect PLOT CSV CHECK[,CHECK...]
      Imports PLOT, builds its figures from CSV without saving them and checks what they say
      (the text artists and the bars drawn). CHECKs: simulated, fallback, no_full, shortcut,
      no_empty_panels, columns_by_name (the last renders CSV and a copy with its columns
      reversed plus an extra column, and compares the PNG bytes).

Exits 0 when every check holds, else prints each failure and exits 1.
"""

import csv
import importlib.util
import os
import struct
import subprocess
import sys
import tempfile

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 25_000  # at 7 in x 200 dpi a blank figure is ~5 KB, one empty axes frame ~17 KB
MIN_WIDTH_PX, MIN_HEIGHT_PX = 600, 300

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def run_plot(plot, csv_path, out_dir):
    return subprocess.run([sys.executable, plot, csv_path, out_dir], capture_output=True,
                          text=True, timeout=300)


def png_size(path):
    """(width, height) from the IHDR chunk, or None if the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def render(plot, csv_path, clusters):
    expected = sorted([f"{kind}_{c}.png" for c in clusters
                       for kind in ("throughput", "memory", "breakdown")] + ["search_time.png"])
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        out_dir = os.path.join(first, "figures")  # not yet there: the script must create it
        result = run_plot(plot, csv_path, out_dir)
        if not check(result.returncode == 0,
                     f"exit status {result.returncode}, stderr: {result.stderr.strip()}"):
            return
        printed = sorted(os.path.basename(line) for line in result.stdout.split())
        check(printed == expected, f"printed files {printed}, expected {expected}")
        present = sorted(os.listdir(out_dir))
        check(present == expected, f"folder holds {present}, expected {expected}")
        for name in expected:
            path = os.path.join(out_dir, name)
            if not check(os.path.isfile(path), f"{name} missing"):
                continue
            size = png_size(path)
            if not check(size is not None, f"{name} is not a PNG (signature/IHDR)"):
                continue
            check(size[0] >= MIN_WIDTH_PX and size[1] >= MIN_HEIGHT_PX,
                  f"{name} is only {size[0]}x{size[1]} px")
            check(os.path.getsize(path) > MIN_PNG_BYTES,
                  f"{name} is only {os.path.getsize(path)} bytes")

        again = run_plot(plot, csv_path, second)
        if check(again.returncode == 0, f"second run exit status {again.returncode}"):
            for name in expected:
                a, b = os.path.join(out_dir, name), os.path.join(second, name)
                if os.path.isfile(a) and os.path.isfile(b):
                    with open(a, "rb") as fa, open(b, "rb") as fb:
                        check(fa.read() == fb.read(), f"{name} differs between two runs")


def malformed(plot, csv_path, line, text=None):
    with tempfile.TemporaryDirectory() as out_dir:
        result = run_plot(plot, csv_path, out_dir)
        check(result.returncode == 2, f"exit status {result.returncode}, expected 2")
        lines = result.stderr.strip().splitlines()
        prefix = f"plot_paper.py: {csv_path}:{line}: "
        check(len(lines) == 1, f"expected one stderr line, got {lines}")
        check(bool(lines) and lines[0].startswith(prefix),
              f"stderr {lines} does not start with '{prefix}'")
        if text is not None:
            check(bool(lines) and text in lines[0], f"stderr {lines} does not name '{text}'")
        check(not any(n.endswith(".png") for n in os.listdir(out_dir)),
              "PNG files written despite the error")


# ----------------------------------------------------------------------------------------------
# inspect: what the figures say, read from the unsaved matplotlib figures


def load_plot(plot):
    spec = importlib.util.spec_from_file_location("plot_paper_under_test", plot)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def texts(fig):
    """Every string the figure shows: titles, labels, ticks, legend entries, notes."""
    import matplotlib.text
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def has_text(fig, fragment):
    return any(fragment in t for t in texts(fig))


def plot_axes(fig):
    """The figure's visible data axes (the legend and note rows are axes with the axis off)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison]


def bars(ax):
    import matplotlib.patches
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


def inspect(plot, csv_path, checks):
    module = load_plot(plot)
    rows = module.read_results(csv_path)
    figures = dict(module.build_figures(rows))
    clusters = sorted({r["cluster"] for r in rows})
    per_cluster = [(c, figures[f"throughput_{c}.png"], figures[f"memory_{c}.png"],
                    figures[f"breakdown_{c}.png"]) for c in clusters]
    search = figures["search_time.png"]
    for name in checks:
        if name == "simulated":
            for cluster, *figs in per_cluster:
                profiles = sorted({r["profile"] for r in rows if r["cluster"] == cluster})
                for fig in figs:
                    title = fig._suptitle.get_text() if fig._suptitle else ""
                    check("Simulated" in title, f"{cluster}: title '{title}' lacks 'Simulated'")
                    for profile in profiles:
                        check(profile in title, f"{cluster}: title '{title}' lacks profile {profile}")
            check(has_text(search, "not simulated time"), "search_time does not say it is wall time")
        elif name == "fallback":
            fallbacks = [r for r in rows if r["strategy"] and r["strategy"] != r["strategy_requested"]]
            check(bool(fallbacks), "the CSV has no fallback row to check")
            for cluster, throughput, memory, breakdown in per_cluster:
                for r in fallbacks:
                    if r["cluster"] != cluster:
                        continue
                    for kind, fig in (("throughput", throughput), ("memory", memory),
                                      ("breakdown", breakdown)):
                        check(has_text(fig, f"ran {r['strategy']}"),
                              f"{kind}_{cluster}: fallback to {r['strategy']} not named")
                # Bars are grouped by the strategy requested: one dotted bar per fallback.
                dotted = [b for ax in plot_axes(throughput) for b in bars(ax)
                          if b.get_hatch() == module.FALLBACK_HATCH]
                expected = sum(1 for r in fallbacks if r["cluster"] == cluster and not r["oom"])
                check(len(dotted) == expected,
                      f"throughput_{cluster}: {len(dotted)} dotted bars, expected {expected}")
                check(has_text(throughput, "narrower plan"), f"throughput_{cluster}: no legend entry")
        elif name == "no_full":
            for cluster, throughput, _, _ in per_cluster:
                check(has_text(throughput, "Full recomputation was not run"),
                      f"throughput_{cluster} does not say full was not run")
                drawn = [b for ax in plot_axes(throughput) for b in bars(ax) if b.get_height() > 0]
                check(len(drawn) >= 2, f"throughput_{cluster} is empty ({len(drawn)} bars)")
                check(has_text(throughput, "tokens/s"), f"throughput_{cluster}: axis not in tokens/s")
        elif name == "shortcut":
            check(has_text(search, "short cut"), "search_time does not explain the MILP's short cut")
            check(has_text(search, "GPT-1.3B (pcie)"), "search_time does not name GPT-1.3B (pcie)")
            check(not has_text(search, "GPT-2.7B (pcie)"), "search_time names GPT-2.7B, where OPT is slower")
            check(has_text(search, "search + baseline simulation + confirmations"),
                  "search_time does not say it shows total planning time")
        elif name == "no_empty_panels":
            for cluster, _, _, breakdown in per_cluster:
                models = {r["model"] for r in rows if r["cluster"] == cluster}
                drawable = {m for m in models
                            if any(r["model"] == m and not r["oom"] and r["compute_s"] is not None
                                   for r in rows if r["cluster"] == cluster)}
                axes = plot_axes(breakdown)
                check(len(axes) == len(drawable),
                      f"breakdown_{cluster}: {len(axes)} panels for {len(drawable)} models with data")
                for ax in axes:
                    check(any(b.get_height() > 0 for b in bars(ax)),
                          f"breakdown_{cluster}: panel '{ax.get_title()}' is empty")
                for m in sorted(models - drawable):
                    check(has_text(breakdown, "Not shown") and has_text(breakdown, module.model_label(m)),
                          f"breakdown_{cluster}: {m} is left out without a note")
        elif name == "columns_by_name":
            columns_by_name(plot, csv_path)
        else:
            check(False, f"unknown check '{name}'")
    import matplotlib.pyplot as plt
    plt.close("all")


def columns_by_name(plot, csv_path):
    """The same rows with the columns in reverse order and an extra column draw the same PNGs."""
    with open(csv_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    data = [l for l in lines if l.strip() and not l.lstrip().startswith("#")]
    table = list(csv.reader(data))
    shuffled = [["extra_column"] + row[::-1] for row in table[:1]] + \
               [["ignored"] + row[::-1] for row in table[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "reordered.csv")
        with open(copy, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(shuffled)
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        ra, rb = run_plot(plot, csv_path, a), run_plot(plot, copy, b)
        if not check(ra.returncode == 0 and rb.returncode == 0,
                     f"exit status {ra.returncode} / {rb.returncode}: {rb.stderr.strip()}"):
            return
        names = sorted(os.listdir(a))
        check(names == sorted(os.listdir(b)), "reordered columns give other files")
        for name in names:
            with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
                check(fa.read() == fb.read(), f"{name} differs when the columns are reordered")


def main(argv):
    modes = {"render": 5, "malformed": (5, 6), "inspect": 5}
    if len(argv) < 2 or argv[1] not in modes or len(argv) not in (
            modes[argv[1]] if isinstance(modes[argv[1]], tuple) else (modes[argv[1]],)):
        print(__doc__, file=sys.stderr)
        return 2
    mode, plot, csv_path, last = argv[1:5]
    if mode == "render":
        render(plot, csv_path, [c for c in last.split(",") if c])
    elif mode == "inspect":
        inspect(plot, csv_path, [c for c in last.split(",") if c])
    else:
        malformed(plot, csv_path, int(last), argv[5] if len(argv) == 6 else None)
    for message in failures:
        print(f"FAIL: {message}")
    print("ok" if not failures else f"{len(failures)} check(s) failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
