#!/usr/bin/python3
"""Hostile inputs to the lynxsim command line, one case of cases.json per CTest test.

Each case runs lynxsim under an address-space limit (1 GiB by default, or the case's
`limit_mib`), so a run that would reach for gigabytes dies with bad_alloc instead of passing, and
checks the exit status, the error code (`code`: the line reads "lynxsim: error CODE (name): "),
that the one-line message names the key or file (`expect`), that nothing aborted or reported an
internal error, and prints the wall time and peak RSS (issue 14's target: <= 1 s, <= 256 MiB;
time is reported, not asserted). `env` adds environment variables. In `expect`, {at:FILE:KEY}
is the LINE:COL of KEY's value (a dotted path, "scenario.model.seq_len") in FILE of the case's
folder as the setup wrote it, so a message's position follows the plan file's layout. tests/errors/cases.json (one
case per error code) runs through this script too, with --cases.

Usage: run_hostile.py LYNXSIM CASE [--limit-mib N] [--cases FILE]   (CASE "all": every case)
A case with `limit_mib` needs the limit: with --limit-mib 0 (sanitizer builds) it is skipped
(exit status 77). A case with `"needs": "mpi"` is skipped the same way under --without-mpi (a
lynxsim built without MPI refuses those command lines earlier, with another code).
"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


SKIPPED = 77


def load_cases(path):
    with open(path, encoding="utf-8") as f:
        return {c["name"]: c for c in json.load(f)}


def run_limited(argv, limit_bytes, env):
    """(returncode, output, wall seconds, peak RSS MiB) of argv under RLIMIT_AS."""
    def limit():
        # 0: no address-space limit (sanitizer builds reserve terabytes of shadow address space).
        if limit_bytes > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=limit, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.decode(errors="replace"), wall, usage.ru_maxrss / 1024.0


def value_at(text, key):
    """LINE:COL (1-based) of the value of the dotted `key` in block YAML, or None."""
    sections = []  # (indent, name) of the sections above the line
    for line_no, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" ")
        if not stripped or stripped[0] in "#-" or ":" not in stripped:
            continue
        indent = len(line) - len(stripped)
        while sections and sections[-1][0] >= indent:
            sections.pop()
        name = stripped[: stripped.index(":")]
        colon = indent + len(name)
        rest = line[colon + 1:]
        value = colon + 1 + (len(rest) - len(rest.lstrip(" "))) if rest.strip() else None
        if ".".join([s[1] for s in sections] + [name]) == key:
            return f"{line_no}:{(value if value is not None else colon + 1) + 1}"
        if value is None:
            sections.append((indent, name))
    return None


def run_case(binary, case, limit_bytes):
    with tempfile.TemporaryDirectory(prefix="hostile_") as tmp:
        sub = lambda s: s.replace("{tmp}", tmp)
        for name, text in case.get("files", {}).items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
        for name, size in case.get("sparse", {}).items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.truncate(size)
        for setup in case.get("setup", []):
            p = subprocess.run([binary, *map(sub, setup)], capture_output=True, text=True)
            if p.returncode != 0:
                return f"setup {setup} failed: {p.stderr.strip()}", None
        if "edit" in case:
            e = case["edit"]
            path = os.path.join(tmp, e["file"])
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if e["from"] not in text:
                return f"edit: '{e['from']}' not in {e['file']}", None
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(e["from"], e["to"], 1))
        env = dict(os.environ, **{k: sub(v) for k, v in case.get("env", {}).items()})
        rc, out, wall, rss = run_limited([binary, *map(sub, case["args"])], limit_bytes, env)
        stats = (rc, wall, rss)
        expected_rc = case.get("exit", "nonzero")
        if rc < 0:
            return f"killed by signal {-rc}: {out[-500:]}", stats
        if expected_rc == "nonzero" and rc == 0:
            return f"exited 0, expected an error: {out[-500:]}", stats
        if expected_rc != "nonzero" and rc != expected_rc:
            return f"exited {rc}, expected {expected_rc}: {out[-500:]}", stats
        for bad in ("bad_alloc", "internal", "terminate called", "Aborted", "Segmentation"):
            if bad in out:
                return f"output contains '{bad}': {out[-500:]}", stats
        if expected_rc == "nonzero":
            errors = [l for l in out.splitlines() if l.startswith("lynxsim: error")]
            if len(errors) != 1:
                return f"expected one 'lynxsim: error' line, got {len(errors)}: {out[-500:]}", stats
            out = errors[0]
            if "code" in case and not out.startswith(f"lynxsim: error {case['code']} ("):
                return f"expected error code {case['code']}: {out[-500:]}", stats
        def at(match):
            with open(os.path.join(tmp, match.group(1)), encoding="utf-8") as f:
                position = value_at(f.read(), match.group(2))
            return position if position else f"<no key {match.group(2)} in {match.group(1)}>"
        for want in case.get("expect", []):
            want = re.sub(r"\{at:([^:}]+):([^}]+)\}", at, sub(want))
            if want not in out:
                return f"message lacks '{want}': {out[-500:]}", stats
        return None, stats


def main():
    args = sys.argv[1:]
    limit_mib = 1024
    cases_path = os.path.join(HERE, "cases.json")
    if "--limit-mib" in args:
        i = args.index("--limit-mib")
        limit_mib = int(args[i + 1])
        del args[i:i + 2]
    without_mpi = "--without-mpi" in args
    if without_mpi:
        args.remove("--without-mpi")
    if "--cases" in args:
        i = args.index("--cases")
        cases_path = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    binary, name = args
    cases = load_cases(cases_path)
    names = list(cases) if name == "all" else [name]
    failed = False
    for n in names:
        if n not in cases:
            sys.exit(f"unknown case '{n}' (cases: {', '.join(cases)})")
        if "limit_mib" in cases[n] and limit_mib == 0:
            print(f"{n:28s} skipped: it needs an address-space limit")
            if name != "all":
                sys.exit(SKIPPED)
            continue
        if cases[n].get("needs") == "mpi" and without_mpi:
            print(f"{n:28s} skipped: it needs a lynxsim built with MPI")
            if name != "all":
                sys.exit(SKIPPED)
            continue
        problem, stats = run_case(binary, cases[n], cases[n].get("limit_mib", limit_mib) << 20)
        rc, wall, rss = stats if stats else (None, 0.0, 0.0)
        print(f"{n:28s} exit {rc}  {wall:6.3f} s  {rss:7.1f} MiB peak RSS  "
              f"{'FAIL: ' + problem if problem else 'ok'}")
        failed = failed or problem is not None
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
