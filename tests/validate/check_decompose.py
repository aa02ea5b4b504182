#!/usr/bin/env python3
"""tools/decompose_validation.py recovers the four components it claims to: rows built from
known a, c, e, d (time = a*L*m + c*L + e*m + d) come back as those numbers, per group and per
series, and a group that cannot separate them (one micro-batch count) is left out."""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "decompose_validation.py"
HEADER = ("line,gpus,global_batch,micro_batch,hidden,heads,layers,seq_len,tp,dp,pp,"
          "measured_ms,predicted_ms,error_percent,oom,settings\n")

# (tp, hidden, micro-batch) -> (a, c, e, d) of the measured times; predictions: each doubled,
# except d (so the second series differs in every component but one).
TRUTH = {(1, 1024, 1): (3.0, 0.4, 6.8, 2.5), (2, 2048, 2): (4.6, 0.6, 5.5, 3.75)}


def rows():
    line = 2
    out = []
    for (tp, h, mb), (a, c, e, d) in TRUTH.items():
        dp = 2
        for layers in (12, 16, 20, 24):
            for m in (2, 4, 8):
                measured = a * layers * m + c * layers + e * m + d
                predicted = 2 * a * layers * m + 2 * c * layers + 2 * e * m + d
                gb = m * mb * dp
                out.append(f"{line},{tp * dp},{gb},{mb},{h},16,{layers},1024,{tp},{dp},1,"
                           f"{measured},{predicted},0,false,\n")
                line += 1
    # One micro-batch count only: a and e are not separable, the group must be skipped.
    for layers in (12, 24):
        out.append(f"{line},8,8,4,1024,16,{layers},1024,8,1,1,10,10,0,false,\n")
        line += 1
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "rows.csv"
        path.write_text("# lynxsim validate: synthetic on test-profile\n" + HEADER + "".join(rows()))
        out = subprocess.run([sys.executable, str(TOOL), str(path)], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
    tables = {}
    current = None
    for line in out.splitlines():
        if line[:2] in ("a:", "c:", "e:", "d:"):
            current = line[0]
        elif current and line.startswith("| ") and line[2].isdigit():
            cells = [c.strip() for c in line.strip("|").split("|")]
            tables[(current, int(cells[0]), int(cells[1]), int(cells[2]))] = [float(x) for x in cells[3:]]
    errors = []
    for (tp, h, mb), truth in TRUTH.items():
        for comp, value in zip("aced", truth):
            got = tables.get((comp, tp, h, mb))
            want = [value, value if comp == "d" else 2 * value]
            if got is None or any(abs(g - w) > 0.01 for g, w in zip(got, want)):
                errors.append(f"{comp} at tp {tp} h {h} mb {mb}: got {got}, want {want}")
    if any(key[1] == 8 for key in tables):
        errors.append("the group with one micro-batch count was decomposed")
    if "test-profile" not in out:
        errors.append("the profile name from the CSV header is not in the output")
    if errors:
        sys.exit("\n".join(errors) + "\n--- output ---\n" + out)
    print(f"ok: {len(tables)} components recovered")


if __name__ == "__main__":
    main()
