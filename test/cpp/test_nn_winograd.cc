// Winograd and weight-cache checks of the standalone nn-kernel test.
#include "nn_test_util.h"
#include "nn_test_families.h"

// The Winograd weight gradient (winograd_weight.h), with 2x2 and with 4x4
// dy tiles: odd planes and planes that leave partial tiles, pads 0, 1, 2
// and asymmetric ones, channel counts that are not multiples of the vector
// width or the register tile, a one-row plane, and a reduction long enough
// to take several tile blocks; on 1, 2 and 5 threads (which split the
// output channels or the tiles), each run twice to the same bits.
void TestWinogradWeight() {
  const ConvParams cases[] = {
      CP(2, 17, 7, 9, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(3, 16, 6, 5, 21, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1),
      CP(2, 23, 5, 8, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1),
      CP(2, 18, 9, 6, 33, 3, 3, 1, 1, 2, 0, 1, 2, 1, 1, 1),
      CP(2, 16, 1, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(2, 20, 7, 6, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(16, 20, 16, 15, 18, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(3, 16, 13, 11, 16, 3, 3, 1, 1, 0, 1, 2, 0, 1, 1, 1),
      CP(2, 16, 2, 3, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
  };
  const int saved = omp_get_max_threads();
  for (const ConvParams& p : cases)
    for (int tile : {2, 4}) {
      SetWinogradWeightTile(tile);
      const std::string name =
          "winograd dw tile " + std::to_string(tile) + " n" +
          std::to_string(p.n) + " c" + std::to_string(p.c) + " " +
          std::to_string(p.h) + "x" + std::to_string(p.w) + " oc" +
          std::to_string(p.oc) + " pads " + std::to_string(p.pad_t) +
          std::to_string(p.pad_l) + std::to_string(p.pad_b) +
          std::to_string(p.pad_r);
      Report(WinogradWeightEligible(p), name + " takes the Winograd path");
      const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
      Vec x = Random(size_t(p.n) * p.c * p.h * p.w), dy = Random(ysz);
      Vec w(size_t(p.oc) * p.c * 9);
      DVec rdx, rdw, rdb;
      RefConvBackward(D(x), D(w), D(dy), p, &rdx, &rdw, &rdb);
      for (int t : {1, 2, 5}) {
        omp_set_num_threads(t);
        Vec dw(w.size(), 7.f), again(w.size(), 5.f);
        Conv2dBackwardWeight(x.data(), dy.data(), dw.data(), p);
        Check(name + " (" + std::to_string(t) + " threads)", dw, rdw);
        Conv2dBackwardWeight(x.data(), dy.data(), again.data(), p);
        Report(again == dw, name + " same bits when run again (" +
                                std::to_string(t) + " threads)");
      }
    }
  SetWinogradWeightTile(0);
  omp_set_num_threads(saved);
  // The rule: 4x4 tiles where the batch has many (ResNet-18's 64@32 at batch
  // 1, 512@4 at 32), 2x2 where it has few (512@4 at batch 8, a 2x2 plane).
  auto tile_for = [](int n, int c, int hw) {
    return WinogradWeightTile(CP(n, c, hw, hw, c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1));
  };
  Report(tile_for(1, 64, 32) == 4 && tile_for(32, 512, 4) == 4 &&
             tile_for(8, 512, 4) == 2 && tile_for(64, 64, 2) == 2,
         "winograd dw tile rule");
  TestConv("winograd dw with fd",
           CP(2, 16, 5, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
  SetWinogradWeightTile(4);
  TestConv("winograd dw tile 4 with fd",
           CP(2, 16, 9, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
  SetWinogradWeightTile(0);
}

// Winograd F(4x4, 3x3) and F(2x2, 3x3) (winograd.h), each forced onto
// every qualifying layer: odd planes and planes that are not a multiple of
// the tile, pads 0 to 2 and asymmetric ones (and a pad of 3, whose data
// gradient falls back), channel counts off the vector width and the 6-row
// register tile, several panels of tiles per block, a deep reduction,
// weights transformed once or per block, blocks split by output channels,
// and 1 and 2 threads.
void TestWinogradCases() {
  SetWinogradMode(WinogradMode::kForce);
  const int saved = omp_get_max_threads();
  for (int tile : {4, 2})
  for (int t : {1, 2}) {
    SetWinogradTile(tile);
    omp_set_num_threads(t);
    const std::string th = " (tile " + std::to_string(tile) + ", " +
                           std::to_string(t) + " threads)";
    TestConv("wino basic" + th,
             CP(2, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
    TestConv("wino pad0" + th,
             CP(2, 5, 9, 10, 7, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), true);
    TestConv("wino pad2" + th,
             CP(1, 4, 5, 6, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1), true);
    TestConv("wino asym pads" + th,
             CP(2, 6, 11, 8, 9, 3, 3, 1, 1, 0, 1, 2, 1, 1, 1, 1), true);
    TestConv("wino pad3 fallback" + th,
             CP(1, 3, 5, 5, 4, 3, 3, 1, 1, 3, 1, 3, 1, 1, 1, 1), false);
    TestConv("wino tiny plane" + th,
             CP(3, 7, 1, 2, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    for (int c : {1, 13, 19, 37})
      TestConv("wino channels c=" + std::to_string(c) + th,
               CP(3, c, 13, 11, 43 - c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
               false);
    // Many tiles: several panels and blocks, split over the threads.
    TestConv("wino many tiles" + th,
             CP(9, 17, 18, 21, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // One block of tiles: two threads split its output channels.
    TestConv("wino split channels" + th,
             CP(1, 24, 8, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // A ResNet-depth reduction (512 channels) on a small odd plane.
    TestConv("wino deep" + th,
             CP(1, 512, 5, 6, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // Weights transformed per block (over 2M floats of U), in more than one
    // block when two threads split the tiles.
    TestConv("wino deep blocks" + th,
             CP(4, 256, 9, 9, 250, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // Rows of three and of four vectors with AVX-512 (its row windows
    // pick each window column from two of a row's registers).
    TestConv("wino wide rows" + th,
             CP(2, 9, 7, 40, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("wino wider rows" + th,
             CP(1, 6, 9, 61, 7, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1), false);
    // Panels the row windows do not take, built lane by lane with
    // AVX-512: more than 8 window rows in a vector (a tile or two per
    // image), and planes over 64 floats wide.
    TestConv("wino many small planes" + th,
             CP(20, 5, 3, 4, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("wino widest rows" + th,
             CP(1, 5, 6, 70, 7, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1), false);
  }
  omp_set_num_threads(saved);
  SetWinogradTile(0);
  SetWinogradMode(WinogradMode::kAuto);
  // The automatic choice on ResNet-like shapes (Winograd where it pays,
  // 2x2 tiles on the small planes at batch 1).
  TestConv("wino auto 64@8",
           CP(4, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  TestConv("wino auto 32@16 batch 1",
           CP(1, 32, 16, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  TestConv("wino auto 2x2 tiles 96@8 batch 1",
           CP(1, 96, 8, 8, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  // The rule on ResNet-18's 3x3 stride-1 layers (32x32 inputs). With
  // AVX2's 16-tile panels: 4x4 tiles where they fill half a panel, 2x2 on
  // the 8x8 planes at batch 1, none on 4x4 planes below batch 8 or with 3
  // input channels. The other families' panels (8 and 32 tiles) move the
  // thresholds.
  auto tile = [](int n, int c, int hw) {
    return WinogradForwardTile(CP(n, c, hw, hw, c == 3 ? 64 : c, 3, 3, 1, 1, 1,
                                  1, 1, 1, 1, 1, 1));
  };
  Report(tile(32, 64, 32) == 4 && tile(1, 512, 4) == 0 && tile(32, 3, 32) == 0,
         "winograd forward tile rule");
  if (ActiveIsa() == Isa::kAvx2)
    Report(tile(1, 64, 32) == 4 && tile(1, 128, 16) == 4 && tile(1, 256, 8) == 2 &&
               tile(2, 256, 8) == 4 && tile(4, 512, 4) == 0 && tile(8, 512, 4) == 4,
           "winograd forward tile rule (AVX2)");
}

// The kept weight transforms (weight_cache.h): with a stamp the first
// call fills the cache and the next one finds it, both giving exactly the
// uncached result (stamp 0); a new stamp (weights written) gives the new
// weights' result; the forward and the data gradient keep separate
// transforms; the bound is kept. (Winograd's results may differ in the last
// bits between 1 and 2 threads, with or without the cache.)
void TestWinogradCache() {
  SetWinogradMode(WinogradMode::kForce);
  const int saved = omp_get_max_threads();
  const size_t bound = 32u << 20;
  uint64_t stamp = 1000;
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    // Odd plane, channel counts off the 6-row tile and the vector width.
    ConvParams p = CP(2, 19, 13, 11, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
    Vec x = Random(size_t(p.n) * p.c * p.h * p.w), b = Random(p.oc);
    Vec w = Random(size_t(p.oc) * p.c * 9), dy = Random(ysz);
    auto fwd = [&](uint64_t s) {
      Vec y(ysz);
      p.w_stamp = s;
      Conv2dForward(x.data(), w.data(), b.data(), y.data(), p);
      return y;
    };
    auto bwd = [&](uint64_t s) {
      Vec dx(x.size());
      p.w_stamp = s;
      Conv2dBackwardData(dy.data(), w.data(), dx.data(), p);
      return dx;
    };
    ClearWeightCache();
    SetWeightCacheBytes(bound);
    const Vec y0 = fwd(0), dx0 = bwd(0);
    Report(GetWeightCacheStats().misses == 0 &&
               GetWeightCacheStats().entries == 0,
           "wino cache: stamp 0 is never kept" + th);
    const uint64_t s1 = ++stamp;
    const Vec y1 = fwd(s1);
    const size_t fwd_bytes = GetWeightCacheStats().bytes;
    const Vec y2 = fwd(s1);
    WeightCacheStats st = GetWeightCacheStats();
    Report(st.misses == 1 && st.hits == 1 && st.entries == 1,
           "wino cache: fill then hit" + th);
    Report(y1 == y0 && y2 == y0, "wino cache: forward equals uncached" + th);
    Check("wino cache forward" + th, y2, RefConv(D(x), D(w), D(b), p));
    const Vec dx1 = bwd(s1), dx2 = bwd(s1);
    st = GetWeightCacheStats();
    Report(st.misses == 2 && st.hits == 2 && st.entries == 2,
           "wino cache: data gradient keeps its own transform" + th);
    Report(dx1 == dx0 && dx2 == dx0,
           "wino cache: data gradient equals uncached" + th);
    DVec rdx, rdw, rdb;
    RefConvBackward(D(x), D(w), D(dy), p, &rdx, &rdw, &rdb);
    Check("wino cache backward data" + th, dx2, rdx);

    // The weights change in place: only the stamp tells the cache. Kept
    // with the old stamp, the old transform is (by contract) still used,
    // which shows the second call above did not transform again.
    for (float& v : w) v = Uniform();
    Report(fwd(s1) == y0, "wino cache: an unchanged stamp reuses" + th);
    const uint64_t s2 = ++stamp;
    const Vec y3 = fwd(s2), y3u = fwd(0);
    Report(y3 == y3u && y3 != y0, "wino cache: a new stamp transforms again" + th);
    Check("wino cache new weights" + th, y3, RefConv(D(x), D(w), D(b), p));
    const Vec dx3 = bwd(s2);
    Report(dx3 == bwd(0), "wino cache: data gradient after new stamp" + th);
    st = GetWeightCacheStats();
    Report(st.entries == 2, "wino cache: a stale entry is replaced" + th);

    // A bound too small for both transforms: the least recently used (the
    // forward's) goes; a transform over the bound is not kept at all.
    const size_t both = st.bytes;
    SetWeightCacheBytes(both - 4);
    st = GetWeightCacheStats();
    Report(st.entries == 1 && st.bytes == both - fwd_bytes,
           "wino cache: the bound evicts the least recently used" + th);
    Vec w2 = Random(w.size());
    std::swap(w, w2);
    const Vec y4 = fwd(++stamp);
    st = GetWeightCacheStats();
    Report(st.bytes <= both - 4 && y4 == fwd(0),
           "wino cache: a fill keeps the bound" + th);
    SetWeightCacheBytes(fwd_bytes - 4);
    const uint64_t before = GetWeightCacheStats().misses;
    Report(fwd(++stamp) == y4 && GetWeightCacheStats().entries == 0 &&
               GetWeightCacheStats().misses == before,
           "wino cache: a transform over the bound is not kept" + th);
    SetWeightCacheBytes(bound);

    // Weights transformed per block (over 2M floats of U) are not kept.
    ConvParams big = CP(1, 256, 6, 6, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    Vec bx = Random(size_t(big.c) * 36), bw = Random(size_t(big.oc) * big.c * 9);
    Vec by(size_t(big.oc) * 36);
    big.w_stamp = ++stamp;
    ClearWeightCache();
    Conv2dForward(bx.data(), bw.data(), nullptr, by.data(), big);
    Report(GetWeightCacheStats().entries == 0,
           "wino cache: per-block transforms are not kept" + th);
    Check("wino cache per-block forward" + th, by, RefConv(D(bx), D(bw), DVec(), big));
  }
  omp_set_num_threads(saved);
  ClearWeightCache();
  SetWinogradMode(WinogradMode::kAuto);
}

// The cache's own rules (weight_cache.h), on buffers that count their
// fills: kSecondCall fills on the second call with a stamp; a buffer used
// within the last two rounds of calls is not evicted for a new one (the
// caller gets none and does without), one left unused longer is.
void TestWeightCacheRules() {
  ClearWeightCache();
  SetWeightCacheBytes(1000 * sizeof(float));
  const float* a = reinterpret_cast<const float*>(uintptr_t(64));
  const float* b = reinterpret_cast<const float*>(uintptr_t(128));
  int fills = 0;
  auto fill = [&](float* u) {
    ++fills;
    u[0] = float(fills);
  };
  auto get = [&](const float* w, uint64_t stamp, Fill when) {
    return CachedWeights(WeightKey{stamp, w, 1, 1, false, kPanelForm, 0}, 600, fill, when);
  };
  Report(!get(a, 7, Fill::kSecondCall) && fills == 0,
         "weight cache: a first call under kSecondCall only marks");
  Report(!get(a, 8, Fill::kSecondCall) && fills == 0,
         "weight cache: a new stamp marks again");
  auto ua = get(a, 8, Fill::kSecondCall);
  Report(ua && fills == 1 && get(a, 8, Fill::kSecondCall) == ua && fills == 1,
         "weight cache: the second call fills, the third finds it");
  ua.reset();
  Report(!get(b, 9, Fill::kFirstCall) && fills == 1 &&
             get(a, 8, Fill::kSecondCall) != nullptr && fills == 1,
         "weight cache: a recently used buffer is not evicted for a new one");
  std::shared_ptr<const float> ub;
  int kept_after = 0;
  for (int i = 1; i <= 8; ++i) {
    ub = get(b, 9, Fill::kFirstCall);
    if (ub && !kept_after) kept_after = i;
  }
  Report(kept_after == 3 && fills == 2 && GetWeightCacheStats().entries == 1 &&
             GetWeightCacheStats().bytes == 600 * sizeof(float) &&
             !get(a, 8, Fill::kSecondCall),
         "weight cache: a buffer unused for two rounds goes");
  ClearWeightCache();
  SetWeightCacheBytes(size_t(64) << 20);
}

// The forward's weight panels (conv_cpp.cc WeightPanels), on a layer whose
// pixels fit the one-vector tile: kept from the second call with a stamp
// (on families that have the tile), every call equal to the uncached result
// and the reference, a new stamp not using the old panels; output channels
// off the panel's rows, 1 and 2 threads.
void TestWeightPanels() {
  SetWinogradMode(WinogradMode::kOff);
  const int saved = omp_get_max_threads();
  const bool tile = ActiveIsa() == Isa::kAvx512;
  uint64_t stamp = 5000;
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    for (ConvParams p : {CP(1, 40, 4, 4, 61, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                         CP(1, 300, 8, 8, 30, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)}) {
      const size_t ysz = size_t(p.oc) * p.oh() * p.ow();
      Vec x = Random(size_t(p.c) * p.h * p.w), b = Random(p.oc);
      Vec w = Random(size_t(p.oc) * p.c * p.kh * p.kw);
      auto fwd = [&](uint64_t s) {
        Vec y(ysz);
        p.w_stamp = s;
        Conv2dForward(x.data(), w.data(), b.data(), y.data(), p);
        return y;
      };
      ClearWeightCache();
      const Vec y0 = fwd(0);
      const uint64_t s1 = ++stamp;
      const Vec y1 = fwd(s1), y2 = fwd(s1), y3 = fwd(s1);
      Report(GetWeightCacheStats().entries == (tile ? 1u : 0u) &&
                 GetWeightCacheStats().hits == (tile ? 1u : 0u),
             "weight panels: kept from the second call" + th);
      Report(y1 == y0 && y2 == y0 && y3 == y0, "weight panels: equal to uncached" + th);
      Check("weight panels forward" + th, y3, RefConv(D(x), D(w), D(b), p));
      for (float& v : w) v = Uniform();
      const uint64_t s2 = ++stamp;
      const Vec y4 = fwd(s2), y5 = fwd(s2), y6 = fwd(s2);
      Report(y4 == fwd(0) && y5 == y4 && y6 == y4 && y4 != y0,
             "weight panels: a new stamp does not use the old panels" + th);
      Check("weight panels new weights" + th, y6, RefConv(D(x), D(w), D(b), p));
    }
  }
  omp_set_num_threads(saved);
  ClearWeightCache();
  SetWinogradMode(WinogradMode::kAuto);
}
