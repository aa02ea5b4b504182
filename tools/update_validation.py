#!/usr/bin/env python3
"""Regenerates VALIDATION.md's results: replaces the block between the BEGIN/END markers with
the output of `lynxsim validate --report validate/data/datasets.yaml`. Run from anywhere after
a change that moves predictions: tools/update_validation.py [LYNXSIM_BINARY] (default
build/lynxsim). Exits non-zero, leaving the file alone, if the markers are missing."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFEST = "validate/data/datasets.yaml"
BEGIN = f"<!-- BEGIN lynxsim validate --report {MANIFEST} -->"
END = f"<!-- END lynxsim validate --report {MANIFEST} -->"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "lynxsim")
    path = ROOT / "VALIDATION.md"
    text = path.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        sys.exit(f"{path}: the markers {BEGIN!r} and {END!r} are missing")
    report = subprocess.run([binary, "validate", "--report", MANIFEST], cwd=ROOT, check=True,
                            stdout=subprocess.PIPE, text=True).stdout
    path.write_text(text[:start + len(BEGIN)] + "\n" + report + text[end:])
    print(f"{path}: results regenerated")


if __name__ == "__main__":
    main()
