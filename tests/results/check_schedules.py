#!/usr/bin/python3
"""Runs results/schedules/schedules.py with LYNXSIM into OUT_DIR and checks what it wrote: the
table has a row per (scenario, schedule, strategy), the CSV one row per pipeline stage of each,
the figure is a PNG. Usage: check_schedules.py LYNXSIM OUT_DIR (from the source root)."""
import csv
import subprocess
import sys

lynxsim, out_dir = sys.argv[1], sys.argv[2]
subprocess.run(["/usr/bin/python3", "results/schedules/schedules.py", lynxsim, out_dir], check=True,
               capture_output=True)
scenarios = {"nvlink-gpt-2.7b": 4, "pcie-gpt-13b": 4}  # pipeline stages of each
schedules, strategies = ["1f1b", "zb-h1"], ["none", "full", "selective", "lynx-heu"]
rows = [line for line in open(f"{out_dir}/schedules.md") if line.startswith("| ") and "---" not in line][1:]
assert len(rows) == len(scenarios) * len(schedules) * len(strategies), rows
for scenario in scenarios:
    for schedule in schedules:
        for strategy in strategies:
            assert any(r.startswith(f"| {scenario} | {schedule} | {strategy}") for r in rows), (scenario, schedule, strategy)
runs = {}
for r in csv.DictReader(open(f"{out_dir}/schedules.csv")):
    key = (r["scenario_file"], r["schedule"], r["strategy_requested"])
    runs[key] = runs.get(key, 0) + 1
assert runs == {(s, sch, st): scenarios[s] for s in scenarios for sch in schedules for st in strategies}, runs
with open(f"{out_dir}/schedules.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
print("ok")
