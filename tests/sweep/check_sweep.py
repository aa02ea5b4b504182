#!/usr/bin/python3
"""End-to-end checks of `lynxsim sweep`.

cli: exit codes and one-line errors, the stdout table, progress lines off a terminal.
mpi: 2 ranks write exactly the bytes of a single-process run (CSV and JSON lines), resume under
MPI, and an error on the ranks ends the job instead of hanging.

Usage: check_sweep.py LYNXSIM_BINARY cli
       check_sweep.py LYNXSIM_BINARY mpi MPIEXEC   (exit 77: mpirun is not Open MPI, skipped)
"""
import os
import subprocess
import sys
import tempfile

BASE = """name: tiny
model: {layers: 8, hidden: 512, heads: 8, seq_len: 512, vocab: 8192}
parallel: {tp: 2, pp: 2, dp: 1, micro_batch: 1, global_batch: 8}
hardware: {profile: dgx-a100-80gb, nodes: 1}
recompute: {strategy: none}
"""
GRID = """base: tiny.yaml
axes:
  parallel.tp: [1, 2, 4]
  parallel.pp: {from: 1, to: 4, times: 2}
  parallel.micro_batch: [1, 2, 3]
  recompute.strategy: [none, full]
where: parallel.tp * parallel.pp <= 8
"""


def run(cmd, expect=0, timeout=240):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}, expected {expect}\n"
                 f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write_grid(tmp, text=GRID):
    with open(os.path.join(tmp, "tiny.yaml"), "w") as f:
        f.write(BASE)
    grid = os.path.join(tmp, "grid.yaml")
    with open(grid, "w") as f:
        f.write(text)
    return grid


def one_line_error(p, *needles):
    err = p.stderr.strip()
    if err.count("\n") != 0 or not err.startswith("lynxsim: error E") or any(n not in err for n in needles):
        sys.exit(f"FAIL: expected one error line with {needles}, got:\n{p.stderr}")


def case_cli(lynxsim):
    with tempfile.TemporaryDirectory() as tmp:
        grid = write_grid(tmp)
        one_line_error(run([lynxsim, "sweep"], expect=1), "expected a grid file")
        for bad in ("0", "-2", "two", "1.5"):
            one_line_error(run([lynxsim, "sweep", grid, "--threads", bad], expect=1), f"--threads {bad}", ">= 1")
        one_line_error(run([lynxsim, "sweep", grid, "-o", os.path.join(tmp, "out.txt")], expect=1), ".csv or .jsonl")
        bad_grid = write_grid(tmp, GRID + "axis: {}\n")
        one_line_error(run([lynxsim, "sweep", bad_grid], expect=1), f"{bad_grid}:8:1: unknown key 'axis'")
        grid = write_grid(tmp)
        p = run([lynxsim, "sweep", grid, "--threads", "2"])
        lines = p.stdout.splitlines()
        if not lines[0].split()[:3] == ["point", "parallel.tp", "parallel.pp"] or len(lines) < 10:
            sys.exit(f"FAIL: stdout table:\n{p.stdout}")
        # Off a terminal the progress is plain lines, the last one at the end; then the summary.
        if "sweep [##############################]" not in p.stderr or "done" not in p.stderr:
            sys.exit(f"FAIL: progress lines:\n{p.stderr}")
        if "skipped" not in p.stderr or "filtered out by where" not in p.stderr:
            sys.exit(f"FAIL: summary:\n{p.stderr}")
        if "sweep" not in run([lynxsim, "--help"]).stdout or "--threads" not in run([lynxsim, "sweep", "--help"]).stdout:
            sys.exit("FAIL: help")
    print("ok")
    return 0


def case_mpi(lynxsim, mpiexec):
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True)
    text = version.stdout + version.stderr
    if "Open MPI" not in text and "open-mpi.org" not in text and "OpenRTE" not in text:
        print("SKIP: mpirun is not Open MPI")
        return 77
    # Root in a container: Open MPI refuses root without the flag, sees 1-2 cores, and has no
    # network interface worth using; shared memory (vader) carries everything.
    mpirun = [mpiexec, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", "2"]
    with tempfile.TemporaryDirectory() as tmp:
        grid = write_grid(tmp)
        for ext in ("csv", "jsonl"):
            single = os.path.join(tmp, f"single.{ext}")
            ranks = os.path.join(tmp, f"ranks.{ext}")
            # A plain launch of the MPI-enabled binary: one process, no MPI job.
            single_err = run([lynxsim, "sweep", grid, "-o", single, "--threads", "2"]).stderr
            err = run(mpirun + [lynxsim, "sweep", grid, "-o", ranks, "--threads", "1"]).stderr
            if "x 2 ranks" not in err:
                sys.exit(f"FAIL: the summary does not say 2 ranks ran:\n{err}")
            # Skip reasons (with their error codes) travel from rank 1 to rank 0 intact.
            skips = lambda text: [l for l in text.splitlines() if l.startswith("  ") and " x E" in l]
            if not skips(single_err) or skips(err) != skips(single_err):
                sys.exit(f"FAIL: skip reasons under MPI differ:\n{err}\none process:\n{single_err}")
            expected = read(single)
            if expected.count(b"\n") < 10:
                sys.exit(f"FAIL: too few rows in {single}")
            if read(ranks) != expected:
                sys.exit(f"FAIL: {ext}: 2 ranks wrote other bytes than one process")
            # Resume under MPI: cut in the middle of a row.
            with open(ranks, "wb") as f:
                f.write(expected[: len(expected) * 2 // 3])
            err = run(mpirun + [lynxsim, "sweep", grid, "-o", ranks]).stderr
            if "already in the file" not in err or read(ranks) != expected:
                sys.exit(f"FAIL: {ext}: resume under MPI\n{err}")
        # An error every rank meets (a bad grid) and one only rank 0 meets (another grid's
        # file): a non-zero exit, no hang.
        with open(grid, "a") as f:
            f.write("axis: {}\n")
        err = run(mpirun + [lynxsim, "sweep", grid, "-o", os.path.join(tmp, "x.csv")], expect=1, timeout=120).stderr
        if "unknown key 'axis'" not in err:
            sys.exit(f"FAIL: grid error under MPI:\n{err}")
        with open(grid, "w") as f:
            f.write(GRID.replace("[none, full]", "[none]"))
        p = subprocess.run(mpirun + [lynxsim, "sweep", grid, "-o", os.path.join(tmp, "single.csv")],
                           capture_output=True, text=True, timeout=120)
        if p.returncode == 0 or "holds another sweep" not in p.stderr:
            sys.exit(f"FAIL: rank 0's error under MPI: exit {p.returncode}\n{p.stderr}")
    print("ok")
    return 0


if __name__ == "__main__":
    if sys.argv[2] == "cli":
        sys.exit(case_cli(sys.argv[1]))
    sys.exit(case_mpi(sys.argv[1], sys.argv[3]))
