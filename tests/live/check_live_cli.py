#!/usr/bin/python3
"""End-to-end checks of `lynxsim live`: the dry run, the host backend's outputs feeding
`lynxsim fit` (plan -> live -> fit), one-line refusals, a plan over two nodes, and the
bootstrap under mpirun.

Usage: check_live_cli.py LYNXSIM_BINARY CASE [with-mpi|without-mpi]
       (CASE: dry_run, host_fit, errors, multi_node, watchdog, run_as)
       check_live_cli.py LYNXSIM_BINARY mpi MPIEXEC PROCESSES TEST_LIVE_MPI
       (exit 77: mpirun is not Open MPI, skipped)
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

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
    for text in ("streams per rank: compute tp pp dp recompute pp_grad pp_recv", "rank 0 (stage0.dp0.tp0)",
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


def case_watchdog(b, tmp):
    """A rank that never arrives (the test hook) stops the host run within --timeout-op with one
    line naming the rank, the op and its communicator; a normal run with the limits on passes."""
    plan = os.path.join(tmp, "plan.yaml")
    run(b, "plan", SCENARIO, "--set", "parallel.pp=1", "-o", plan)  # ranks 0 and 1, one TP group
    limits = ["--timeout-comm-init", "1", "--timeout-op", "2", "--timeout-iteration", "20"]
    out = run(b, "live", plan, "--backend", "host", "--iterations", "2", *limits).stdout
    check("live run of" in out and "iteration" in out, f"normal run with the limits on: {out}")
    start = time.monotonic()
    p = subprocess.run([b, "live", plan, "--backend", "host", "--timeout-op", "0.3"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, LYNXSIM_LIVE_TEST_STALL="op:1:0"))
    wall = time.monotonic() - start
    lines = p.stderr.splitlines()
    check(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("lynxsim: error E903 (system-failure): live: watchdog: rank 0 (")
          and "waited 0.3 s (--timeout-op) in op '" in lines[0] and lines[0].endswith("on communicator tp[0,1]; rank 1 never arrived"),
          f"stalled rank: exit {p.returncode}, stderr: {p.stderr}")
    print(f"stalled run ended after {wall:.2f} s (op limit 0.3 s)")
    p = subprocess.run([b, "live", plan, "--backend", "host"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LYNXSIM_LIVE_TEST_STALL="somewhere"))
    check(p.returncode == 1 and "E802" in p.stderr and "LYNXSIM_LIVE_TEST_STALL=somewhere" in p.stderr, f"bad hook: {p.stderr}")


def case_run_as(b, tmp):
    """FP8 / TP-comm-overlap plans: refused naming the flag; with --run-as-bf16-unchunked the dry
    run and the host run say what runs."""
    plan = os.path.join(tmp, "plan.yaml")
    run(b, "plan", SCENARIO, "--set", "parallel.pp=1", "--set", "parallel.sequence_parallel=true",
        "--set", "parallel.tp_comm_overlap=true", "--set", "model.gemm_precision=fp8",
        "--set", "hardware.profile=dgx-h100-80gb", "-o", plan)
    p = run(b, "live", "--dry-run", plan, expect=1)
    check("E304" in p.stderr and "key 'parallel.tp_comm_overlap'" in p.stderr and "--run-as-bf16-unchunked" in p.stderr
          and p.stderr.count("\n") == 1, f"refused: {p.stderr}")
    note = ("run as bf16 without chunked TP-comm overlap, not as the plan asks (--run-as-bf16-unchunked: "
            "parallel.tp_comm_overlap=false, model.gemm_precision=bf16); predicted for what runs")
    out = run(b, "live", "--dry-run", plan, "--run-as-bf16-unchunked").stdout
    check(out.splitlines()[1] == note, f"dry run header says so: {out[:400]}")
    out = run(b, "live", plan, "--backend", "host", "--iterations", "1", "--run-as-bf16-unchunked").stdout
    check(out.splitlines()[1] == note, f"report header says so: {out[:400]}")


def make_two_node_plan(b, tmp):
    """live-small at tp 2 x pp 2 x dp 2 over 2 nodes of 4 GPUs."""
    plan = os.path.join(tmp, "two-node.yaml")
    run(b, "plan", SCENARIO, "--set", "hardware.nodes=2", "--set", "hardware.gpus_per_node=4",
        "--set", "parallel.dp=2", "--set", "parallel.global_batch=8", "-o", plan)
    return plan


def refused(argv, env_extra, code, text):
    """argv ends in one coded error line containing `text`."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, **env_extra))
    lines = [l for l in p.stderr.splitlines() if " error " in l]
    check(p.returncode == 1 and len(lines) == 1 and f"error {code} (" in lines[0] and text in lines[0],
          f"{' '.join(argv[1:])} {env_extra}: exit {p.returncode}, stderr: {p.stderr}")


def case_multi_node(b, tmp):
    plan = make_two_node_plan(b, tmp)
    # The dry run and the host backend run every rank of both nodes in this one process.
    out = run(b, "live", "--dry-run", plan).stdout
    for text in ("processes: 2, one per node (mpirun -np 2 --map-by node lynxsim-live", "node 1: ranks 4,5,6,7 on devices 0,1,2,3",
                 "communicator pp 0->4: 2 ranks on nodes 0,1, NCCL id from node 0", "rank 7 (stage1.dp1.tp1)"):
        check(text in out, f"dry run prints '{text}'")
    out = run(b, "live", plan, "--backend", "host", "--iterations", "1").stdout
    check(len([l for l in out.splitlines() if l.startswith("peak_memory")]) == 8, f"host backend ran 8 ranks: {out}")
    # The CUDA backend needs one process per node: refused before any GPU is touched.
    spans = "the plan spans 2 nodes (8 GPUs, 4 per node)"
    if not WITH_MPI:  # a build without MPI cannot join nodes at all
        refused([b, "live", plan], {}, "E305", spans + ": it runs as one process per node joined by MPI, "
                "and this lynxsim-live was built without MPI")
        return
    refused([b, "live", plan], {}, "E807", spans + " and this process runs alone: start one process per node, "
            "e.g. `mpirun -np 2 --map-by node lynxsim-live PLAN.yaml`")
    refused([b, "live", plan], {"OMPI_COMM_WORLD_SIZE": "3"}, "E807", "3 processes were started but " + spans)
    refused([b, "live", plan, "--backend", "host"], {"OMPI_COMM_WORLD_SIZE": "2"}, "E807",
            "2 processes were started, but --dry-run and --backend host run every rank in one process")
    live = os.path.join(os.path.dirname(b), "lynxsim-live")
    if os.path.exists(live):  # built with CUDA: the same refusal, still before any GPU
        refused([live, plan], {}, "E807", spans + " and this process runs alone")


def case_mpi(b, mpiexec, processes, test_program):
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True)
    if not any(name in version.stdout + version.stderr for name in ("Open MPI", "open-mpi.org", "OpenRTE")):
        print("SKIP: mpirun is not Open MPI")
        sys.exit(77)
    # As tests/sweep: root in a container, 1-2 cores, shared memory for everything.
    mpirun = [mpiexec, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np"]
    out = run(mpiexec, *mpirun[1:], processes, test_program).stdout
    check(out.startswith(f"ok: {processes} processes"), f"exchange and gather under MPI: {out}")
    if processes == "2":
        # The watchdog: process 1 never arrives at an id broadcast; process 0 fails within its
        # 0.5 s limit naming the communicator, and the job ends (never a hang: timeout=120).
        start = time.monotonic()
        p = subprocess.run(mpirun + ["2", test_program, "stall"], capture_output=True, text=True, timeout=120)
        wall = time.monotonic() - start
        lines = [l for l in p.stderr.splitlines() if l.startswith("process 0: error: live: watchdog:")]
        check(p.returncode != 0 and len(lines) == 1 and "node 0 of 2 waited 0.5 s in creating communicator " in lines[0]
              and "(--timeout-comm-init); a node never arrived" in lines[0], f"stalled node: exit {p.returncode}\n{p.stderr}")
        print(f"stalled id exchange: job ended after {wall:.2f} s (limit 0.5 s)")
    live = os.path.join(os.path.dirname(b), "lynxsim-live")
    if processes != "2" or not os.path.exists(live):
        return
    with tempfile.TemporaryDirectory() as tmp:
        plan = make_two_node_plan(b, tmp)
        # 3 processes for 2 nodes: every process refuses (with its node), the job ends.
        p = subprocess.run(mpirun + ["3", live, plan], capture_output=True, text=True, timeout=120)
        check(p.returncode != 0 and "of 3: error E807 (launcher-mismatch): live: 3 processes were started" in p.stderr,
              f"3 processes refused: exit {p.returncode}\n{p.stderr}")
        # 2 processes: the start is right; without a GPU a node fails up front and the job
        # ends (MPI_Abort), never a hang; with GPUs it runs and process 0 alone reports.
        p = subprocess.run(mpirun + ["2", live, plan, "--iterations", "1"], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            check("lynxsim-live: node " in p.stderr and " of 2: error E" in p.stderr, f"a node's error line: {p.stderr}")
        else:
            peaks = [l for l in p.stdout.splitlines() if l.startswith("peak_memory")]
            check(p.stdout.count("live run of") == 1 and len(peaks) == 8, f"process 0 reports the 8 ranks once: {p.stdout}")


CASES = {"dry_run": case_dry_run, "host_fit": case_host_fit, "errors": case_errors, "multi_node": case_multi_node,
         "watchdog": case_watchdog, "run_as": case_run_as}

if __name__ == "__main__":
    binary, case = sys.argv[1], sys.argv[2]
    WITH_MPI = sys.argv[3:4] != ["without-mpi"]
    if case == "mpi":
        case_mpi(os.path.abspath(binary), sys.argv[3], sys.argv[4], sys.argv[5])
        print(f"live_mpi_{sys.argv[4]}_processes: ok")
        sys.exit(0)
    with tempfile.TemporaryDirectory() as tmp:
        CASES[case](os.path.abspath(binary), tmp)
    print(f"live_cli_{case}: ok")
