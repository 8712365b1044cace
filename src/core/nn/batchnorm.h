// How the CPU batch-norm backward writes dx (batchnorm_cpp.cc): with
// non-temporal stores once x, dy and dx together reach kBnStreamBytes
// (kAuto), always (kForce) or never (kOff); SINGA_BN_STREAM sets the
// initial mode.
#ifndef SINGA_SRC_CORE_NN_BATCHNORM_H_
#define SINGA_SRC_CORE_NN_BATCHNORM_H_

#include <cstddef>

#include "path_mode.h"

namespace singa {
namespace cpu {

constexpr size_t kBnStreamBytes = size_t(24) << 20;

using BnStreamMode = PathMode;
void SetBnStreamMode(BnStreamMode mode);
BnStreamMode GetBnStreamMode();

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_BATCHNORM_H_
