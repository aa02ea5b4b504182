#!/usr/bin/python3
"""CTest driver for results/plot_paper.py (run from the repository root).

  check_plot_paper.py render PLOT CSV CLUSTER[,CLUSTER...]
      PLOT must exit 0 and print exactly the files it wrote: throughput_/memory_/breakdown_<c>.png
      for each named cluster plus search_time.png, nothing else in the folder; each a valid PNG
      (signature, IHDR at least 600x300 px) and non-trivial (> 25 KB); a second run into another
      folder must give byte-identical files (deterministic output).

  check_plot_paper.py malformed PLOT CSV LINE
      PLOT must exit 2, print one stderr line starting "plot_paper.py: CSV:LINE: " and write no
      PNG.

Exits 0 when every check holds, else prints each failure and exits 1.
"""

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


def malformed(plot, csv_path, line):
    with tempfile.TemporaryDirectory() as out_dir:
        result = run_plot(plot, csv_path, out_dir)
        check(result.returncode == 2, f"exit status {result.returncode}, expected 2")
        lines = result.stderr.strip().splitlines()
        prefix = f"plot_paper.py: {csv_path}:{line}: "
        check(len(lines) == 1, f"expected one stderr line, got {lines}")
        check(bool(lines) and lines[0].startswith(prefix),
              f"stderr {lines} does not start with '{prefix}'")
        check(not any(n.endswith(".png") for n in os.listdir(out_dir)),
              "PNG files written despite the error")


def main(argv):
    if len(argv) != 5 or argv[1] not in ("render", "malformed"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, plot, csv_path, last = argv[1:]
    if mode == "render":
        render(plot, csv_path, [c for c in last.split(",") if c])
    else:
        malformed(plot, csv_path, int(last))
    for message in failures:
        print(f"FAIL: {message}")
    print("ok" if not failures else f"{len(failures)} check(s) failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
