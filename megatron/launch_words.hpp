#pragma once
/// The words of a Megatron-LM launch line or launch script, read the way a POSIX shell would
/// read the parts that matter: quotes, backslash-newline continuations, comments, `NAME=value`
/// assignments and bash arrays (`ARGS=( --a 1 --b 2 )`, expanded by `${ARGS[@]}`), `$VAR`,
/// `${VAR}` and `${VAR:-default}`. Nothing is executed: `$(...)`, `$((...))`, backticks and
/// variables set nowhere stay unresolved, and the option that needs one reports it.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lynx::megatron {

/// One word after expansion, with where it started in the text.
struct LaunchWord {
  std::string text;        ///< the word, quotes removed, variables substituted
  std::string origin;      ///< "LABEL:LINE:COL"
  /// What this word needed and could not resolve, as written ("$TP", "$(nproc)"), or empty.
  std::string unresolved;
};

/// The arguments of the training script: the words after the first word ending in `.py`
/// (`torchrun ... pretrain_gpt.py --num-layers 96 ...`); without one, the words of every
/// command that starts with `--` (a bare argument list). `env` gives variables the text does
/// not set (`--megatron-env`); the process environment is never read, so results do not
/// depend on the shell lynxsim runs in. Throws lynx::Error (naming LABEL:LINE:COL) for an
/// unterminated quote or when the text holds no arguments.
std::vector<LaunchWord> launch_words(std::string_view text, const std::string& label,
                                     const std::map<std::string, std::string>& env = {});

}  // namespace lynx::megatron
