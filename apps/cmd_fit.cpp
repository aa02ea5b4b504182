// `lynxsim fit`: turn lynxsim-calibrate measurements into a hardware profile.
#include "apps/cli.hpp"
#include "calibrate/fit_command.hpp"
#include "common/error.hpp"

#include <iostream>

namespace lynx::apps {

int cmd_fit(const std::vector<std::string>& argv) {
  calibrate::FitCommandOptions options;
  po::options_description desc("fit options");
  desc.add_options()("help,h", "show this help")(
      "raw", po::value(&options.raw_csv_paths)->composing(), "raw CSV(s) from lynxsim-calibrate")(
      "base", po::value(&options.base_profile),
      "built-in profile name or profile file the fit starts from (default h200-sxm-141gb)")(
      "out,o", po::value(&options.output_path), "write the fitted profile YAML here")(
      "name", po::value(&options.profile_name), "profile name (default <base>-calibrated)")(
      "dtype", po::value(&options.fit.dtype), "bf16 | fp16: which GEMM rows to fit (default bf16)");
  po::positional_options_description pos;
  pos.add("raw", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argv).options(desc).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: lynxsim fit RAW.csv [RAW2.csv ...] [--base PROFILE] [-o FITTED.yaml] "
                 "[--name NAME] [--dtype bf16|fp16]\n\n"
              << desc << "\n";
    return 0;
  }
  po::notify(vm);
  if (options.raw_csv_paths.empty()) fail(ErrorCode::kMissingArgument, "fit: give at least one raw CSV from lynxsim-calibrate");
  std::cout << calibrate::run_fit_command(options).text;
  return 0;
}

}  // namespace lynx::apps
