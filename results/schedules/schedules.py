#!/usr/bin/python3
"""1F1B vs ZB-H1 x none / full / selective / lynx-heu on two paper scenarios (issue 13, sec. 3).

Usage (from the repository root):
    /usr/bin/python3 results/schedules/schedules.py build/lynxsim [OUT_DIR]

Runs `lynxsim run scenarios/paper/SCENARIO.yaml --set parallel.schedule=S
--set recompute.strategy=R --format csv` for every combination (exact mode), and writes to
OUT_DIR (default results/schedules): schedules.csv (one row per pipeline stage, the run's
fields repeated, with the schedule and scenario file in front), schedules.md (the table) and
schedules.png (the figure). Standard library + matplotlib only; headless (Agg).
"""
import csv
import io
import os
import subprocess
import sys

SCENARIOS = ["nvlink-gpt-2.7b", "pcie-gpt-13b"]
SCHEDULES = ["1f1b", "zb-h1"]
STRATEGIES = ["none", "full", "selective", "lynx-heu"]
GIB = 1024.0 ** 3


def run_one(lynxsim, scenario, schedule, strategy):
    """The per-stage CSV rows of one run, as dicts."""
    cmd = [lynxsim, "run", f"scenarios/paper/{scenario}.yaml", "--set", f"parallel.schedule={schedule}",
           "--set", f"recompute.strategy={strategy}", "--format", "csv"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    for row in rows:
        row["scenario_file"] = scenario
        row["schedule"] = schedule
    return rows


def summarise(rows):
    """One summary per (scenario, schedule, strategy): run fields and per-stage means."""
    runs = {}
    for row in rows:
        key = (row["scenario_file"], row["schedule"], row["strategy_requested"])
        runs.setdefault(key, []).append(row)
    out = {}
    for key, stages in runs.items():
        first = stages[0]
        f = lambda name: [float(s[name]) for s in stages]
        out[key] = {
            "ran": first["strategy"],
            "time_s": float(first["iteration_time_s"]),
            "tokens_per_s": float(first["tokens_per_s"]),
            "mfu": float(first["mfu"]),
            "peak_gib": float(first["peak_memory_bytes"]) / GIB,
            "capacity_gib": float(first["memory_capacity_bytes"]) / GIB,
            "oom": first["oom"] == "true",
            # Per-stage shares: stage 0 (the one that holds the most) and the pipeline's mean.
            "bubble_s": sum(f("bubble_s")) / len(stages),
            "tp_exposed_s": sum(f("tp_exposed_s")) / len(stages),
            "recompute_s": sum(f("recompute_s")) / len(stages),
            "overlapped_s": sum(f("recompute_overlapped_s")) / len(stages),
        }
    return out


def table(summary):
    lines = [
        "| scenario | schedule | strategy (ran) | iteration s | tokens/s | × 1F1B-full | MFU | peak GiB | bubble s | TP exposed s | recompute exposed s | overlapped s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS:
        base = summary.get((scenario, "1f1b", "full"))
        for schedule in SCHEDULES:
            for strategy in STRATEGIES:
                r = summary.get((scenario, schedule, strategy))
                if r is None:
                    continue
                name = strategy if r["ran"] == strategy else f"{strategy} ({r['ran']})"
                speedup = "OOM" if r["oom"] else (f"{r['tokens_per_s'] / base['tokens_per_s']:.3f}" if base and not base["oom"] else "n/a")
                peak = f"{r['peak_gib']:.1f}" + (" OOM" if r["oom"] else "")
                lines.append(
                    f"| {scenario} | {schedule} | {name} | {r['time_s']:.3f} | {r['tokens_per_s']:.0f} | {speedup} | "
                    f"{r['mfu']:.3f} | {peak} | {r['bubble_s']:.3f} | {r['tp_exposed_s']:.3f} | "
                    f"{r['recompute_s']:.3f} | {r['overlapped_s']:.3f} |")
    lines.append("")
    lines.append("Per-stage columns (bubble, TP exposed, recompute) are means over the pipeline stages, in seconds per "
                 "iteration; × 1F1B-full is tokens/s over 1F1B with full recomputation of the same scenario; "
                 "every number is simulated (exact mode).")
    return "\n".join(lines) + "\n"


def figure(summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(SCENARIOS), figsize=(7, 3.2), dpi=200, sharey=False)
    width = 0.38
    colors = {"1f1b": "#4c72b0", "zb-h1": "#dd8452"}
    for ax, scenario in zip(axes, SCENARIOS):
        base = summary.get((scenario, "1f1b", "full"))
        for i, schedule in enumerate(SCHEDULES):
            xs, ys, labels = [], [], []
            for j, strategy in enumerate(STRATEGIES):
                r = summary.get((scenario, schedule, strategy))
                if r is None or base is None:
                    continue
                x = j + (i - 0.5) * width
                if r["oom"]:
                    ax.bar(x, 0.05, width, color=colors[schedule], hatch="///", alpha=0.5)
                    ax.text(x, 0.07, "OOM", ha="center", va="bottom", fontsize=5, color="red", rotation=90)
                    continue
                y = r["tokens_per_s"] / base["tokens_per_s"]
                ax.bar(x, y, width, color=colors[schedule], label=schedule if j == 0 or not labels else None)
                ax.text(x, y + 0.01, f"{y:.2f}", ha="center", va="bottom", fontsize=5)
                labels.append(strategy)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.6)
        ax.set_xticks(range(len(STRATEGIES)))
        ax.set_xticklabels(STRATEGIES, fontsize=6)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(scenario, fontsize=7)
        ax.set_ylabel("tokens/s ÷ 1F1B full", fontsize=6)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in SCHEDULES]
    fig.legend(handles, ["1F1B", "ZB-H1"], loc="upper center", ncol=2, fontsize=6, frameon=False)
    fig.suptitle("Simulated: schedule × recomputation (lynxsim, exact mode)", fontsize=7, y=0.02)
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    fig.savefig(path)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lynxsim = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "results/schedules"
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for scenario in SCENARIOS:
        for schedule in SCHEDULES:
            for strategy in STRATEGIES:
                print(f"{scenario} {schedule} {strategy}", file=sys.stderr, flush=True)
                rows.extend(run_one(lynxsim, scenario, schedule, strategy))
    columns = ["scenario_file", "schedule"] + [c for c in rows[0] if c not in ("scenario_file", "schedule")]
    with open(os.path.join(out_dir, "schedules.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    summary = summarise(rows)
    with open(os.path.join(out_dir, "schedules.md"), "w") as f:
        f.write(table(summary))
    figure(summary, os.path.join(out_dir, "schedules.png"))
    print(table(summary))


if __name__ == "__main__":
    main()
