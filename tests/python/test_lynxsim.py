#!/usr/bin/python3
"""The lynxsim Python module's calls and errors (plain unittest, run by CTest with Debian's
/usr/bin/python3 and PYTHONPATH=build/python; LYNXSIM_CLI names the lynxsim binary, whose error
messages the module's must equal)."""
import json
import os
import pathlib
import subprocess
import unittest
import warnings

import lynxsim

CLI = os.environ.get("LYNXSIM_CLI", "build/lynxsim")
PCIE_13B = "scenarios/paper/pcie-gpt-13b.yaml"


class Calls(unittest.TestCase):
    def test_presets_and_fields(self):
        presets = {p["name"]: p for p in lynxsim.presets()}
        self.assertEqual(presets["gpt-175b"]["layers"], 96)
        self.assertEqual(presets["gpt-22b"]["hidden"], 6144)
        self.assertEqual(presets["gpt-22b"]["mlp"], "gelu")
        llama = presets["llama3-8b"]
        self.assertEqual((llama["kv_heads"], llama["ffn_hidden"], llama["vocab"]), (8, 14336, 128256))
        self.assertEqual((llama["mlp"], llama["norm"], llama["position_embedding"]), ("swiglu", "rmsnorm", "rotary"))
        self.assertEqual((llama["embeddings"], llama["linear_bias"]), ("untied", "false"))
        self.assertEqual(round(llama["parameters"] / 1e9, 2), 8.03)
        fields = {f["name"]: f for f in lynxsim.fields()}
        self.assertEqual(fields["iteration_time_s"]["level"], "run")
        self.assertEqual(fields["iteration_time_s"]["unit"], "s")
        self.assertEqual(fields["stage_peak_memory_bytes"]["level"], "stage")
        keys = {f["key"] for f in lynxsim.scenario_fields()}
        self.assertIn("parallel.tp", keys)
        self.assertIn("hardware.node.nic.bw", keys)

    def test_load_scenario_ways(self):
        default = lynxsim.load_scenario()
        self.assertEqual(default.name, "default")
        self.assertEqual(default.to_dict()["parallel"]["tp"], 2)
        from_file = lynxsim.load_scenario(pathlib.Path(PCIE_13B))
        self.assertEqual(from_file.name, "pcie-gpt-13b")
        text = "model: {preset: gpt-1.3b}\nparallel: {tp: 2, global_batch: 8}\nhardware: {profile: dgx-a100-80gb}\n"
        from_text = lynxsim.load_scenario(yaml=text, overrides={"parallel.tp": 4, "model.flash_attention": True})
        d = from_text.to_dict()
        self.assertEqual(d["parallel"]["tp"], 4)
        self.assertIs(d["model"]["flash_attention"], True)
        self.assertEqual(d["model"]["layers"], 24)
        as_list = lynxsim.load_scenario(yaml=text, overrides=["parallel.tp=4", "model.flash_attention=true"])
        self.assertEqual(as_list.yaml, from_text.yaml)
        self.assertIn("tp: 4", from_text.yaml)

    def test_simulate_and_rows(self):
        scenario = lynxsim.load_scenario(overrides={"recompute.strategy": "selective"})
        result = lynxsim.simulate(scenario)
        names = {f["name"] for f in lynxsim.fields() if f["level"] == "run"}
        self.assertEqual(set(result) - {"stages"}, names)
        self.assertGreater(result["iteration_time_s"], 0)
        self.assertEqual(result["strategy_requested"], "selective")
        self.assertEqual(len(result["stages"]), 2)
        self.assertIsInstance(result["oom"], bool)
        rows = lynxsim.rows([result, result])
        self.assertEqual(len(rows), 4)
        csv_columns = {f["name"] for f in lynxsim.fields() if f["in_csv"]}
        for row in rows:
            self.assertEqual(set(row), csv_columns)
            self.assertEqual(row["iteration_time_s"], result["iteration_time_s"])
        self.assertEqual([r["stage"] for r in lynxsim.rows(result)], [0, 1])

    def test_fusion_switches(self):
        # Megatron's fusion switches go through the scenario keys: on by default, off slower.
        base = {"model.preset": "gpt-1.3b", "model.layers": 4, "parallel.tp": 2, "parallel.pp": 1,
                "parallel.global_batch": 4, "recompute.strategy": "none"}
        fused = lynxsim.load_scenario(overrides=base)
        self.assertIs(fused.to_dict()["model"]["gradient_accumulation_fusion"], True)
        unfused = lynxsim.load_scenario(overrides=dict(base, **{"model.bias_dropout_fusion": False,
                                                                 "model.gradient_accumulation_fusion": False}))
        self.assertIs(unfused.to_dict()["model"]["bias_dropout_fusion"], False)
        self.assertIn("--no-bias-dropout-fusion", unfused.megatron_args())
        self.assertGreater(lynxsim.simulate(unfused)["iteration_time_s"],
                           lynxsim.simulate(fused)["iteration_time_s"])

    def test_plan(self):
        plan = lynxsim.plan(lynxsim.load_scenario(overrides={"recompute.strategy": "full"}))
        self.assertLessEqual({"scenario", "provenance", "stages"}, set(plan))
        self.assertEqual(plan["scenario"]["recompute"]["strategy"], "full")
        self.assertEqual(plan["provenance"]["strategy_requested"], "full")

    def test_megatron(self):
        line = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
                "--micro-batch-size 2 --global-batch-size 32 --tensor-model-parallel-size 2 "
                "--pipeline-model-parallel-size 2 --overlap-grad-reduce --bf16 --lr 1e-4")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = lynxsim.load_megatron(args=line, profile="dgx-a100-80gb", gpus=8)
        self.assertTrue(any("--lr" in str(w.message) for w in caught))
        d = s.to_dict()
        self.assertEqual((d["parallel"]["dp"], d["model"]["preset"]), (2, "gpt-1.3b"))
        self.assertIn("--tensor-model-parallel-size 2 \\\n", s.megatron_args())
        script = lynxsim.load_megatron(file=pathlib.Path("megatron/examples/train_gpt3_175b_distributed.sh"),
                                       profile="dgx-a100-80gb", gpus=1024)
        self.assertEqual(script.to_dict()["parallel"]["pp"], 16)


class Errors(unittest.TestCase):
    def test_error_type(self):
        self.assertTrue(issubclass(lynxsim.Error, RuntimeError))

    def test_bad_key(self):
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.load_scenario(overrides={"model.layer": 3})
        self.assertIn("did you mean 'model.layers'", str(e.exception))

    def test_bad_file(self):
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.load_scenario("no/such/file.yaml")
        self.assertIn("no/such/file.yaml", str(e.exception))
        self.assertEqual(e.exception.code, "E701")
        with self.assertRaises(lynxsim.Error):
            lynxsim.load_scenario(yaml="model: {preset: gpt-1.3b}\nparallel: {tp: 2\n")

    def test_layout_error_equals_the_cli(self):
        cli = subprocess.run([CLI, "run", PCIE_13B, "--set", "model.layers=41"],
                             capture_output=True, text=True)
        self.assertEqual(cli.returncode, 1)
        prefix = "lynxsim: error E301 (indivisible-layout): "
        self.assertTrue(cli.stderr.startswith(prefix), cli.stderr)
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.load_scenario(PCIE_13B, overrides={"model.layers": 41})
        self.assertEqual(str(e.exception), cli.stderr[len(prefix):].strip())
        self.assertEqual(e.exception.code, "E301")
        self.assertEqual(e.exception.code_name, "indivisible-layout")

    def test_megatron_refusal(self):
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.load_megatron(args="--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                                  "--seq-length 128 --micro-batch-size 1 --bf16 --squared-relu",
                                  profile="dgx-a100-80gb")
        self.assertIn("--squared-relu: not modelled by lynxsim yet", str(e.exception))

    def test_sweep(self):
        grid = {"base": {"model": {"layers": 4, "hidden": 256, "heads": 4, "seq_len": 256, "vocab": 4096},
                         "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 4},
                         "hardware": {"profile": "dgx-a100-80gb"}},
                "axes": {"parallel.tp": [1, 2, 3], "recompute.strategy": ["none", "selective"]}}
        rows = lynxsim.sweep(grid, threads=2)
        self.assertEqual([r["point"] for r in rows], [0, 1, 2, 3])  # tp 3 does not divide 4 heads
        self.assertEqual(rows[3]["parallel.tp"], "2")
        self.assertEqual(rows[3]["recompute.strategy"], "selective")
        one = lynxsim.simulate(lynxsim.load_scenario(yaml=json.dumps(grid["base"]),
                                                     overrides={"parallel.tp": 2, "recompute.strategy": "selective"}))
        self.assertEqual(rows[3]["iteration_time_s"], one["iteration_time_s"])
        again = lynxsim.sweep(grid, threads=1)  # the same rows (wall times aside)
        self.assertEqual([(r["point"], r["iteration_time_s"], r["peak_memory_bytes"]) for r in rows],
                         [(r["point"], r["iteration_time_s"], r["peak_memory_bytes"]) for r in again])
        self.assertTrue(lynxsim.rows(rows))
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.sweep({"base": grid["base"], "axes": {"parallel.tq": [1]}})
        self.assertIn("parallel.tq", str(e.exception))

    def test_best(self):
        small = lynxsim.load_scenario(yaml=json.dumps(
            {"model": {"layers": 4, "hidden": 256, "heads": 4, "seq_len": 256, "vocab": 4096},
             "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 8},
             "hardware": {"profile": "dgx-a100-80gb"}}))
        plans = lynxsim.best(small, gpus=4, top=3, threads=2)
        self.assertEqual([p["rank"] for p in plans], [1, 2, 3])
        times = [p["iteration_time_s"] for p in plans]
        self.assertEqual(times, sorted(times))
        self.assertEqual(plans[0]["gpus"], 4)
        self.assertGreater(plans[0]["headroom_gib"], 0)
        self.assertIn("tp ", plans[0]["plan"])
        self.assertTrue(lynxsim.rows(plans))
        with self.assertRaises(lynxsim.Error) as e:
            lynxsim.best(small, gpus=4, top=0)
        self.assertIn("--top 0", str(e.exception))


if __name__ == "__main__":
    unittest.main()
