#!/usr/bin/python3
"""End-to-end checks of the lynxsim command line: exit codes, one-line errors naming file, line
and key, every output format, traces, plan files, and a reduced `lynxsim figures` job.

Usage: check_cli.py LYNXSIM_BINARY CASE   (CASE: see CASES at the bottom)
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def run(binary, *args, expect=0):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
    if p.returncode != expect:
        sys.exit(f"FAIL: lynxsim {' '.join(args)} exited {p.returncode}, expected {expect}\n"
                 f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def case_formats(b, tmp):
    table = run(b, "run").stdout
    check("iteration time" in table and "tokens/s" in table and "peak GiB" in table, "table output")
    j = json.loads(run(b, "run", "--format", "json").stdout)
    for key in ("iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "hfu",
                "peak_memory_bytes", "oom", "stages", "scenario_yaml", "lynxsim_version"):
        check(key in j, f"json key {key}")
    check(j["iteration_time_s"] > 0 and 0 < j["mfu"] < 1, "json values plausible")
    rows = [l for l in run(b, "run", "--format", "csv").stdout.splitlines() if not l.startswith("#")]
    header = next(csv.reader([rows[0]]))
    for col in ("stage", "iteration_time_s", "tokens_per_s", "peak_memory_bytes", "oom", "bubble_s"):
        check(col in header, f"csv column {col}")
    check(len(rows) == 1 + len(j["stages"]), "one csv row per stage")
    show = run(b, "show").stdout
    check("parameters:" in show and "hardware:" in show, "show prints the scenario and sizes")
    check(run(b, "--version").stdout.startswith("lynxsim "), "--version")


def case_errors(b, tmp):
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("model:\n  preset: gpt-1.3b\nparallel: {tp: 2\n")
    err = run(b, "run", bad, expect=1).stderr.strip()
    check(err.count("\n") == 0 and "bad.yaml:" in err, f"malformed YAML names the file: {err}")
    with open(bad, "w") as f:
        f.write("model:\n  preset: gpt-1.3b\nparallel:\n  tp: 2\n  pipeline: 2\n")
    err = run(b, "run", bad, expect=1).stderr.strip()
    check("bad.yaml:5:3" in err and "parallel.pipeline" in err, f"unknown key with line: {err}")
    err = run(b, "run", "--set", "model.layer=3", expect=1).stderr
    check("did you mean 'model.layers'" in err, f"--set suggestion: {err}")
    err = run(b, "run", "--set", "hardware.node.nic.bw=200GB", expect=1).stderr
    check("bandwidth" in err, f"bad unit: {err}")
    err = run(b, "run", "--set", "parallel.tp=3", expect=1).stderr
    check("tp" in err, f"heads not divisible by tp: {err}")
    # The README's promise: a layout error names the --set override that caused it.
    err = run(b, "run", "scenarios/paper/pcie-gpt-13b.yaml", "--set", "model.layers=41",
              expect=1).stderr.strip()
    check(err == "lynxsim: error: scenarios/paper/pcie-gpt-13b.yaml: --set model.layers=41: "
          "key 'model.layers': model.layers (41) is not divisible by parallel.pp × "
          "parallel.virtual_stages (4 × 1 = 4): every model chunk needs the same number of layers",
          f"layout error names the override: {err}")
    run(b, "frobnicate", expect=2)
    run(b, "run", "--format", "xml", expect=1)
    # An out-of-memory plan is a result, not an error.
    out = run(b, "run", "--set", "hardware.gpu.memory=12GiB").stdout
    check("OOM (stage 0" in out, "OOM reported as a result")


def case_trace_and_plan(b, tmp):
    trace = os.path.join(tmp, "t.json")
    run(b, "run", "--set", "recompute.strategy=selective", "--trace", trace)
    with open(trace) as f:
        t = json.load(f)
    names = {e.get("name") for e in t["traceEvents"]}
    check("memory_bytes" in names and "thread_name" in names, "trace has counters and tracks")
    check(any(n and n.endswith("window") for n in names), "trace shows overlap windows")
    plan = os.path.join(tmp, "plan.yaml")
    scenario = "scenarios/paper/pcie-gpt-2.7b.yaml"
    planned = run(b, "plan", scenario, "--set", "recompute.strategy=lynx-heu", "-o", plan).stderr
    check("lynx-heu plan" in planned, "plan command summary")
    with open(plan) as f:
        text = f.read()
    check("mode: overlap" in text and "windows:" in text, "plan lists overlapped layers and windows")
    a = json.loads(run(b, "run", scenario, "--set", "recompute.strategy=lynx-heu", "--format", "json").stdout)
    c = json.loads(run(b, "run", scenario, "--plan", plan, "--format", "json").stdout)
    check(a["iteration_time_s"] == c["iteration_time_s"], "run --plan reproduces the planned run")


def case_figures(b, tmp):
    out = os.path.join(tmp, "fig")
    run(b, "figures", "--models", "gpt-1.3b", "--strategies", "none,full,lynx-heu", "--out", out)
    with open(os.path.join(out, "paper_results.csv")) as f:
        rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
    check(len(rows) == 2 * 3, f"2 clusters x 3 strategies, got {len(rows)} rows")
    for col in ("cluster", "model", "strategy", "oom", "tokens_per_s", "throughput_vs_full",
                "peak_memory_gib", "compute_s", "recompute_s", "recompute_overlapped_s",
                "bubble_s", "search_seconds"):
        check(col in rows[0], f"figures csv column {col}")
    for r in rows:
        if r["strategy"] == "full":
            check(float(r["throughput_vs_full"]) == 1.0, "full normalises to 1")
    png = os.path.join(out, "throughput_nvlink.png")
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG was written")


CASES = {"formats": case_formats, "errors": case_errors, "trace_and_plan": case_trace_and_plan,
         "figures": case_figures}

if __name__ == "__main__":
    binary, case = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        CASES[case](binary, tmp)
    print(f"cli {case}: ok")
