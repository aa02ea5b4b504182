#!/usr/bin/python3
"""CTest driver for results/plot_maps.py (run from the repository root).

  check_plot_maps.py render PLOT CSV NAME[,NAME...]
      PLOT must exit 0 and print exactly the files it wrote (NAME.png each, nothing else in
      the folder), valid PNGs of sensible size, byte-identical on a second run; the figures
      say "Simulated", mark OOM and Lynx-only cells, count the invalid cells with their reason
      and list the exact-mode confirmations.

  check_plot_maps.py malformed PLOT CSV LINE
      PLOT must exit 2 with one stderr line "plot_maps.py: CSV:LINE: ..." and write no PNG.

Exits 0 when every check holds, else prints each failure and exits 1.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(plot, csv_path, out_dir):
    return subprocess.run([sys.executable, plot, csv_path, out_dir], capture_output=True, text=True, timeout=300)


def texts_of(plot, csv_path):
    spec = importlib.util.spec_from_file_location("plot_maps", plot)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.read_cells(csv_path)
    groups = {}
    for row in rows:
        groups.setdefault((row["map"], row["variant"]), []).append(row)
    out = []
    with module.plt.rc_context(module.RC):
        for cells in groups.values():
            fig = module.figure(cells)
            out.append(" | ".join(t.get_text() for t in fig.findobj(module.matplotlib.text.Text)))
            module.plt.close(fig)
    return out


def render(plot, csv_path, names):
    expected = sorted(f"{n}.png" for n in names)
    outputs = []
    for _ in range(2):
        out_dir = tempfile.mkdtemp(prefix="plot_maps_")
        result = run(plot, csv_path, out_dir)
        check(result.returncode == 0, f"exit status {result.returncode}: {result.stderr.strip()}")
        printed = sorted(os.path.basename(p) for p in result.stdout.split())
        check(printed == expected, f"printed {printed}, expected {expected}")
        check(sorted(os.listdir(out_dir)) == expected, f"wrote {sorted(os.listdir(out_dir))}")
        files = {}
        for name in expected:
            path = os.path.join(out_dir, name)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            check(data[:8] == PNG_SIGNATURE, f"{name}: not a PNG")
            check(len(data) > 25_000, f"{name}: only {len(data)} bytes")
            files[name] = data
        outputs.append(files)
    check(outputs[0] == outputs[1], "two runs gave different bytes")
    texts = " || ".join(texts_of(plot, csv_path))
    for needle in ("Simulated", "OOM", "Lynx\nonly", "Blank: 2 invalid cells", "Outlined, exact mode at",
                   "best Megatron", "checkmate"):
        check(needle in texts, f"no text '{needle}' in the figures")


def malformed(plot, csv_path, line):
    out_dir = tempfile.mkdtemp(prefix="plot_maps_bad_")
    result = run(plot, csv_path, out_dir)
    check(result.returncode == 2, f"exit status {result.returncode}, expected 2")
    lines = result.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith(f"plot_maps.py: {csv_path}:{line}: "),
          f"stderr {result.stderr.strip()!r}")
    check(not os.listdir(out_dir), "wrote files for a malformed CSV")


def main(argv):
    mode, plot, csv_path, arg = argv[1], argv[2], argv[3], argv[4]
    if mode == "render":
        render(plot, csv_path, arg.split(","))
    elif mode == "malformed":
        malformed(plot, csv_path, int(arg))
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
