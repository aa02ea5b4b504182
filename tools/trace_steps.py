#!/usr/bin/env python3
"""Exact mode's pipeline steps from a trace, to compare with fast mode's composed steps.

    build/lynxsim run --set ... --trace TRACE.json
    build/bench/fast_bench --timeline "CONFIG" > FAST.txt     # CONFIG: a line of tests/fast/configs*.txt
    python3 tools/trace_steps.py TRACE.json [--replica D] [--compare FAST.txt [--above MS]]

For GPU tp0 of each stage of data-parallel replica D (default 0), every step (micro-batch,
chunk, forward/backward) with its first compute-stream start, its last compute / TP / recompute
end, its TP communication time, and its pipeline send, in ms, in fast_bench --timeline's format.
A step is a backward when its task name is a gradient pass (_dgrad, _wgrad, _bwd, a recompute
.re., send_gradient). With --compare: per stage, the steps whose length differs by at least MS
(default 0.5) from fast mode's, and the sum of the length errors (bias), of their absolute values
(scatter), and how much is over / under.
"""
import argparse
import json
import re
import sys

STEP = re.compile(r"\s+mb(\d+) c(\d+) (F|B)\s+start\s+([\d.]+) end\s+([\d.]+) len\s+([\d.]+)(.*)")
BACKWARD = re.compile(r"(_dgrad|_wgrad|_bwd|\.re\.|send_gradient)")


def exact_steps(trace, replica):
    events = json.load(open(trace))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    out = []
    for pid, name in sorted(names.items()):
        if not name.endswith(f".dp{replica}.tp0"):
            continue
        steps, sends = {}, {}
        for e in events:
            if e.get("pid") != pid or e.get("ph") != "X":
                continue
            m = re.match(r"mb(\d+)\.c(\d+)\.", e["name"])
            if not m:
                continue
            key = (int(m.group(1)), int(m.group(2)), "B" if BACKWARD.search(e["name"]) else "F")
            if e["tid"] == 2:  # pp stream
                sends[key] = (e["ts"], e["ts"] + e["dur"])
                continue
            if e["tid"] not in (0, 1, 4):  # compute, tp, recompute
                continue
            s = steps.setdefault(key, [float("inf"), 0.0, 0.0])
            s[0] = min(s[0], e["ts"])
            s[1] = max(s[1], e["ts"] + e["dur"])
            if e["tid"] == 1:
                s[2] += e["dur"]
        out.append((name.split(".")[0], sorted(steps.items(), key=lambda kv: kv[1][0]), sends))
    if not out:
        sys.exit(f"{trace}: no GPU named stageS.dp{replica}.tp0 (trace every stage of replica {replica})")
    return out


def print_exact(stages):
    for stage, steps, sends in stages:
        print(stage)
        for key, (a, b, tp) in steps:  # trace times are in us
            line = f"  mb{key[0]} c{key[1]} {key[2]}  start {a / 1e3:9.3f} end {b / 1e3:9.3f} len {(b - a) / 1e3:7.3f} tp {tp / 1e3:6.3f}"
            if key in sends:
                s, e = sends[key]
                line += f"  send {s / 1e3:9.3f}-{e / 1e3:9.3f} ({(e - s) / 1e3:.3f})"
            print(line)


def fast_steps(path):
    out, stage = {}, None
    for line in open(path):
        if line.startswith("stage"):
            stage = line.split()[0]
            continue
        m = STEP.match(line)
        if m and stage:
            out[(stage, int(m.group(1)), int(m.group(2)), m.group(3))] = (float(m.group(4)), float(m.group(6)))
    return out


def compare(stages, fast, above_ms):
    for stage, steps, _ in stages:
        errors = []
        print(stage)
        for key, (a, b, _) in steps:
            f = fast.get((stage,) + key)
            if f is None:
                continue
            err = f[1] - (b - a) / 1e3
            errors.append(err)
            if abs(err) >= above_ms:
                print(f"  mb{key[0]} c{key[1]} {key[2]}  start exact {a / 1e3:9.3f} fast {f[0]:9.3f}  "
                      f"len exact {(b - a) / 1e3:7.3f} fast {f[1]:7.3f} ({err:+.3f})")
        print(f"  {len(errors)} steps: length error sum {sum(errors):+.3f} ms, sum of |errors| {sum(abs(e) for e in errors):.3f}, "
              f"over {sum(e for e in errors if e > 0):+.3f}, under {sum(e for e in errors if e < 0):+.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--replica", type=int, default=0)
    ap.add_argument("--compare", help="fast_bench --timeline output of the same configuration")
    ap.add_argument("--above", type=float, default=0.5, help="with --compare: list steps off by at least this (ms)")
    args = ap.parse_args()
    stages = exact_steps(args.trace, args.replica)
    if args.compare:
        compare(stages, fast_steps(args.compare), args.above)
    else:
        print_exact(stages)


if __name__ == "__main__":
    main()
