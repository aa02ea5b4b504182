#!/usr/bin/python3
"""Tracked files state what holds today: none names the work that made it (a work session, a
round of work, a helper or the lead, a work branch). A comment says why the code is as it is
and cites a source or a measurement by what it is; the history is in git. Every file git
tracks is read, binary files (a NUL byte) excepted; the patterns below are the only rule."""
import os
import re
import subprocess
import sys

# Each pattern names one kind of mention; matched case-insensitively on every line.
PATTERNS = [
    ("a work session", r"\bsessions?\s+[0-9]+"),
    ("a work session", r"\b(this|that|each|every|last|next|previous|earlier|later|one|a|the)\s+session\b"),
    ("a round of work", r"\bround\s+(one|two|three|four|five|[0-9]+)\b"),
    ("a round of work", r"\b(first|second|third|fourth|fifth|later|earlier|previous)\s+round\b"),
    ("a helper", r"\bhelpers?\s+h[0-9]"),
    ("a helper or the lead", r"\b(helper|lead)'s\s+(run|build|branch|measurement)"),
    ("a work branch", r"(?-i:\bh[0-9]+[a-z]{3,}[0-9]*\b)"),  # lower case: not a GPU name
    ("a work branch", r"\bmerged main\b"),
]
COMPILED = [(what, re.compile(pattern, re.IGNORECASE)) for what, pattern in PATTERNS]


def tracked_files(root):
    """The files git tracks under root; every file below it when root is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [name for name in out.decode("utf-8").split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
            names += [os.path.relpath(os.path.join(folder, f), root) for f in files]
        return names


def mentions(root):
    hits = []
    for name in tracked_files(root):
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue  # deleted in the working tree, or a submodule
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data:
            continue  # binary
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in COMPILED:
                match = pattern.search(line)
                if match:
                    hits.append(f"{name}:{number}: {what}: '{match.group(0)}'")
    return hits


def main(root):
    hits = mentions(root)
    if hits:
        sys.exit(f"FAIL: {len(hits)} mentions of the work history in tracked files:\n" + "\n".join(hits))
    print("no work history in tracked files: ok")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
