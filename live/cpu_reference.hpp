#pragma once
/// CPU references of the project's memory-bound CUDA kernels (gpu/gpu_kernels.hpp), in fp32,
/// and the check that compares a kernel's output against one. The CUDA backend runs each
/// kernel once at small sizes on random data and checks it here before anything is timed.
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::live {

/// y = (x − mean)·rstd·γ + β per row of `cols`, eps 1e-5 (gpu::layernorm).
std::vector<float> layernorm_reference(const std::vector<float>& x, const std::vector<float>& gamma,
                                       const std::vector<float>& beta, std::int64_t rows, std::int64_t cols);
/// y = gelu(x + bias[col]), tanh approximation (gpu::bias_gelu).
std::vector<float> bias_gelu_reference(const std::vector<float>& x, const std::vector<float>& bias,
                                       std::int64_t rows, std::int64_t cols);
/// Scaled causal softmax per row; row r is query position r % seq_len (gpu::causal_softmax).
std::vector<float> causal_softmax_reference(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                            std::int64_t seq_len, float scale);
/// y = x·mask/keep_prob for the kernel's own mask (gpu::dropout): checks the output given the
/// mask, since the mask is the kernel's random draw.
std::vector<float> dropout_reference(const std::vector<float>& x, const std::vector<std::uint8_t>& mask,
                                     float keep_prob);
/// y = residual + (x + bias[col])·mask/keep_prob (gpu::dropout_residual).
std::vector<float> dropout_residual_reference(const std::vector<float>& x, const std::vector<float>& bias,
                                              const std::vector<float>& residual,
                                              const std::vector<std::uint8_t>& mask, std::int64_t rows,
                                              std::int64_t cols, float keep_prob);

/// Compares `actual` with `expected` element by element: |a − e| <= abs_tol + rel_tol·|e|.
/// Throws lynx::Error naming `what`, the first bad index and both values; also when every
/// expected value is 0 (a check on zeros proves nothing) or the sizes differ.
void check_close(const std::string& what, const std::vector<float>& actual, const std::vector<float>& expected,
                 float rel_tol, float abs_tol);
/// Checks that the kept fraction of `mask` is within `tolerance` of keep_prob.
void check_keep_fraction(const std::string& what, const std::vector<std::uint8_t>& mask, float keep_prob,
                         float tolerance);

}  // namespace lynx::live
