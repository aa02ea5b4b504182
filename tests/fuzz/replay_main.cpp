// A plain driver for the fuzz targets when libFuzzer is not there (gcc builds, CI): runs
// LLVMFuzzerTestOneInput once on every file named, or in the directories named, on the command
// line, in name order. A finding aborts the process (tests/fuzz/fuzz_check.hpp), so the CTest
// replay of the corpus and the reproducers fails on it; the failing file is printed first.
// Outside AddressSanitizer, memory is capped as libFuzzer's -rss_limit_mb=256 caps it.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

constexpr rlim_t kDataLimitBytes = rlim_t{256} << 20;  // as -rss_limit_mb=256

}  // namespace

int main(int argc, char** argv) {
  if (!kAsan) {  // ASan reserves terabytes of shadow: an address-space cap would stop it
    const rlimit limit{kDataLimitBytes, kDataLimitBytes};
    setrlimit(RLIMIT_DATA, &limit);
  }
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (std::filesystem::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s\n", file.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "replay: %zu input(s), no finding\n", files.size());
  return files.empty() ? 2 : 0;
}
