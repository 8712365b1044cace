// Sliding-window helpers shared by the convolution and pooling kernels.
#ifndef SINGA_SRC_CORE_NN_WINDOW_H_
#define SINGA_SRC_CORE_NN_WINDOW_H_

#include <algorithm>

namespace singa {
namespace cpu {

// Output positions o in [lo, hi) for which o * s + off lies in [0, in).
inline void ValidRange(int out, int s, int off, int in, int* lo, int* hi) {
  int l = off >= 0 ? 0 : (-off + s - 1) / s;
  int last = in - 1 - off;
  int h = last < 0 ? 0 : last / s + 1;
  l = std::min(l, out);
  h = std::min(h, out);
  *lo = l;
  *hi = std::max(h, l);
}

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINDOW_H_
