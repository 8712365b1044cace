// The switch of a kernel path that a measured rule chooses (Winograd,
// flat-shift convolution, streaming batch-norm stores): kAuto follows the
// rule, kForce takes the path wherever it applies (tests), kOff never. Each
// path reads its initial mode from an environment variable set to
// off|auto|force (doc/development.md lists them).
#ifndef SINGA_SRC_CORE_NN_PATH_MODE_H_
#define SINGA_SRC_CORE_NN_PATH_MODE_H_

#include <cstdlib>
#include <cstring>

namespace singa {
namespace cpu {

enum class PathMode { kOff, kAuto, kForce };

// "off" and "force" as named; anything else, or an unset variable, is kAuto.
inline PathMode PathModeFromEnv(const char* var) {
  const char* env = std::getenv(var);
  if (env && std::strcmp(env, "off") == 0) return PathMode::kOff;
  if (env && std::strcmp(env, "force") == 0) return PathMode::kForce;
  return PathMode::kAuto;
}

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_PATH_MODE_H_
