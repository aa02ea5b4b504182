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
    check(err == "lynxsim: error E301 (indivisible-layout): scenarios/paper/pcie-gpt-13b.yaml: --set model.layers=41: "
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
    # pcie-gpt-2.7b: the engine keeps lynx-heu's plan without forward windows (a fallback).
    check("no-forward-windows plan" in planned, "plan command summary names the plan that ran")
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
                "peak_memory_bytes", "compute_s", "recompute_s", "recompute_overlapped_s",
                "bubble_s", "search_seconds"):
        check(col in rows[0], f"figures csv column {col}")
    for r in rows:
        if r["strategy"] == "full":
            check(float(r["throughput_vs_full"]) == 1.0, "full normalises to 1")
    png = os.path.join(out, "throughput_nvlink.png")
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG was written")


def trace_ps(text):
    """A trace timestamp in microseconds ("12.345678") as integer picoseconds, exactly."""
    whole, _, frac = str(text).partition(".")
    return int(whole) * 10**6 + int((frac + "000000")[:6])


def partial_overlaps(trace):
    """Pairs of slices on one (pid, tid) track that overlap without nesting (Perfetto refuses them)."""
    tracks = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            start = trace_ps(e["ts"])
            tracks.setdefault((e["pid"], e["tid"]), []).append((start, start + trace_ps(e["dur"])))
    count = 0
    for slices in tracks.values():
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in slices:
            open_ends = [e for e in open_ends if e > start]
            count += sum(1 for e in open_ends if e < end)
            open_ends.append(end)
    return count


def case_trace_tracks(b, tmp):
    trace = os.path.join(tmp, "t.json")
    report = json.loads(run(b, "run", "--set", "recompute.strategy=lynx-heu", "--trace", trace,
                            "--format", "json").stdout)
    with open(trace) as f:
        t = json.load(f)
    check(partial_overlaps(t) == 0, "no track has partially overlapping slices")
    lanes = [e["args"]["name"] for e in t["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name" and " lane " in e["args"]["name"]]
    check(lanes, "concurrent flows of this run sit on link lanes")
    meta = t["metadata"]
    check(meta["lynxsim_version"] == report["lynxsim_version"], "trace metadata: version")
    check(meta["strategy"] == report["strategy"] and meta["strategy_requested"] == "lynx-heu",
          "trace metadata: the strategy that ran and the one asked")
    check("collective_efficiency: 0.96" in meta["scenario_yaml"], "trace metadata: resolved scenario")
    check(any(e["name"] == "lynxsim run" and e["args"] == meta for e in t["traceEvents"]),
          "metadata on an instant event too")
    links_pid = next(e["pid"] for e in t["traceEvents"]
                     if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == "links")
    link_args = [e["args"] for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] == links_pid]
    collective = [a for a in link_args if "efficiency" in a]
    check(collective and all(a["efficiency"] == 0.96 for a in collective),
          "collective flows carry the efficiency as an argument")
    # A 2-rank TP all-reduce sends 2(n-1)/n = 1x the activation, the tensor a pipeline send
    # carries (no efficiency there): the payload, not payload / 0.8.
    sizes = {}
    for e in t["traceEvents"]:
        if e["ph"] == "X" and e["pid"] == links_pid:
            sizes.setdefault(e["name"].split(".")[-1], set()).add(e["args"]["bytes"])
    check(len(sizes["send_activation"]) == 1 and sizes["tp_allreduce_attn"] == sizes["send_activation"],
          f"link bytes are the payload: {sizes.get('tp_allreduce_attn')} vs {sizes.get('send_activation')}")


def case_trace_limits(b, tmp):
    full_path, part_path = os.path.join(tmp, "full.json"), os.path.join(tmp, "part.json")
    full_report = json.loads(run(b, "run", "--trace", full_path, "--format", "json").stdout)
    time_s = full_report["iteration_time_s"]
    start_s, end_s = time_s / 3, time_s / 2
    window = f"{start_s * 1e3:.3f}ms:{end_s * 1e3:.3f}ms"
    part_report = json.loads(run(b, "run", "--trace", part_path, "--trace-stages", "1",
                                 "--trace-window", window, "--format", "json").stdout)
    for key in ("iteration_time_s", "event_fingerprint", "stages"):
        check(full_report[key] == part_report[key], f"limits do not change the simulation ({key})")
    with open(full_path) as f:
        full = json.load(f)
    with open(part_path) as f:
        part = json.load(f)
    check(len(part["traceEvents"]) < len(full["traceEvents"]) / 4, "the limited trace is smaller")
    processes = {e["args"]["name"] for e in part["traceEvents"] if e["name"] == "process_name"}
    check(processes and all(p.startswith("stage1.") or p in ("links", "lynxsim") for p in processes),
          f"only stage 1 GPUs: {sorted(processes)}")
    lo, hi = round(start_s * 1e12), round(end_s * 1e12)
    for e in part["traceEvents"]:
        if e["ph"] == "X":
            s = trace_ps(e["ts"])
            check(s + trace_ps(e["dur"]) >= lo - 10**6 and s <= hi + 10**6, f"slice outside the window: {e}")
    check(part["metadata"]["trace_stages"] == "1" and part["metadata"]["trace_window"] == window,
          "the trace says it is limited")
    check(partial_overlaps(part) == 0, "no partial overlaps in the limited trace")
    for args, what in ((["--trace-stages", "2"], "stage 2 does not exist"),
                       (["--trace-stages", "x"], "--trace-stages"),
                       (["--trace-window", "2s:1s"], "ends before it starts"),
                       (["--trace-window", "1s"], "START:END"),
                       (["--trace-window", "1parsec:2s"], "--trace-window")):
        err = run(b, "run", "--trace", part_path, *args, expect=1).stderr.strip()
        check(err.count("\n") == 0 and what in err, f"{args}: {err}")
    err = run(b, "run", "--trace-stages", "0", expect=1).stderr.strip()
    check("needs --trace" in err, f"a limit without --trace: {err}")


def case_plan_files(b, tmp):
    """Plan files: hostile names round-trip, the embedded scenario runs alone, a mismatching
    scenario, a --set recompute.* and a plan the builder cannot build are one-line errors."""
    with open("scenarios/paper/pcie-gpt-2.7b.yaml") as f:
        base = f.read()
    scenario = os.path.join(tmp, "gpt: small.yaml")
    with open(scenario, "w") as f:
        f.write("\n".join(l for l in base.splitlines() if not l.startswith("name:")) +
                '\nname: "gpt: small # \'q\' \\u00fc\\nx"\n')
    plan = os.path.join(tmp, "plan.yaml")
    run(b, "plan", scenario, "--set", "recompute.strategy=lynx-heu", "-o", plan)
    direct = json.loads(run(b, "run", scenario, "--set", "recompute.strategy=lynx-heu",
                            "--format", "json").stdout)
    alone = json.loads(run(b, "run", "--plan", plan, "--format", "json").stdout)
    check(alone["iteration_time_s"] == direct["iteration_time_s"],
          "run --plan with no scenario runs the embedded one")
    check(alone["scenario_yaml"] == direct["scenario_yaml"] and "gpt: small # 'q'" in alone["scenario_yaml"],
          "the embedded scenario, hostile name included, is the one planned on")
    both = json.loads(run(b, "run", scenario, "--plan", plan, "--format", "json").stdout)
    check(both["iteration_time_s"] == direct["iteration_time_s"], "run SCENARIO --plan")
    slow = json.loads(run(b, "run", "--plan", plan, "--set", "hardware.node.pcie.bw=8GB/s",
                          "--format", "json").stdout)
    check(slow["iteration_time_s"] > direct["iteration_time_s"], "--set what-if on a plan")

    def one_line_error(*args, has):
        err = run(b, *args, expect=1).stderr.strip()
        check(err.count("\n") == 0 and "internal" not in err and all(h in err for h in has),
              f"lynxsim {' '.join(args)}: {err}")

    one_line_error("run", scenario, "--set", "parallel.micro_batch=2", "--plan", plan,
                   has=[f"{plan}:75:18: key 'scenario.parallel.micro_batch': made for 4, {scenario} with --set has 2 "
                        f"({scenario}: --set parallel.micro_batch=2)"])
    one_line_error("run", "scenarios/paper/pcie-gpt-1.3b.yaml", "--plan", plan,
                   has=["key 'scenario.model.layers': made for 32, scenarios/paper/pcie-gpt-1.3b.yaml has 24 "
                        "(model.preset at scenarios/paper/pcie-gpt-1.3b.yaml:7:11)"])
    one_line_error("run", "--plan", plan, "--set", "recompute.strategy=lynx-opt",
                   has=["--set recompute.strategy=lynx-opt: not allowed with --plan"])
    with open(plan) as f:
        text = f.read()
    edited = os.path.join(tmp, "edited.yaml")
    for old, new, has in [
            ("{layer: 0, drop: [], mode: keep}", "{layer: 0, drop: [{a: 1}], mode: demand}",
             ["edited.yaml:", "key 'stages[0].layers[0].drop': expected a string, got a mapping"]),
            ("{layer: 0, drop: [], mode: keep}", "{layer: 0, drop: [post], mode: overlap, window: bwd-tp}",
             ["key 'stages[0].layers[0].drop': layer 0: overlapped recompute of group 'post'"]),
            ("{layer: 0, drop: [], mode: keep}", "{layer: 0, drop: [input], mode: demand}",
             ["layer 0 drops group 'input'"]),
            ("{layer: 0, drop: [], mode: keep}", "{layer: 0, drop: [], mode: keep, window: pp-wait}",
             ["layer 0: window pp-wait goes only with mode overlap"]),
            ("    tp: 2\n", "    tp: 2\n    tpp: 2\n", ["edited.yaml:", "unknown key 'parallel.tpp'"])]:
        check(old in text, f"the plan has {old!r}")
        with open(edited, "w") as f:
            f.write(text.replace(old, new, 1))
        one_line_error("run", "--plan", edited, has=has)


def case_outputs_say_what_ran(b, tmp):
    """The table header says what ran; renamed and new columns; JSON/CSV carry the configuration
    and the planning-time fields (names from runner/result_fields.cpp)."""
    table = run(b, "run", "--set", "recompute.strategy=lynx-heu").stdout
    check("recompute lynx-heu" in table, f"table names the strategy: {table[:400]}")
    check("nothing recomputed: all activations fit" in table, "table says nothing was recomputed")
    check("recomp-stream s" in table and "contention s" in table and "hidden s" not in table,
          "recompute-stream and contention columns")
    check("planner search" in table and "baseline run" in table, "planning time lines")
    plain = run(b, "run", "--set", "recompute.strategy=selective").stdout
    check("nothing recomputed" not in plain, "selective recomputes something")
    j = json.loads(run(b, "run", "--set", "recompute.strategy=lynx-heu", "--format", "json").stdout)
    for key in ("scenario", "profile", "gpus", "tp", "pp", "dp", "micro_batch", "global_batch",
                "strategy_requested", "strategy", "engine_runs", "search_seconds",
                "baseline_seconds", "confirm_seconds", "event_fingerprint"):
        check(key in j, f"json key {key}")
    check(j["strategy_requested"] == "lynx-heu", "strategy_requested")
    check("contention_s" in j["stages"][0] and "recompute_overlapped_s" in j["stages"][0],
          "json stage keys")
    rows = [l for l in run(b, "run", "--format", "csv").stdout.splitlines() if not l.startswith("#")]
    table_rows = list(csv.DictReader(rows))
    check(all(r["scenario"] == "default" and r["profile"] and r["strategy_requested"] == "none"
              for r in table_rows), "every csv row carries the configuration")


def case_figures_default_out(b, tmp):
    """`figures` writes to the git-ignored results/out/paper/ by default (relative to the
    working directory); its CSV has the `run --format csv` columns plus its own two."""
    p = subprocess.run([os.path.abspath(b), "figures", "--models", "gpt-1.3b", "--clusters", "pcie",
                        "--strategies", "none,lynx-heu", "--no-plot"], cwd=tmp,
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"figures exited {p.returncode}: {p.stderr[-2000:]}")
    path = os.path.join(tmp, "results", "out", "paper", "paper_results.csv")
    check(os.path.isfile(path), f"default output {path}")
    with open(".gitignore") as f:
        check("/results/out/" in f.read().split(), ".gitignore ignores results/out/")
    with open(path) as f:
        lines = [l for l in f.read().splitlines() if not l.startswith("#")]
    header = next(csv.reader([lines[0]]))
    run_rows = [l for l in run(b, "run", "--format", "csv").stdout.splitlines()
                if not l.startswith("#")]
    check(header == ["cluster", "throughput_vs_full"] + next(csv.reader([run_rows[0]])),
          f"figures csv header is the run csv header plus cluster, throughput_vs_full: {header}")
    rows = list(csv.DictReader(lines))
    check([r["strategy_requested"] for r in rows] == ["none", "lynx-heu"], "one row per strategy")
    check(all(r["throughput_vs_full"] == "" for r in rows), "no full run: nothing to normalise to")


def case_figures_flags(b, tmp):
    """--update-committed regenerates the whole committed set: it refuses a partial sweep or
    another folder; a selection that matches nothing is an error, not a smaller sweep."""
    for extra, flag in ((["--models", "gpt-1.3b"], "--models"), (["--out", tmp], "--out"),
                        (["--no-plot"], "--no-plot")):
        err = run(b, "figures", "--update-committed", *extra, expect=1).stderr.strip()
        check(flag in err and "results/paper" in err and err.count("\n") == 0,
              f"--update-committed with {flag}: {err}")
    err = run(b, "figures", "--models", "gpt-99b", "--out", tmp, expect=1).stderr
    check("--models: 'gpt-99b' matches no paper scenario" in err, f"unknown model: {err}")
    err = run(b, "figures", "--strategies", "lynx", "--out", tmp, expect=1).stderr
    check("--strategies: unknown strategy 'lynx'" in err, f"unknown strategy: {err}")
    check("--update-committed" in run(b, "figures", "--help").stdout, "--help lists --update-committed")


def case_figures_maps(b, tmp):
    """`figures --maps` on the 2 x 2 test map writes maps.csv and confirmations.txt (the same
    CSV bytes on 1 and 2 threads); the paper's selection options and the maps' own options are
    refused where they mean nothing; --global-batch moves every paper scenario's batch."""
    outs = []
    for threads in ("1", "2"):
        out = os.path.join(tmp, f"maps{threads}")
        p = run(b, "figures", "--maps", "--map-file", "tests/maps/small_map.yaml", "--threads", threads,
                "--no-plot", "--out", out)
        check("4 cells, 2 invalid" in p.stdout and "invalid: 2 cells" in p.stdout, f"summary: {p.stdout}")
        check(os.path.isfile(os.path.join(out, "confirmations.txt")), "confirmations.txt written")
        with open(os.path.join(out, "maps.csv"), encoding="utf-8") as f:
            outs.append(f.read())
    check(outs[0] == outs[1], "maps.csv differs between 1 and 2 threads")
    for extra, flag in ((["--models", "gpt-1.3b"], "--models"), (["--global-batch", "512"], "--global-batch")):
        err = run(b, "figures", "--maps", *extra, "--out", tmp, expect=1).stderr.strip()
        check("E804" in err and flag in err and err.count("\n") == 0, f"--maps with {flag}: {err}")
    err = run(b, "figures", "--maps", "--update-committed", "--map-names", "small", expect=1).stderr.strip()
    check("--map-names" in err and "results/maps" in err, f"--maps --update-committed --map-names: {err}")
    err = run(b, "figures", "--threads", "2", "--out", tmp, expect=1).stderr.strip()
    check("--threads is an option of --maps" in err, f"--threads without --maps: {err}")
    err = run(b, "figures", "--maps", "--map-file", "tests/maps/small_map.yaml", "--map-names", "big",
              "--out", tmp, expect=1).stderr.strip()
    check("--map-names: 'big' matches no map" in err, f"unknown map: {err}")
    out = os.path.join(tmp, "gb")
    run(b, "figures", "--models", "gpt-1.3b", "--clusters", "pcie", "--strategies", "full", "--global-batch", "128",
        "--no-plot", "--out", out)
    with open(os.path.join(out, "paper_results.csv"), encoding="utf-8") as f:
        text = f.read()
    rows = list(csv.DictReader([l for l in text.splitlines() if not l.startswith("#")]))
    check(len(rows) == 1 and rows[0]["global_batch"] == "128" and rows[0]["micro_batches"] == "16",
          f"--global-batch 128: {rows}")
    check("# every scenario with parallel.global_batch=128" in text, "the CSV names the override")



def case_write_errors(b, tmp):
    """A write that fails (a full disk: /dev/full) is an error naming the output, never exit 0
    with the output lost: -o, --trace, plan -o and standard output itself."""
    def fails(args, stdout, has):
        p = subprocess.run([b, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=600)
        err = p.stderr.strip()
        check(p.returncode == 1 and err.count("\n") == 0 and has in err,
              f"lynxsim {' '.join(args)}: exit {p.returncode}, {err!r}")
    devnull = subprocess.DEVNULL
    fails(["run", "-o", "/dev/full"], devnull, "-o: cannot write '/dev/full'")
    fails(["run", "--trace", "/dev/full"], devnull, "--trace: cannot write '/dev/full'")
    fails(["plan", "scenarios/examples/default.yaml", "-o", "/dev/full"], devnull,
          "-o: cannot write '/dev/full'")
    with open("/dev/full", "w") as full:
        for args in (["run"], ["show"], ["fields"], ["run", "--format", "json"]):
            fails(args, full, "cannot write to standard output")
    fails(["run", "-o", os.path.join(tmp, "no-such-dir", "r.txt")], devnull, "-o: cannot open")


def case_silent_inputs(b, tmp):
    """Inputs that used to be silently wrong or silently ignored are one-line errors: a second
    YAML document, options that wrap when negative, two profiles at once."""
    two = os.path.join(tmp, "two.yaml")
    with open(two, "w") as f:
        f.write("name: x\nhardware: {profile: dgx-a100-80gb}\n---\nparallel: {tp: 4}\n")
    err = run(b, "run", two, expect=1).stderr.strip()
    check(err == f"lynxsim: error E102 (extra-yaml-document): {two}:4:1: a second YAML document (after '---') would be "
          "ignored: keep one document per file", f"second document: {err}")
    csv_path = "validate/data/vtrain_single_node.csv"
    invalid, conflicting = "E802 (invalid-option-value)", "E804 (conflicting-options)"
    for args, has in ((["--threads", "-1"], f"{invalid}: --threads: -1 is not between 1 and 256"),
                      (["--threads", "100000"], f"{invalid}: --threads: 100000 is not between 1 and 256"),
                      (["--worst", "-1"], f"{invalid}: --worst: -1 is negative"),
                      (["--inner-stride", "0"], f"{invalid}: --inner-stride: 0 is not >= 1"),
                      (["--profile", "dgx-a100-80gb", "--profile-file", "x.yaml"],
                       f"{conflicting}: --profile dgx-a100-80gb and --profile-file x.yaml: give one of them"),
                      (["--recompute", "fulll"], f"{invalid}: --recompute: 'fulll' is not one of: none, full, "
                       "selective, checkmate, lynx-heu, lynx-opt"),
                      (["--report", "m.yaml"], f"{conflicting}: --report m.yaml: a CSV does not go with --report "
                       "(the manifest names each data set's file, profiles and recompute setting; the report "
                       "is markdown)")):
        err = run(b, "validate", csv_path, *args, expect=1).stderr.strip()
        check(err == "lynxsim: error " + has, f"validate {' '.join(args)}: {err}")


def case_validate_report(b, tmp):
    """validate --report: a manifest of one synthetic two-node data set (plumbing only: the
    times are made up) scored on two profiles, as markdown."""
    with open(os.path.join(tmp, "toy.csv"), "w") as f:
        f.write("gpus,global_batch,micro_batch,hidden,heads,layers,seq_len,tp,dp,pp,iteration_ms,recompute\n"
                "16,16,1,1024,16,4,1024,8,2,1,100,full\n"
                "8,8,1,1024,16,4,1024,8,1,1,50,\n")
    manifest = os.path.join(tmp, "sets.yaml")
    with open(manifest, "w") as f:
        f.write("datasets:\n  - name: toy\n    file: toy.csv\n"
                "    profiles: [dgx-a100-80gb, dgx-h100-80gb]\n")
    out = run(b, "validate", "--report", manifest).stdout
    check(out.startswith(f"<!-- generated by `lynxsim validate --report {manifest}`"), out[:200])
    for profile in ("dgx-a100-80gb", "dgx-h100-80gb"):
        check(f"| toy | `{profile}` | 2 |" in out, f"summary line of {profile}: {out}")
        check(f"Worst 2 rows on `{profile}`" in out, f"worst rows of {profile}")
    check("| recompute=full |" in out, "the row's settings in the worst rows")
    err = run(b, "validate", "--report", manifest, "--format", "csv", expect=1).stderr.strip()
    check(err.startswith(f"lynxsim: error E804 (conflicting-options): --report {manifest}: --format does not go with --report"), err)
    with open(manifest, "w") as f:
        f.write("datasets:\n  - name: toy\n    file: toy.csv\n    profile: [x]\n")
    err = run(b, "validate", "--report", manifest, expect=1).stderr.strip()
    check(err.startswith(f"lynxsim: error E104 (unknown-key): {manifest}:4:5: unknown key 'profile'"), err)


def case_megatron_args(b, tmp):
    # A launch line: dp from --gpus, ignored arguments named in one warning on stderr.
    line = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
            "--micro-batch-size 2 --global-batch-size 32 --tensor-model-parallel-size 2 "
            "--pipeline-model-parallel-size 2 --overlap-grad-reduce --vocab-size 51200 --bf16 --lr 1e-4 --save /ckpt")
    p = run(b, "run", "--megatron-args", line, "--profile", "dgx-a100-80gb", "--gpus", "8",
            "--format", "json")
    j = json.loads(p.stdout)
    check((j["tp"], j["pp"], j["dp"], j["global_batch"]) == (2, 2, 2, 32), f"layout from the args: {j['dp']}")
    warnings = [l for l in p.stderr.splitlines() if "warning" in l]
    check(len(warnings) == 1 and "--lr --save" in warnings[0], f"one warning names the ignored: {p.stderr}")
    # The same configuration as the built-in default scenario simulates identically, and the
    # default scenario printed as arguments runs back to the same event stream.
    default = json.loads(run(b, "run", "--format", "json").stdout)
    check(j["event_fingerprint"] == default["event_fingerprint"], "launch line = default scenario")
    printed = run(b, "show", "--as-megatron-args").stdout
    check(printed.startswith("# ") and " \\\n--hidden-size 2048" in printed, f"one option per line: {printed}")
    back = json.loads(run(b, "run", "--megatron-args", printed, "--profile", "dgx-a100-80gb",
                          "--gpus", "8", "--format", "json").stdout)
    check(back["event_fingerprint"] == default["event_fingerprint"], "show --as-megatron-args round trip")
    # A launch script with a variable from --megatron-env, and --set on top.
    script = os.path.join(tmp, "launch.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\nGPT_ARGS=(\n  --num-layers 24 --hidden-size 2048\n  --num-attention-heads 16\n)\n"
                "torchrun --nproc_per_node 8 pretrain_gpt.py ${GPT_ARGS[@]} \\\n"
                "  --seq-length 2048 --micro-batch-size 2 --tensor-model-parallel-size $TP \\\n"
                "  --bf16  # end\n")
    show = run(b, "show", "--megatron-args-file", script, "--megatron-env", "TP=4", "--profile",
               "dgx-a100-80gb", "--gpus", "8", "--set", "recompute.strategy=full").stdout
    check("name: launch" in show and "tp: 4" in show and "dp: 2" in show
          and "global_batch: 4" in show and "strategy: full" in show, f"script read: {show}")
    err = run(b, "show", "--megatron-args-file", script, "--profile", "dgx-a100-80gb",
              expect=1).stderr.strip()
    check(err.count("\n") == 0 and "launch.sh:7:42: --tensor-model-parallel-size: $TP cannot be resolved" in err,
          f"unresolved variable names the argument: {err}")
    # Refused: not modelled, contradictory, GPUs that do not divide; FILE with arguments.
    err = run(b, "run", "--megatron-args", line + " --squared-relu", "--profile", "dgx-a100-80gb",
              expect=1).stderr
    check("--squared-relu: not modelled by lynxsim yet" in err, f"squared-relu refused: {err}")
    swiglu = run(b, "show", "--megatron-args", line + " --swiglu --disable-bias-linear",
                 "--profile", "dgx-a100-80gb").stdout
    check("mlp: swiglu" in swiglu and "linear_bias: false" in swiglu, f"swiglu read: {swiglu[:400]}")
    err = run(b, "run", "--megatron-args", line + " --global-batch-size 30", "--profile",
              "dgx-a100-80gb", "--gpus", "8", expect=1).stderr
    check("--global-batch-size is given twice with different values" in err, f"twice: {err}")
    err = run(b, "run", "--megatron-args", line, "--profile", "dgx-a100-80gb", "--gpus", "6",
              expect=1).stderr
    check("--gpus 6: not divisible by tp 2" in err, f"gpus: {err}")
    err = run(b, "run", "--megatron-args", line, "--gpus", "8", expect=1).stderr
    check("--profile NAME" in err, f"profile required: {err}")
    run(b, "run", "scenarios/examples/default.yaml", "--megatron-args", line, "--profile",
        "dgx-a100-80gb", expect=1)
    run(b, "run", "--gpus", "8", expect=1)


def case_readme_numbers(b, tmp):
    # README's "Your first what-if" block quotes outputs "as of this version": each command's
    # comment is checked against the run it describes, so the README cannot drift from the code.
    import re
    import shlex
    text = open("README.md").read()
    block = text.split("## Your first what-if", 1)[1].split("```", 2)[1]
    gib = 2 ** 30
    checked = 0
    for line in block.splitlines():
        if " run " not in line or "#" not in line:
            continue
        command, comment = line.split("#", 1)
        args = shlex.split(command)[1:]
        j = json.loads(run(b, *args, "--format", "json").stdout)
        stages = j["stages"]
        said = re.sub(r'"[^"]*"', "", comment)  # quoted column names carry no claim
        said = re.sub(r"\([^)]*\)", "", said)  # nor does a parenthesis about another run
        first_time = re.search(r"(\d+\.\d\d) s\b", said)
        check(first_time is not None, f"README line states an iteration time: {line}")
        check(f"{j['iteration_time_s']:.2f}" == first_time.group(1),
              f"README says {first_time.group(1)} s, the run gives {j['iteration_time_s']:.4f} s: {line}")
        if "OOM" in said or "fits" in said:
            check(j["oom"] == ("OOM" in said), f"README's fit verdict, run oom={j['oom']}: {line}")
        for stage, need in re.findall(r"stage (\d+) needs (\d+) GiB", said):
            got = stages[int(stage)]["stage_peak_memory_bytes"] / gib
            check(round(got) == int(need), f"README says stage {stage} needs {need} GiB, run: {got:.2f}: {line}")
        for per_stage in re.findall(r"(\d+\.\d\d) s recompute per stage", said):
            got = max(s["recompute_s"] for s in stages)
            check(f"{got:.2f}" == per_stage, f"README says {per_stage} s recompute, run: {got:.4f}: {line}")
        stream = re.search(r'"recomp-stream s" (\d+\.\d\d) s', comment)
        if stream:
            got = max(s["recompute_overlapped_s"] for s in stages)
            check(f"{got:.2f}" == stream.group(1), f"README says recomp-stream {stream.group(1)} s, run: {got:.4f}")
        other = re.search(r"\((\S+) needs (\d+) GiB\)", comment)
        if other:
            o = json.loads(run(b, *args, "--set", f"recompute.strategy={other.group(1)}", "--format", "json").stdout)
            got = o["peak_memory_bytes"] / gib
            check(round(got) == int(other.group(2)), f"README says {other.group(1)} needs {other.group(2)} GiB, run: {got:.2f}")
        checked += 1
    check(checked >= 3, f"found the README's what-if runs ({checked})")


# Every case_NAME function is the CLI test NAME (tests/cli/CMakeLists.txt lists them).
def case_fields_and_presets(b, tmp):
    node = run(b, "fields", "hardware.node").stdout
    check("`hardware.node.nic.bw`" in node and "`hardware.gpu.peak`" not in node,
          f"fields PREFIX filters: {node[:300]}")
    check("`hardware.nodes`" not in node, "a prefix selects a whole section")
    every = run(b, "fields").stdout
    check(len(node.splitlines()) < len(every.splitlines()), "fewer rows than the whole table")
    err = run(b, "fields", "hardware.gpu.memry", expect=1).stderr.strip()
    check(err.count("\n") == 0 and "did you mean 'hardware.gpu.memory'" in err,
          f"no match suggests a close key: {err}")
    rows = run(b, "presets").stdout.splitlines()
    check(rows[0].split() == ["preset", "layers", "hidden", "heads", "kv", "ffn", "seq_len", "vocab",
                              "mlp", "norm", "pos", "embed", "bias", "parameters"],
          f"presets header: {rows[0]}")
    table = {r.split()[0]: r.split()[1:] for r in rows[1:] if r.startswith(("gpt-", "llama"))}
    check("gpt-1.3b" in table and "gpt-175b" in table and "gpt-1t" in table,
          f"every preset listed: {sorted(table)}")
    # Narayanan et al. 2021 Table 1: GPT 1.3B is 24 layers, h 2048, 16 heads (ffn 4h).
    check(table["gpt-1.3b"][:5] == ["24", "2048", "16", "16", "8192"], f"gpt-1.3b row {table['gpt-1.3b']}")
    check(table["gpt-175b"][-1] == "174.62B", f"gpt-175b parameters {table['gpt-175b']}")
    # Llama 3 8B (Dubey et al. 2024, Table 3; 8.03B on Meta's model card).
    check(table["llama3-8b"] == ["32", "4096", "32", "8", "14336", "2048", "128256", "swiglu",
                                 "rmsnorm", "rotary", "untied", "false", "8.03B"],
          f"llama3-8b row {table['llama3-8b']}")


def case_best(b, tmp):
    # `lynxsim best`: the top K on a small space, the winner written as a scenario and a plan
    # that `run` reproduces, its Megatron-LM arguments, the same stdout for any thread count,
    # and bad inputs as one-line errors.
    scenario = os.path.join(tmp, "small.yaml")
    with open(scenario, "w") as f:
        f.write("model: {layers: 4, hidden: 256, heads: 4, seq_len: 256, vocab: 4096}\n"
                "parallel: {tp: 1, pp: 1, dp: 1, micro_batch: 1, global_batch: 8}\n"
                "hardware: {profile: dgx-a100-80gb}\n")
    won = os.path.join(tmp, "won.yaml")
    plan = os.path.join(tmp, "plan.yaml")
    args = ["best", scenario, "--gpus", "4", "--top", "3", "--micro-batches", "1-2",
            "--virtual-stages", "1-2", "--dist-opt", "off"]
    p = run(b, *args, "--threads", "1", "--write-scenario", won, "--write-plan", plan, "--as-megatron-args")
    check("rank" in p.stdout and "tokens/s" in p.stdout and "headroom" in p.stdout, f"best table: {p.stdout}")
    check("configurations considered" in p.stdout and "pruned by the memory bound" in p.stdout,
          f"best says why the rest lost: {p.stdout}")
    check("--tensor-model-parallel-size" in p.stdout, "best --as-megatron-args")
    check("confirmed" in p.stderr and "/s" in p.stderr, f"best rates on stderr: {p.stderr}")
    ranked = [l for l in p.stdout.splitlines() if l.strip().startswith("1 ")]
    check(len(ranked) == 1, f"one winner line: {p.stdout}")
    winner = json.loads(run(b, "run", won, "--format", "json").stdout)
    check(f"{winner['tokens_per_s']:.0f}" in ranked[0], f"the written scenario runs the winner: {ranked[0]}")
    replay = json.loads(run(b, "run", "--plan", plan, "--format", "json").stdout)
    check(replay["iteration_time_s"] == winner["iteration_time_s"], "the written plan runs the winner")
    table = p.stdout.split("# ")[0]  # the report, before the Megatron-LM arguments' comments
    again = run(b, *args, "--threads", "3").stdout
    check(again == table, "best prints the same bytes for any thread count")
    err = run(b, "best", scenario, "--gpus", "4", "--top", "0", expect=1).stderr.strip()
    check(err.count("\n") == 0 and "--top 0" in err, f"--top 0: {err}")
    err = run(b, "best", scenario, "--gpus", "7", expect=1).stderr.strip()
    check(err.count("\n") == 0 and "no layout of 7 GPUs is valid" in err, f"--gpus 7: {err}")
    err = run(b, "best", scenario, expect=1).stderr.strip()
    check("--gpus N is required" in err, f"no --gpus: {err}")


def case_base_profile(b, tmp):
    # A short profile with base runs; one that leaves fields out and names no base is refused,
    # naming every missing field in one line.
    short = os.path.join(tmp, "site.yaml")
    with open(short, "w") as f:
        f.write("base: dgx-a100-80gb\ngpu:\n  memory: 40GiB\n")
    scenario = os.path.join(tmp, "s.yaml")
    with open(scenario, "w") as f:
        f.write("model: {preset: gpt-1.3b}\nparallel: {tp: 2, pp: 2, dp: 2, micro_batch: 2, "
                "global_batch: 32}\nhardware: {profile_file: site.yaml}\n")
    shown = run(b, "show", scenario).stdout
    check("memory: 40GiB" in shown, "the override applies")
    with open(short, "w") as f:
        f.write("gpu:\n  memory: 40GiB\n  peak: 312TFLOPS\n")
    err = run(b, "run", scenario, expect=1).stderr.strip()
    check(err.count("\n") == 0 and "site.yaml:1:1: hardware profile lacks 25 of its 27 fields"
          in err and "gpu.contention" in err and "base: NAME" in err, f"missing fields: {err}")


def case_lynx_example(b, tmp):
    # The shipped Lynx example must show what it promises: without recomputation it does not
    # fit, and lynx-heu hides recomputation in communication windows.
    example = "scenarios/examples/pcie-gpt1.3b-lynx.yaml"
    lynx = json.loads(run(b, "run", example, "--format", "json").stdout)
    # The engine may keep Lynx's plan without forward windows (still overlapped recompute).
    check(not lynx["oom"] and lynx["strategy_requested"] == "lynx-heu"
          and lynx["strategy"] in ("lynx-heu", "no-forward-windows"), f"lynx example fits: {lynx['strategy']}")
    hidden = sum(s["recompute_overlapped_s"] for s in lynx["stages"])
    check(hidden > 0, f"the lynx example overlaps recomputation (recompute_overlapped_s {hidden})")
    none = json.loads(run(b, "run", example, "--set", "recompute.strategy=none", "--format",
                          "json").stdout)
    check(none["oom"], "without recomputation the example does not fit")
    selective = json.loads(run(b, "run", example, "--set", "recompute.strategy=selective",
                               "--format", "json").stdout)
    check(lynx["iteration_time_s"] < selective["iteration_time_s"], "lynx beats selective here")



# Every case_NAME function is the CLI test NAME (tests/cli/CMakeLists.txt lists them).
CASES = {name[len("case_"):]: f for name, f in list(globals().items()) if name.startswith("case_")}

if __name__ == "__main__":
    binary, case = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        CASES[case](binary, tmp)
    print(f"cli {case}: ok")
