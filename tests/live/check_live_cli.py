#!/usr/bin/python3
"""End-to-end checks of `lynxsim live`: the dry run, the host backend's outputs feeding
`lynxsim fit` (plan -> live -> fit), and one-line refusals.

Usage: check_live_cli.py LYNXSIM_BINARY CASE   (CASE: dry_run, host_fit, errors)
"""
import csv
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from check_cli import check, run  # noqa: E402  (the CLI suite's helpers)

SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "live-small.yaml")


def make_plan(b, tmp):
    plan = os.path.join(tmp, "plan.yaml")
    run(b, "plan", SCENARIO, "-o", plan)
    return plan


def case_dry_run(b, tmp):
    plan = make_plan(b, tmp)
    out = run(b, "live", "--dry-run", plan).stdout
    for text in ("streams per rank: compute tp pp dp recompute pp_recv", "rank 0 (stage0.dp0.tp0)",
                 "qkv_gemm_dgrad", "all_reduce", "re.softmax", "+act/attn_core", "memory peak",
                 "predicted iteration time"):
        check(text in out, f"dry run prints '{text}'")
    # The peak the dry run replays is the one `lynxsim run --plan` reports for stage 0.
    report = run(b, "run", "--plan", plan, "--format", "json").stdout
    stages = json.loads(report)["stages"]
    check(len(stages) == 2, "two stages")
    line = [l for l in out.splitlines() if l.startswith("rank 0 memory peak:")][0]
    replayed, tracked = line.split(": ", 1)[1].split(" replayed in the simulator's order, ")
    check(tracked.startswith(replayed), f"replayed peak equals the tracked one: {line}")


def case_host_fit(b, tmp):
    plan = make_plan(b, tmp)
    compare = os.path.join(tmp, "compare.csv")
    raw = os.path.join(tmp, "raw.csv")
    trace = os.path.join(tmp, "trace.json")
    out = run(b, "live", plan, "--backend", "host", "--iterations", "2", "--csv", compare,
              "--raw-csv", raw, "--trace", trace).stdout
    check("iteration" in out and "peak_memory" in out and "host backend" in out, "comparison table")
    with open(compare) as f:
        rows = list(csv.DictReader(f))
    check(rows[0]["row"] == "iteration" and float(rows[0]["predicted"]) > 0, "comparison CSV")
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    check(any(e.get("name", "").endswith("qkv_gemm") for e in events), "trace has the ops")
    fitted = os.path.join(tmp, "fitted.yaml")
    fit = run(b, "fit", raw, "--base", "dgx-a100-80gb", "-o", fitted).stdout
    check("gpu.gemm_efficiency" in fit, "fit report")
    check(os.path.getsize(fitted) > 0, "fitted profile written")
    # The fitted profile plans again (plan -> live -> fit -> re-plan).
    replan = os.path.join(tmp, "replan.yaml")
    with open(SCENARIO) as f, open(replan, "w") as out:
        out.write(f.read().replace("profile: dgx-a100-80gb", f"profile_file: {fitted}"))
    run(b, "plan", replan, "-o", os.path.join(tmp, "plan2.yaml"))


def case_errors(b, tmp):
    plan = make_plan(b, tmp)
    p = run(b, "live", "--dry-run", os.path.join(tmp, "missing.yaml"), expect=1)
    check(p.stderr.startswith("lynxsim: error E701 (file-not-found):") and p.stderr.count("\n") == 1,
          f"one-line error: {p.stderr}")
    p = run(b, "live", plan, "--backend", "host", "--iterations", "0", expect=1)
    check("E802 (invalid-option-value): --iterations 0" in p.stderr, f"iterations refused: {p.stderr}")
    p = run(b, "live", plan, "--backend", "nope", expect=1)
    check("no backend 'nope'" in p.stderr, f"unknown backend: {p.stderr}")
    p = run(b, "live", plan, "--set", "recompute.strategy=none", "--dry-run", expect=1)
    check("recompute" in p.stderr and p.stderr.count("\n") == 1, f"--set recompute refused: {p.stderr}")


CASES = {"dry_run": case_dry_run, "host_fit": case_host_fit, "errors": case_errors}

if __name__ == "__main__":
    binary, case = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        CASES[case](os.path.abspath(binary), tmp)
    print(f"live_cli_{case}: ok")
