// The env_config_path reader (MindSpore's environment config file: {"rdr": {...}, "sys": {...}}):
// any file is read into a complete config (every field present, of its type) or refused with an
// error naming the file; setting env_config_path to a file it accepts succeeds.

#include "context/context.h"
#include "context/value_parsing.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("env_config", data, size);
  context::Json config;
  if (!fuzz::accepts([&] { config = context::read_env_config(file.string()); })) return 0;
  if (!config.is_object() || !config.contains("rdr") || !config.contains("sys") ||
      !config["rdr"].is_object() || !config["sys"].is_object()) {
    fuzz::broken("an accepted env_config_path file is not filled in to {rdr, sys}");
  }
  if (!fuzz::accepts([&] { context::set({{"env_config_path", file.string()}}); })) {
    fuzz::broken("a file read_env_config accepted fails as env_config_path");
  }
  context::reset();
  return 0;
}
