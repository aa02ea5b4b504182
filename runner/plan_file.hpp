#pragma once
/// The plan file of a run: what `lynxsim plan` writes and the Python module's plan() returns.
#include "runner/simulate.hpp"
#include "strategies/plan_yaml.hpp"

namespace lynx::runner {

/// The run's plan, the resolved scenario it was made for, and how it was made (provenance).
strategies::PlanFile plan_file_of(const SimRun& run);

}  // namespace lynx::runner
