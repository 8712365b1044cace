// Convolution micro-kernels and the NN product for one ISA family (the
// packing they share is in conv_pack.h, the weight gradient's lane-wise
// product in conv_nt_isa.cc).
//
// CMakeLists.txt compiles this file once per family with that family's
// flags, SINGA_ISA_NS naming its namespace and SINGA_ISA_LEVEL its vector
// width: 4 floats (baseline SSE2), 8 (AVX2 + FMA) or 16 (AVX-512). The code
// is written once with GCC vector extensions, so the families differ only in
// kVW and the register-tile shapes below, which follow from the register
// count (16 vector registers below AVX-512, 32 with it). The matrices and
// the tap addressing are described in conv_engine.h.
#include <algorithm>
#include <cstring>
#include <limits>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_engine.h"
#include "conv_pack.h"
#include "isa_vec.h"
#include "transpose8.h"

#ifndef SINGA_ISA_NS
#error "conv_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// ---------------------------------------------------------- micro-kernels

// Vector v of output row i of a tile is kVW floats at dst[i * kNnVecs + v]:
// consecutive in a plain output, anywhere when the tile adds into dx through
// the windows. With kHalves (adding in place only) its two halves are
// kHalfVW floats each at dst[2 * (i * kNnVecs + v)] and the entry after.
//
// dst[i][v] (+)= sum_k a[i * lda + k] * b[k * kNnCols + v * kVW + 0:kVW] for
// i < mr and v < NV (the first NV vectors of each row of B's panel). Rows
// mr..MR-1 repeat row mr-1 (valid memory) and are dropped. Without
// `accumulate`, the sums start from bias[i] (or zero).
template <int MR, bool kHalves, int NV = kNnVecs>
void KernelNN(int kc, const float* __restrict a, int64_t lda, int mr,
              const float* __restrict b, float* const* dst, const float* bias,
              bool accumulate) {
  const float* ar[MR];
  for (int i = 0; i < MR; ++i) ar[i] = a + int64_t(i < mr ? i : mr - 1) * lda;
  Vec s[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    const int r = i < mr ? i : mr - 1;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if (kHalves)
        s[i][v] = LoadHalves(dst[2 * (r * kNnVecs + v)],
                             dst[2 * (r * kNnVecs + v) + 1]);
      else
        s[i][v] = accumulate ? Load(dst[r * kNnVecs + v])
                             : Splat(bias ? bias[r] : 0.f);
  }
  for (int k = 0; k < kc; ++k) {
    Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Load(b + k * kNnCols + v * kVW);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const Vec av = Splat(ar[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[i][v] += av * bv[v];
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if (kHalves)
        StoreHalves(dst[2 * (i * kNnVecs + v)], dst[2 * (i * kNnVecs + v) + 1],
                    s[i][v]);
      else
        Store(dst[i * kNnVecs + v], s[i][v]);
  }
}

// Steps of k ahead at which KernelPanel fetches its panel, which comes from
// memory when a network's weights pass through the cache: ResNet-18's
// batch-1 forward took 0.94x the time at one and two threads with 64
// (0.95-0.97x with 16 or 32; AVX-512 Zen 5, alternating call by call),
// while a layer alone, its panel in L3, took 1.02-1.03x.
constexpr int kPanelAhead = 64;
static_assert(kNnMaxRows <= 32, "KernelPanel fetches two lines a step");

// KernelNN<MR, false, 1> with A's rows in one panel: a[k * MR + i] for
// i < MR (rows past mr padded). One stream of A, read by broadcasts from a
// single pointer, where the row-wise kernel keeps MR pointers in memory. A
// step advances the stream by MR floats, at most kNnMaxRows (28): two
// fetches 16 floats apart reach every line.
template <int MR>
void KernelPanel(int kc, const float* __restrict a, int64_t, int mr,
                 const float* __restrict b, float* const* dst, const float* bias,
                 bool accumulate) {
  Vec s[MR];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    const int r = i < mr ? i : mr - 1;
    s[i] = accumulate ? Load(dst[r * kNnVecs]) : Splat(bias ? bias[r] : 0.f);
  }
  for (int k = 0; k < kc; ++k) {
    const Vec bv = Load(b + k * kNnCols);
    __builtin_prefetch(a + (k + kPanelAhead) * MR, 0, 3);
    __builtin_prefetch(a + (k + kPanelAhead) * MR + 16, 0, 3);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) s[i] += Splat(a[k * MR + i]) * bv;
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    Store(dst[i * kNnVecs], s[i]);
  }
}

using NnKernel = void (*)(int, const float*, int64_t, int, const float*,
                          float* const*, const float*, bool);

// The destination table of rows [0, mr) of a tile stored at c, ldc apart.
inline void RowTargets(float* c, int64_t ldc, int mr, float** dst) {
  for (int i = 0; i < mr; ++i)
    for (int v = 0; v < kNnVecs; ++v) dst[i * kNnVecs + v] = c + i * ldc + v * kVW;
}

template <bool kHalves>
NnKernel NnKernelFor(int mr) {
  switch (mr) {
#if SINGA_ISA_LEVEL >= 2
    case 12: return KernelNN<12, kHalves>;
    case 10: return KernelNN<10, kHalves>;
    default: return KernelNN<8, kHalves>;
#else
    case 6: return KernelNN<6, kHalves>;
    case 5: return KernelNN<5, kHalves>;
    default: return KernelNN<4, kHalves>;
#endif
  }
}

NnKernel NarrowKernel(bool panels) {
#if SINGA_ISA_LEVEL >= 2
  return panels ? KernelPanel<kNnNarrowRows> : KernelNN<kNnNarrowRows, false, 1>;
#else
  (void)panels;
  return nullptr;
#endif
}

// Adds rows [m0, m0 + mr) of a micro-tile (`tile`, kNnCols floats per row)
// into the output through the taps of s, for the runs `runs` of the tile's
// columns (starting at tile column `col0`).
// Channel-fastest row numbering lets a tile's rows go to different
// channels: with taps fastest, consecutive rows add to overlapping pieces of
// one output row, and each load would wait for the store just before it.
// Channel offset and tap of each row [m0, m0 + mr) of s.
void RowTaps(const TapRows& s, int m0, int mr, int64_t* coff, int* oy,
             int* ox) {
  if (s.channel_fastest) {
    int c = m0 % s.channels, t = m0 / s.channels;
    for (int row = 0; row < mr; ++row) {
      coff[row] = c * s.cstride;
      oy[row] = s.offy[t / s.tc];
      ox[row] = s.offx[t % s.tc];
      if (++c == s.channels) {
        c = 0;
        ++t;
      }
    }
  } else {
    TapCursor at(s, m0);
    for (int row = 0; row < mr; ++row) {
      coff[row] = at.c * s.cstride;
      oy[row] = s.offy[at.i];
      ox[row] = s.offx[at.j];
      if (++at.j == s.tc) {
        at.j = 0;
        if (++at.i == s.tr) {
          at.i = 0;
          ++at.c;
        }
      }
    }
  }
}

struct TileTaps {
  int64_t coff[kNnRowChoices[0]];
  int oy[kNnRowChoices[0]], ox[kNnRowChoices[0]];
  // Each row's whole offset from a pixel's place in the plane, and the
  // rows' range of tap offsets.
  int64_t off[kNnRowChoices[0]];
  int ymin, ymax, xmin, xmax;
};

// The taps of rows [m0, m0 + mr) of s, with their offsets and ranges.
void MakeTileTaps(const TapRows& s, int m0, int mr, TileTaps* tt) {
  RowTaps(s, m0, mr, tt->coff, tt->oy, tt->ox);
  tt->ymin = tt->xmin = std::numeric_limits<int>::max();
  tt->ymax = tt->xmax = std::numeric_limits<int>::min();
  for (int row = 0; row < mr; ++row) {
    tt->off[row] = tt->coff[row] + int64_t(tt->oy[row]) * s.sw + tt->ox[row];
    tt->ymin = std::min(tt->ymin, tt->oy[row]);
    tt->ymax = std::max(tt->ymax, tt->oy[row]);
    tt->xmin = std::min(tt->xmin, tt->ox[row]);
    tt->xmax = std::max(tt->xmax, tt->ox[row]);
  }
}

// The VecSpot of every half vector of `panels` panels, for a scatter job
// whose grid stride along rows is 1; runs are in column order.
void FindSpots(const TapRows& s, const Run* runs, int nruns, int panels,
               VecSpot* spots) {
  int u = 0;
  for (int h = 0; h < panels * kNnVecs * 2; ++h) {
    const int c = h * kHalfVW;
    VecSpot& sp = spots[h];
    while (u < nruns && runs[u].col + runs[u].len <= c) ++u;
    if (u == nruns || runs[u].col > c ||
        c + kHalfVW > runs[u].col + runs[u].len) {
      sp.y = -1;
      continue;
    }
    const Run& r = runs[u];
    sp.y = r.qy * s.ssy;
    sp.x = r.qx + (c - r.col);
    sp.base = r.b * s.img_stride + int64_t(sp.y) * s.sw + sp.x;
  }
}

void ScatterTile(const TapRows& s, float* out, const TileTaps& tt, int mr,
                 const float* tile, const Run* runs, int nruns, int col0) {
  const int64_t* coff = tt.coff;
  const int *oy = tt.oy, *ox = tt.ox;
  for (int u = 0; u < nruns; ++u) {
    const Run& r = runs[u];
    float* img = out + r.b * s.img_stride;
    const int ybase = r.qy * s.ssy, xbase = r.qx * s.ssx;
    for (int row = 0; row < mr; ++row) {
      const int y = ybase + oy[row];
      if (y >= 0 && y < s.sh)
        AddRow(img + coff[row] + int64_t(y) * s.sw,
               tile + row * kNnCols + (r.col - col0), xbase + ox[row], s.ssx,
               r.len, s.sw);
    }
  }
}

enum class InPlace { kNo, kWhole, kHalves };

// Where rows [m0, m0 + mr) of a tile (taps tt) add into the output through
// the taps of s, when every half vector of every row lands on kHalfVW
// consecutive outputs inside the image: the kernel then adds in place (dst,
// see KernelNN) and no scatter pass is needed. kWhole when each vector's
// halves are adjacent (dst holds whole vectors), kHalves when some are not
// (dst holds halves), kNo (dst unusable) when a half does not fit. Only for
// tiles NnSlab found able to add in place (channel-fastest rows, grid
// stride 1 along rows); `spots` are the panel's (FindSpots), so a call
// costs a range check per half and an add per target (LeNet's second data
// gradient took 0.81-0.89x the time with these than with each row's bounds
// checked against the runs in every call, paired, one and two threads).
InPlace ScatterTargets(const TapRows& s, float* out, const TileTaps& tt,
                       int mr, const VecSpot* spots, float** dst) {
  bool whole = true;
  for (int h = 0; h < 2 * kNnVecs; ++h) {
    const VecSpot& sp = spots[h];
    if (sp.y < 0 || sp.y + tt.ymin < 0 || sp.y + tt.ymax >= s.sh ||
        sp.x + tt.xmin < 0 || sp.x + tt.xmax + kHalfVW > s.sw)
      return InPlace::kNo;
    if (h % 2 && sp.base != spots[h - 1].base + kHalfVW) whole = false;
  }
  if (whole) {
    for (int v = 0; v < kNnVecs; ++v) {
      float* at = out + spots[2 * v].base;
      for (int row = 0; row < mr; ++row) dst[row * kNnVecs + v] = at + tt.off[row];
    }
    return InPlace::kWhole;
  }
  for (int h = 0; h < 2 * kNnVecs; ++h) {
    float* at = out + spots[h].base;
    for (int row = 0; row < mr; ++row) dst[2 * row * kNnVecs + h] = at + tt.off[row];
  }
  return InPlace::kHalves;
}

// Rows [0, mr) of a tile (kNnCols floats per row at temp, its columns
// starting at c0) written to a stride-2 output (NnJob::gap_w): each run's
// values go to every other float, with zeros in between.
void WriteWithGaps(const NnJob& job, float* out_m, const float* temp, int mr,
                   const Run* runs, int nruns, int64_t c0,
                   const int64_t* colofs) {
  for (int u = 0; u < nruns; ++u) {
    const Run& r = runs[u];
    // Pixels whose following float is still in the row.
    const int gapped =
        2 * (r.qx + r.len - 1) + 1 < job.gap_w ? r.len : r.len - 1;
    const bool below = job.gap_h > 0 && 2 * r.qy + 1 < job.gap_h;
    for (int i = 0; i < mr; ++i) {
      const float* t = temp + i * kNnCols + (r.col - c0);
      float* d = out_m + int64_t(i) * job.out_ch + colofs[r.col];
      int j = 0;
      const bool aligned = reinterpret_cast<uintptr_t>(d) % sizeof(Vec) == 0;
      for (; j + kVW <= gapped; j += kVW) {
        Vec a, b;
        SpreadEven(Load(t + j), &a, &b);
        if (aligned) {
          StreamStore(d + 2 * j, a);
          StreamStore(d + 2 * j + kVW, b);
        } else {
          Store(d + 2 * j, a);
          Store(d + 2 * j + kVW, b);
        }
      }
      for (; j < r.len; ++j) {
        d[2 * j] = t[j];
        if (j < gapped) d[2 * j + 1] = 0.f;
      }
      if (below)
        StreamRow(d + job.gap_w, std::min(2 * r.len, job.gap_w - 2 * r.qx),
                  [](int) { return Vec{}; }, [](int) { return 0.f; });
    }
  }
}

// d[0, n) = s[0, n) (add false) or += it, a vector at a time.
inline void WriteRun(float* d, const float* s, int n, bool add) {
  int j = 0;
  for (; j + kVW <= n; j += kVW)
    Store(d + j, add ? Load(d + j) + Load(s + j) : Load(s + j));
  if (j < n) {
    const int m = n - j;
    const Vec v = LoadFirst(s + j, m);
    StoreFirst(d + j, add ? LoadFirst(d + j, m) + v : v, m);
  }
}

}  // namespace

// ---------------------------------------------------------------------- NN

int NnColsPerTile() { return kNnCols; }
int NnPanelRows() { return kNnNarrowRows; }
int NnPanelCols() { return kVW; }

// The row count that computes M rows (padded up to whole tiles) fastest.
int NnRowsPerTile(int M) {
  int best = kNnRowChoices[0];
  float best_cost = 1e30f;
  for (int i = 0; i < 3; ++i) {
    const float cost = float(RoundUp(M, kNnRowChoices[i])) / kNnRowSpeed[i];
    if (cost < best_cost) {
      best = kNnRowChoices[i];
      best_cost = cost;
    }
  }
  return best;
}

size_t NnWorkFloats(const NnJob& job, int64_t cols) {
  const int64_t panels = (cols + kNnCols - 1) / kNnCols;
  return size_t(RoundUp(panels * job.kc * kNnCols, 16)) +
         size_t(kNnMaxRows) * kNnCols;
}

void NnSlab(const NnJob& job, int64_t q0, int64_t q1, int m0, int m1,
            float* work) {
  const int K = job.b.rows();
  const int64_t ncols = q1 - q0;
  // At most one vector of pixels: the one-vector tile (kNnNarrowRows). With
  // AVX-512, ResNet-18's 4x4 planes at batch 1 took 0.72-0.77x the time at
  // one thread than in the two-vector tile, half of whose columns are then
  // empty; the whole forward 0.85x at one thread and 0.88x at two (Zen 5,
  // alternating call by call; 24 rows measured 0.89x and 0.93x).
  const bool narrow =
      kNnNarrowRows > 0 && ncols <= kVW && !job.scatter && job.gap_w == 0;
  const int MR = narrow ? kNnNarrowRows : NnRowsPerTile(job.M);
  // Rows from the job's panels when its row ranges start on a panel.
  const bool from_panels = narrow && job.a_panels && m0 % MR == 0;
  const NnKernel kernel = narrow ? NarrowKernel(from_panels) : NnKernelFor<false>(MR);
  const NnKernel halves_kernel = NnKernelFor<true>(MR);
  const int width = narrow ? kVW : kNnCols;  // columns a tile computes
  const int panels = int((ncols + kNnCols - 1) / kNnCols);
  float* pack = work;
  float* temp = work + RoundUp(int64_t(panels) * job.kc * kNnCols, 16);

  NnScratch& sc = NnLocal();
  BuildRuns(job.grid, q0, q1, kNnCols, &sc.runs);
  const Run* runs = sc.runs.begin();
  int* panel_run = sc.panel_run.Reserve(size_t(panels) + 1);
  panel_run[panels] = sc.runs.count;
  for (int u = sc.runs.count - 1; u >= 0; --u)
    panel_run[runs[u].col / kNnCols] = u;
  // Output offsets of the columns, for jobs that write rather than scatter.
  int64_t* colofs = sc.colofs.Reserve(size_t(ncols));
  if (!job.scatter)
    for (const Run& r : sc.runs)
      for (int j = 0; j < r.len; ++j)
        colofs[r.col + j] = r.b * job.out_img + job.obase +
                            int64_t(r.qy) * job.osy + int64_t(r.qx + j) * job.osx;
  // The columns of each panel as runs of adjacent outputs, for the panels
  // written through `temp` (those spanning two images, or a row's end where
  // rows are not adjacent): each run is copied or added a vector at a time.
  // Against column by column, the forward of ResNet-18's 256->512 stride-2
  // layers (4x4 outputs, a panel of two images) at batch 64 took 0.95x the
  // time at one thread and 0.91x at two for the 3x3, 0.89x and 0.84x for
  // the 1x1; a 1x1 layer on 7x7 planes 0.96x (AVX-512, Zen 5, alternating
  // call by call).
  int* segs = nullptr;
  int* panel_seg = nullptr;
  if (!job.scatter && job.gap_w == 0) {
    segs = sc.segs.Reserve(size_t(ncols) + 1);
    panel_seg = sc.panel_seg.Reserve(size_t(panels) + 1);
    int n = 0;
    for (int64_t q = 0; q < ncols; ++q) {
      const bool edge = q % kNnCols == 0;
      if (edge) panel_seg[q / kNnCols] = n;
      if (edge || colofs[q] != colofs[q - 1] + 1) segs[n++] = int(q);
    }
    panel_seg[panels] = n;
    segs[n] = int(ncols);
  }
  // A scatter tile can add in place only where the kernel's loads of its
  // targets, all made before any store, cannot overlap: rows of a tile must
  // be different channels (channel-fastest numbering with at least as many
  // channels as rows). Rows numbered taps-fastest would also overlap the
  // previous tile's outputs, and loading them right after its stores would
  // stall; ScatterTile's separate adds do not.
  VecSpot* spots = nullptr;
  if (job.scatter && job.scatter->ssx == 1 && job.scatter->channel_fastest) {
    spots = sc.spots.Reserve(size_t(panels) * kNnVecs * 2);
    FindSpots(*job.scatter, runs, sc.runs.count, panels, spots);
  }
  // A panel is written in place when its columns are consecutive in the
  // output; otherwise through `temp` and a scatter.
  const bool dense = job.dense();
  auto in_place = [&](int p) {
    const int64_t c0 = int64_t(p) * kNnCols;
    return dense && c0 + width <= ncols &&
           colofs[c0 + width - 1] - colofs[c0] == width - 1;
  };

  // Rows of short runs by gathers: at batch 1, ResNet-18's 512@4 layer
  // forward took 0.83-0.89x the time, its 256->512 and 128->256 stride-2
  // layers 0.78-0.86x and 0.75-0.83x (one and two threads); the 256->512
  // stride-2 forward at batch 32 0.78-0.86x, the 1x1 stride-2 data
  // gradient there 0.89-0.94x (AVX-512, Zen 5, alternating call by call).
  // With the AVX2 kernels the batch-1 512@4 and 256->512 stride-2
  // forwards took 0.90-0.95x.
  const bool gathered = sc.gather.Build(job.b, runs, sc.runs.count);
  for (int k0 = 0; k0 < K; k0 += job.kc) {
    const int kc = std::min(job.kc, K - k0);
    if (gathered)
      sc.gather.Pack(job.b, TapCursor(job.b, k0), kc, pack, kNnCols,
                     int64_t(kc) * kNnCols);
    else
      PackRows(job.b, runs, sc.runs.count, TapCursor(job.b, k0), kc, pack,
               kNnCols, [kc](const Run& r) {
                 return int64_t(r.col / kNnCols) * kc * kNnCols + r.col % kNnCols;
               });
    if (ncols % kNnCols) {
      const int used = int(ncols % kNnCols);
      float* last = pack + int64_t(panels - 1) * kc * kNnCols;
      for (int k = 0; k < kc; ++k)
        Zero(last + int64_t(k) * kNnCols + used, kNnCols - used);
    }
    const bool first = k0 == 0;
    for (int m = m0; m < m1; m += MR) {
      const int mr = std::min(MR, m1 - m);
      const float* a =
          from_panels ? job.a_panels + m / MR * job.a_panel_stride + int64_t(k0) * MR
                      : job.a + int64_t(m) * job.lda + k0;
      const float* bias = first && job.bias ? job.bias + m : nullptr;
      float* out_m = job.out + int64_t(m) * job.out_ch;
      TileTaps taps;
      if (job.scatter) MakeTileTaps(*job.scatter, m, mr, &taps);
      const bool in_place_rows = spots && job.scatter->channels >= mr;
      for (int p = 0; p < panels; ++p) {
        const float* bp = pack + int64_t(p) * kc * kNnCols;
        const int64_t c0 = int64_t(p) * kNnCols;
        float* dst[kNnMaxRows * kNnVecs * 2];
        if (job.scatter) {
          const Run* pr = runs + panel_run[p];
          const int nr = panel_run[p + 1] - panel_run[p];
          const InPlace how =
              in_place_rows
                  ? ScatterTargets(*job.scatter, job.out, taps, mr,
                                   spots + int64_t(p) * kNnVecs * 2, dst)
                  : InPlace::kNo;
          if (how != InPlace::kNo) {
            (how == InPlace::kWhole ? kernel : halves_kernel)(
                kc, a, job.lda, mr, bp, dst, nullptr, true);
          } else {
            RowTargets(temp, kNnCols, mr, dst);
            kernel(kc, a, job.lda, mr, bp, dst, nullptr, false);
            ScatterTile(*job.scatter, job.out, taps, mr, temp, pr, nr, int(c0));
          }
          continue;
        }
        if (in_place(p)) {
          // The next panel's outputs, first written by this pass: fetched
          // while this one computes rather than missing at the kernel's
          // stores (a fresh output of 8 MB, ResNet-18's 1x1 stride-2
          // shortcut at batch 64, took 0.88-0.92x the time at one thread
          // and 0.92-0.94x at two; its 3x3 stride-2 layer 0.95-0.98x; AVX2
          // Zen 4, alternating call by call).
          if (first && p + 1 < panels && in_place(p + 1)) {
            const float* o = out_m + colofs[c0 + kNnCols];
            for (int i = 0; i < mr; ++i) __builtin_prefetch(o + i * job.out_ch, 1, 3);
          }
          RowTargets(out_m + colofs[c0], job.out_ch, mr, dst);
          kernel(kc, a, job.lda, mr, bp, dst, bias, !first);
          continue;
        }
        RowTargets(temp, kNnCols, mr, dst);
        kernel(kc, a, job.lda, mr, bp, dst, bias, false);
        if (job.gap_w > 0) {
          WriteWithGaps(job, out_m, temp, mr, runs + panel_run[p],
                        panel_run[p + 1] - panel_run[p], c0, colofs);
          continue;
        }
        for (int i = 0; i < mr; ++i) {
          float* o = out_m + int64_t(i) * job.out_ch;
          const float* t = temp + i * kNnCols;
          for (int g = panel_seg[p]; g < panel_seg[p + 1]; ++g) {
            const int q = segs[g];
            WriteRun(o + colofs[q], t + (q - c0), segs[g + 1] - q, !first);
          }
        }
      }
    }
  }
  // Orders WriteWithGaps' streaming stores before whatever reads dx next.
  if (job.gap_w > 0) StreamFence();
}

void TransposeFloats(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 32;
  const int64_t rt = (rows + kTile - 1) / kTile, ct = (cols + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 18))
  for (int64_t t = 0; t < rt * ct; ++t) {
    const int64_t r0 = t / ct * kTile, c0 = t % ct * kTile;
    const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
      int64_t c = c0;
      for (; c + 8 <= c1; c += 8)
        Transpose8x8(src + r * cols + c, cols, dst + c * rows + r, rows);
      for (; c < c1; ++c)
        for (int64_t i = r; i < r + 8; ++i) dst[c * rows + i] = src[i * cols + c];
    }
    for (; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
