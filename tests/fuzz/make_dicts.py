#!/usr/bin/env python3
"""Writes tests/fuzz/dict/NAME.dict (libFuzzer dictionaries) from the repository's own inputs:
every YAML key in the seed files, the unit suffixes and the enum words the readers accept.
Run from the repository root after the seeds change: python3 tests/fuzz/make_dicts.py"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"

UNITS = ["B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "B/s", "GB/s", "Gb/s", "Tb/s",
         "b/s", "FLOPS", "TFLOPS", "PFLOPS", "FLOP/s", "ps", "ns", "us", "ms", "s", "k", "M", "G"]
WORDS = ["true", "false", "1f1b", "gpipe", "interleaved", "zb-h1", "bucketed", "end", "balanced", "uniform",
         "block", "none", "full", "selective", "checkmate", "lynx-heu", "lynx-opt", "keep", "demand",
         "overlap", "bwd-tp", "pp-wait", "fwd-tp", "post", "proj", "core", "mlp", "moe_act", "input", "ring",
         "tree", "gpt-1.3b", "gpt-13b", "gpt-175b", "dgx-a100-80gb", "a100-pcie-40gb",
         "dgx-h100-80gb", "h200-sxm-141gb", "---", "~", "null", "{}", "[]", "&a", "*a", "<<",
         "!!int", "!!str", "0x", "1e308", "-0", ".inf", ".nan", "2147483647", "2147483648",
         "9223372036854775807", "-9223372036854775808", "18446744073709551616"]


# plan-file keys (strategies/plan_yaml.cpp)
PLAN_WORDS = [k + ":" for k in ["lynxsim_plan", "strategy", "provenance", "scenario", "stages",
                                "virtual_stage", "first_layer", "layers", "layer", "drop", "mode",
                                "window", "rerun_whole_groups", "lynxsim_version",
                                "strategy_requested", "strategy_won", "search_seconds",
                                "baseline_seconds", "confirm_rounds", "windows", "stage", "status",
                                "feasible", "exposed_us_per_micro_batch", "activation_bytes",
                                "budget_bytes", "gap", "inner_us", "top_us"]]


def yaml_keys(paths):
    keys = set()
    for path in paths:
        for line in path.read_text().splitlines():
            m = re.match(r"^\s*(?:- )?([A-Za-z_][A-Za-z0-9_.-]*):", line)
            if m:
                keys.add(m.group(1))
    return keys


def write(name, tokens):
    out = FUZZ / "dict" / f"{name}.dict"
    lines = [f"# libFuzzer dictionary for fuzz_{name}; written by tests/fuzz/make_dicts.py"]
    for t in sorted(set(tokens)):
        escaped = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\x{ord(c):02x}"
                          for c in t)
        lines.append('"' + escaped + '"')
    out.write_text("\n".join(lines) + "\n")


def main():
    scenarios = sorted(ROOT.glob("scenarios/*/*.yaml")) + sorted(ROOT.glob("tests/golden/scenarios/*.yaml"))
    profiles = sorted(ROOT.glob("hw_models/profiles/*.yaml"))
    seeds = {"scenario": scenarios + profiles, "profile": profiles,
             "plan": scenarios + profiles + [ROOT / "strategies" / "plan_yaml.cpp"]}
    for name, files in seeds.items():
        write(name, [k + ":" for k in yaml_keys(files)] + UNITS + WORDS + PLAN_WORDS * (name == "plan"))
    write("validate_csv", ["#", ",", "\r\n", "\n", " ", "0", "1", "-1", "1.5", "1e3", "nan", "inf",
                           "2147483647", "2147483648", "536870912", "1024", "16384",
                           # headed form (validate/measured_runs.cpp): core and settings columns
                           "gpus", "global_batch", "micro_batch", "hidden", "heads", "layers",
                           "seq_len", "tp", "dp", "pp", "iteration_ms", "iteration_s",
                           "recompute", "sequence_parallel", "virtual_stages", "schedule",
                           "ffn_hidden", "vocab", "parallel.tp", "model.preset",
                           "hardware.nodes", "hardware.profile", "full", "true", "interleaved"])


if __name__ == "__main__":
    main()
