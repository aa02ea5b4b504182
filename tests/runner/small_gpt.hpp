#pragma once
// Shared by the runner tests: a small GPT scenario built in code.
#include "model/resolved_scenario.hpp"

namespace lynx::test {

/// A small GPT on one DGX A100 node: s = 512, b = 2, h = 1024, a = 16.
inline Scenario small_gpt(int layers, int tp, bool sp, RecomputeKind strategy) {
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.layers = layers;
  sc.model.hidden = 1024;
  sc.model.heads = 16;
  sc.model.seq_len = 512;
  sc.model.vocab = 51200;
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = tp;
  sc.parallel.sequence_parallel = sp;
  sc.parallel.micro_batch = 2;
  sc.parallel.global_batch = 2;
  sc.recompute.strategy = strategy;
  return sc;
}

}  // namespace lynx::test
