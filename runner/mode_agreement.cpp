#include "runner/mode_agreement.hpp"

#include "common/clock.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "model/resolved_scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace lynx::runner {

double ModeComparison::memory_error() const {
  double worst = 0;
  for (size_t s = 0; s < exact.stages.size() && s < fast.stages.size(); ++s) {
    const double e = static_cast<double>(exact.stages[s].peak_memory_bytes);
    const double f = static_cast<double>(fast.stages[s].peak_memory_bytes);
    worst = std::max(worst, std::abs(f - e) / e);
  }
  return worst;
}

bool ModeComparison::memory_equal() const {
  if (exact.stages.size() != fast.stages.size()) return false;
  for (size_t s = 0; s < exact.stages.size(); ++s)
    if (exact.stages[s].peak_memory_bytes != fast.stages[s].peak_memory_bytes) return false;
  return true;
}

std::vector<std::string> read_agreement_set(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_text_file(path, "agreement set", kMaxInputFileBytes));
  std::string line;
  while (std::getline(in, line)) {
    const std::string t{trim(line)};
    if (!t.empty() && t[0] != '#') out.push_back(t);
  }
  return out;
}

ModeComparison compare_modes(const std::string& config) {
  std::vector<std::string> overrides;
  for (const auto& word : split(config, ' '))
    if (!trim(word).empty()) overrides.emplace_back(trim(word));
  ModeComparison c;
  c.config = config;
  overrides.emplace_back("sim.mode=exact");
  auto t = WallClock::now();
  const SimRun exact = simulate(model::default_scenario(overrides));
  c.exact_seconds = seconds_since(t);
  c.exact = exact.result;
  c.overlapped = strategies::overlaps_recompute(exact.plan);
  overrides.back() = "sim.mode=fast";
  SimOptions options;
  options.plan = &exact.plan;
  t = WallClock::now();
  c.fast = simulate(model::default_scenario(overrides), options).result;
  c.fast_seconds = seconds_since(t);
  return c;
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double x = a[i] - a[j], y = b[i] - b[j];
      if (x == 0 && y == 0) continue;
      if (x == 0) ++ties_a;
      else if (y == 0) ++ties_b;
      else if ((x > 0) == (y > 0)) ++concordant;
      else ++discordant;
    }
  const double n = std::sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b));
  return n == 0 ? 1.0 : (concordant - discordant) / n;
}

}  // namespace lynx::runner
