// Winograd driver: transforms the weights (threads split the row blocks of
// U) once per call, or once for as long as they stay unchanged when U is
// shared and the caller names the weights' stamp (the cache of
// weight_cache.cc), then runs blocks of tiles over the threads. A block
// writes only its own tiles' outputs, so no two threads write the same
// element and the result does not depend on the schedule.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>

#include "conv_threads.h"
#include "winograd.h"
#include "weight_cache.h"
#include "winograd_weight.h"

namespace singa {
namespace cpu {

namespace {

// V and M of one block of tiles stay within about this many floats (L2
// sized), or kFusedFloats (L3 sized) when each block transforms its own
// weights.
constexpr int64_t kBlockFloats = int64_t(1) << 16;
constexpr int64_t kFusedFloats = int64_t(1) << 21;
// A shared U above this many floats (256 channels and up) costs more in
// memory traffic than transforming the weights in every block (measured on
// ResNet-18's 256@8 and 512@4 layers at batch 8 to 64).
constexpr int64_t kSharedUFloats = int64_t(1) << 21;

WinogradMode& Mode() {
  static WinogradMode mode = PathModeFromEnv("SINGA_WINOGRAD");
  return mode;
}

int Rows() { SINGA_ISA_DISPATCH(WinoRows()); }
int Panel() { SINGA_ISA_DISPATCH(WinoPanel()); }
int NarrowPanel() { SINGA_ISA_DISPATCH(WinoNarrowPanel()); }
size_t WeightFloats(int K, int C, int tile) {
  SINGA_ISA_DISPATCH(WinoWeightFloats(K, C, tile));
}
void Weights(const float* w, int K, int C, bool flip, int tile, float* U,
             int kb0, int kb1) {
  SINGA_ISA_DISPATCH(WinoWeights(w, K, C, flip, tile, U, kb0, kb1));
}
size_t WorkFloats(const WinoJob& j, int64_t tiles) {
  SINGA_ISA_DISPATCH(WinoWorkFloats(j, tiles));
}
void Block(const WinoJob& j, int64_t t0, int64_t t1, int kb0, int kb1,
           float* work) {
  SINGA_ISA_DISPATCH(WinoBlock(j, t0, t1, kb0, kb1, work));
}

bool Qualifies(const ConvParams& p) {
  return p.kh == 3 && p.kw == 3 && p.sh == 1 && p.sw == 1 && p.dh == 1 &&
         p.dw == 1 && p.groups == 1;
}

std::atomic<int> forced_tile{0};

// The output tile side (4 or 2) for a pass with C input and K output
// channels over n planes of oh x ow outputs, or 0 where the implicit GEMM
// is faster. Measured on an AVX2 EPYC at one thread (ResNet-18 layers at
// batch 1 to 32, and 3 to 64 channels on 16x16 and 32x32 planes): the 4x4
// tiles win by 1.5x at 8 channels and 2.4-3.3x from 64 on, and lose with 3
// input channels, or when the tiles fill less than half a panel (a 4x4
// plane at batch 4, an 8x8 plane at batch 1), since every panel costs the
// same; planes that fill less than half of their tiles (2x2, or a single
// row) waste what Winograd saves. Where the 4x4 tiles do not pay, the 2x2
// ones are taken when their panels' multiply-adds are at most half the
// direct form's and U stays shared (see kSharedUFloats): 256 channels on
// an 8x8 plane at batch 1 took 0.55x the time (one thread). With weights
// the cache keeps (`kept`), U is shared, and tiles that fit one vector
// count as a panel of one vector (WinoBlock's narrow product): with
// AVX-512 the same layer's 16 tiles then take the 2x2 tiles, 0.53-0.56x
// the implicit GEMM's time at one thread alone; inside ResNet-18's batch-1
// forward, whose weights and transforms no longer fit in L3, the forward
// took 1.00x the time at one thread and 0.97x at two (Zen 5, alternating
// call by call).
int TileFor(int C, int K, int n, int oh, int ow, bool kept) {
  if (Mode() == WinogradMode::kOff) return 0;
  const int forced = forced_tile.load(std::memory_order_relaxed);
  if (Mode() == WinogradMode::kForce) return forced ? forced : 4;
  if (C < 8 || K < 8) return 0;
  const int64_t four = int64_t((oh + 3) / 4) * ((ow + 3) / 4);
  if (2 * n * four >= Panel() && 2 * int64_t(oh) * ow >= 16 * four)
    return forced ? forced : 4;
  const int64_t tiles = n * int64_t((oh + 1) / 2) * ((ow + 1) / 2);
  const int panel = kept && tiles <= NarrowPanel() ? NarrowPanel() : Panel();
  const int64_t lanes = (tiles + panel - 1) / panel * panel;
  if (2 * tiles >= panel && 2 * 16 * lanes <= 9 * int64_t(n) * oh * ow &&
      16 * int64_t(K) * C <= kSharedUFloats)
    return forced ? forced : 2;
  return 0;
}

// Runs the job, transforming w (see WinoWeights for flip) first into a
// shared U when that is small and the tiles are many, or when the weights'
// stamp lets the cache keep U for the next call (inference calls a layer
// again and again with the same weights); else each block transforms the
// row blocks of U as it needs them, which keeps a large U (36 K C floats,
// 38 MB for 512 channels) out of memory, and its blocks are made as large
// as the cache allows so the transforms are repeated seldom.
void Run(WinoJob j, const float* w, bool flip, uint64_t w_stamp) {
  const int R = Rows(), PW = Panel();
  const int64_t positions = j.positions();
  const int KB = (j.K + R - 1) / R;
  const int64_t N = j.tiles();
  const int64_t macs = int64_t(j.n) * j.oh * j.ow * j.K * j.C * 9;
  const int threads = ThreadsFor(macs);
  const int64_t chans = int64_t(j.C) + int64_t(KB) * R;
  const int64_t kc = int64_t(j.K) * j.C;
  const bool fused =
      positions * kc > kSharedUFloats || (kc > 4 * N * chans && w_stamp == 0);
  j.w = w;
  j.flip = flip;
  j.U = nullptr;
  std::shared_ptr<const float> kept;  // holds a cached U until the end
  if (!fused) {
    auto transform = [&](float* U) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
      for (int kb = 0; kb < KB; ++kb) Weights(w, j.K, j.C, flip, j.tile, U, kb, kb + 1);
    };
    const size_t floats = WeightFloats(j.K, j.C, j.tile);
    kept = CachedWeights(
        WeightKey{w_stamp, w, j.K, j.C, flip, j.tile, int(ActiveIsa())},
        floats, transform);
    if (kept) {
      j.U = kept.get();
    } else {
      float* U = ThreadWork(floats, 1);
      transform(U);
      j.U = U;
    }
  }

  int64_t per = std::max<int64_t>(
      1, (fused ? kFusedFloats : kBlockFloats) / (positions * chans));
  if (threads > 1) per = std::min(per, (N + threads - 1) / threads);
  per = std::max<int64_t>(PW, (per + PW - 1) / PW * PW);
  const int64_t blocks = (N + per - 1) / per;
  // Too few blocks for the threads: the output channels are split too (each
  // share transforms the block's input again). When the blocks divide the
  // threads, one share per thread and block balances the load with the
  // fewest repeated transforms: a 128-channel 16x16 plane at batch 1 (one
  // block) took 0.78x the time in two shares as in four at two threads
  // (AVX2 EPYC). Otherwise about two items per thread even out the load.
  int64_t want = 1;
  if (blocks < threads)
    want = threads % blocks == 0 ? threads / blocks
                                 : (2 * threads + blocks - 1) / blocks;
  const int shares = int(std::min<int64_t>(KB, want));
  const int kper = (KB + shares - 1) / shares;
  const int64_t items = blocks * shares;
  const size_t work = WorkFloats(j, per);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* buf = ThreadWork(work);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < items; ++i) {
      const int64_t b = i / shares;
      const int kb0 = int(i % shares) * kper;
      if (kb0 < KB)
        Block(j, b * per, std::min(N, (b + 1) * per), kb0,
              std::min(KB, kb0 + kper), buf);
    }
  }
}

}  // namespace

void SetWinogradMode(WinogradMode mode) { Mode() = mode; }
WinogradMode GetWinogradMode() { return Mode(); }
void SetWinogradTile(int tile) {
  forced_tile.store(tile == 2 || tile == 4 ? tile : 0, std::memory_order_relaxed);
}

namespace {
std::atomic<int> weight_tile{0};
}  // namespace

int WinogradWeightTile(const ConvParams& p) {
  const int fixed = weight_tile.load(std::memory_order_relaxed);
  if (fixed) return fixed;
  const double oh = p.oh(), ow = p.ow();
  const double four = p.n * std::ceil(oh / 4) * std::ceil(ow / 4);
  const double two = p.n * std::ceil(oh / 2) * std::ceil(ow / 2);
  const double m = 4 + std::sqrt(double(p.c) * p.oc) / 24;
  return 36 * (four + m) < 16 * (two + m) ? 4 : 2;
}

void SetWinogradWeightTile(int tile) {
  weight_tile.store(tile == 2 || tile == 4 ? tile : 0, std::memory_order_relaxed);
}

int WinogradForwardTile(const ConvParams& p) {
  return Qualifies(p) ? TileFor(p.c, p.oc, p.n, p.oh(), p.ow(), p.w_stamp != 0) : 0;
}

bool WinogradForward(const float* x, const float* w, const float* b, float* y,
                     const ConvParams& p) {
  const int oh = p.oh(), ow = p.ow();
  const int tile = WinogradForwardTile(p);
  if (!tile) return false;
  Run(WinoJob{x, p.n, p.c, p.h, p.w, p.oc, oh, ow, p.pad_t, p.pad_l, nullptr,
              nullptr, false, b, y, tile},
      w, false, p.w_stamp);
  return true;
}

bool WinogradBackwardData(const float* dy, const float* w, float* dx,
                          const ConvParams& p) {
  // dx is the stride-1 convolution of dy (oh x ow, padded by 2 - pad on each
  // side) with w flipped in both axes and its channel axes swapped.
  if (!Qualifies(p) || std::max({p.pad_t, p.pad_l, p.pad_b, p.pad_r}) > 2)
    return false;
  const int tile = TileFor(p.oc, p.c, p.n, p.h, p.w, p.w_stamp != 0);
  if (!tile) return false;
  Run(WinoJob{dy, p.n, p.oc, p.oh(), p.ow(), p.c, p.h, p.w, 2 - p.pad_t,
              2 - p.pad_l, nullptr, nullptr, false, nullptr, dx, tile},
      w, true, p.w_stamp);
  return true;
}

}  // namespace cpu
}  // namespace singa
