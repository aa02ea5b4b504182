#!/usr/bin/python3
"""The repository refers to nothing outside itself: no ../shared paths, no design notes that
live elsewhere, no machine paths. calibrate/measurements/ is exempt: its CSVs record the
command lines that really ran on the GPU machine."""
import os
import sys

FORBIDDEN = ("../shared", "shared/validation", "DESIGN.md", "STYLE.md", "KINDS.md", "/work/")
SKIP_DIRS = {".git", "__pycache__", "out"}
EXEMPT = (os.path.join("calibrate", "measurements"), os.path.join("tests", "repo"))


def main(root):
    hits = []
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        if rel.startswith(EXEMPT):
            continue
        for name in files:
            # A git worktree's `.git` is a file naming the main checkout: not repository content.
            if name.endswith((".png", ".pdf")) or name == ".git":
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        for word in FORBIDDEN:
                            if word in line:
                                hits.append(f"{os.path.relpath(path, root)}:{number}: '{word}'")
            except UnicodeDecodeError:
                continue
    if hits:
        sys.exit("FAIL: references outside the repository:\n" + "\n".join(hits))
    print("self-contained: ok")


if __name__ == "__main__":
    main(sys.argv[1])
