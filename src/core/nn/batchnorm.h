// How the CPU batch-norm backward writes dx (batchnorm_cpp.cc): kAuto with
// non-temporal stores once x, dy and dx together reach kBnStreamBytes,
// kForce always (tests), kOff never. SINGA_BN_STREAM=off|auto|force sets
// the initial mode.
#ifndef SINGA_SRC_CORE_NN_BATCHNORM_H_
#define SINGA_SRC_CORE_NN_BATCHNORM_H_

#include <cstddef>

namespace singa {
namespace cpu {

constexpr size_t kBnStreamBytes = size_t(24) << 20;

enum class BnStreamMode { kOff, kAuto, kForce };
void SetBnStreamMode(BnStreamMode mode);
BnStreamMode GetBnStreamMode();

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_BATCHNORM_H_
