// Products so small that another path's set-up costs more than their multiply-adds
// (PathLimits' micro bounds on micro_choice's estimate, one thread): each element of C
// computed in one pass straight from the operands, in one of three forms, nothing
// gathered, no buffer, no thread team. With AVX-512, past those bounds too, the columns
// and dots forms where the other paths gather or stride (wide_columns_serve,
// wide_dots_serve), on one thread.
//
// Against OpenBLAS's SkylakeX small-matrix kernels these calls lost on their fixed cost,
// not on arithmetic (Xeon, AVX-512, one thread, ns per cblas_sgemm call, OpenBLAS in the
// same process): 2x1x1 38 against 15, 1x1x57 NT 57 against 19 (a dot product of 57), 1x71x4
// 59 against 23, 31x2x10 TT 90 against 43, 7x2x7 46 against 27. The GEMV's and the tiny
// path's loops prepare for long runs: strides multiplied out for 8 rows, partial sums,
// 4-row passes in lanes, a gathered copy of B where its columns are contiguous.
//
// The forms, by which operand runs contiguous (C row-stored, m x n):
// - rows: B's rows contiguous. A row of C is vectors along N, each A element broadcast;
//   up to four rows at a time, k steps split over sets of accumulators to make four chains.
// - dots: A's rows and B's columns contiguous. Each element of C is a dot product along
//   K, in blocks of up to 4 rows by 4 columns (AVX2: 2 by 4), a row's sums stored at once.
// - columns: A's columns contiguous. A column of C is vectors along M, each B element
//   broadcast; blocks of 4 and 2 columns transposed in registers and stored by rows of C,
//   a last single column lane by lane. Past the bounds too where A stays in L1 and C has
//   a few columns (wide_columns_serve).
// Where several apply, the one with the lowest estimated cost (micro_choice).
#include <algorithm>
#include <atomic>
#include <utility>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/lanes_x86.h"

namespace gk {

namespace {
std::atomic<bool> g_micro_path_on{true};
}  // namespace

void set_micro_path(bool on) { g_micro_path_on.store(on, std::memory_order_relaxed); }

#if defined(__x86_64__)
namespace {

enum class MicroForm { None, Rows, Dots, Columns };

// The vector operations of the kernels below, per ISA: AVX-512's 16 lanes with mask
// registers; AVX2's 8 with vmaskmovps loads, and stores in pieces (store_first: a masked
// store is microcoded on AMD cores).
#define GK_MICRO512 __attribute__((target("avx512f,avx512vl,avx2,fma"))) inline
struct Lanes512 {
  static constexpr int64_t kLanes = 16;
  static constexpr int kRegisters = 32;
  using V = __m512;
  struct Mask {
    __mmask16 k;
    int64_t n;
  };
  GK_MICRO512 static Mask first(int64_t n) { return {__mmask16((1u << n) - 1), n}; }
  GK_MICRO512 static V zero() { return _mm512_setzero_ps(); }
  GK_MICRO512 static V set1(float x) { return _mm512_set1_ps(x); }
  GK_MICRO512 static V load(const float* p) { return _mm512_loadu_ps(p); }
  GK_MICRO512 static V load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m.k, p); }
  GK_MICRO512 static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  GK_MICRO512 static void store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m.k, v); }
  GK_MICRO512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  GK_MICRO512 static V add(V a, V b) { return _mm512_add_ps(a, b); }
  GK_MICRO512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // unpcklps/unpckhps and unpcklpd/unpckhpd within each 128-bit group (as shuffles: GCC
  // 12 warns on the _mm512 unpacks' undefined source operand, as in sum below).
  GK_MICRO512 static V unpack_lo(V a, V b) {
    return __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
  }
  GK_MICRO512 static V unpack_hi(V a, V b) {
    return __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
  GK_MICRO512 static V unpack_lo2(V a, V b) {
    return __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
  }
  GK_MICRO512 static V unpack_hi2(V a, V b) {
    return __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  GK_MICRO512 static __m128 fold128(V v) {  // the four 128-bit groups added
    const __m256 h = __m256(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)) +
                     __m256(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  }
  GK_MICRO512 static float sum(V v) {
    // (The halves by __builtin_shufflevector: GCC 12 warns on the undefined source operand
    // of _mm512_reduce_add_ps's and _mm512_shuffle_f32x4's builtins once inlined here.)
    const __m256 h = __m256(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)) +
                     __m256(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
    return sum8(h);
  }
};

// AVX-512 on 8-float vectors (AVX-512VL masks), where the vectors run along at most 8
// floats: a 16-float masked load or store of a few floats spans two cache lines more
// often, and half of each FMA is idle anyway (7x2x7 on 16 floats 52 ns, on 8 40).
struct Lanes512Half {
  static constexpr int64_t kLanes = 8;
  static constexpr int kRegisters = 32;
  using V = __m256;
  struct Mask {
    __mmask8 k;
    int64_t n;
  };
  GK_MICRO512 static Mask first(int64_t n) { return {__mmask8((1u << n) - 1), n}; }
  GK_MICRO512 static V zero() { return _mm256_setzero_ps(); }
  GK_MICRO512 static V set1(float x) { return _mm256_set1_ps(x); }
  GK_MICRO512 static V load(const float* p) { return _mm256_loadu_ps(p); }
  GK_MICRO512 static V load(const float* p, Mask m) { return _mm256_maskz_loadu_ps(m.k, p); }
  GK_MICRO512 static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  GK_MICRO512 static void store(float* p, Mask m, V v) { _mm256_mask_storeu_ps(p, m.k, v); }
  GK_MICRO512 static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  GK_MICRO512 static V add(V a, V b) { return _mm256_add_ps(a, b); }
  GK_MICRO512 static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  GK_MICRO512 static V unpack_lo(V a, V b) { return _mm256_unpacklo_ps(a, b); }
  GK_MICRO512 static V unpack_hi(V a, V b) { return _mm256_unpackhi_ps(a, b); }
  GK_MICRO512 static V unpack_lo2(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  GK_MICRO512 static V unpack_hi2(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  GK_MICRO512 static __m128 fold128(V v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
  GK_MICRO512 static float sum(V v) {
    return sum8(v);
  }
};

#define GK_MICRO256 __attribute__((target("avx2,fma"))) inline
struct Lanes256 {
  static constexpr int64_t kLanes = 8;
  static constexpr int kRegisters = 16;
  using V = __m256;
  struct Mask {
    __m256i k;
    int64_t n;
  };
  GK_MICRO256 static Mask first(int64_t n) { return {lane_mask(n), n}; }
  GK_MICRO256 static V zero() { return _mm256_setzero_ps(); }
  GK_MICRO256 static V set1(float x) { return _mm256_set1_ps(x); }
  GK_MICRO256 static V load(const float* p) { return _mm256_loadu_ps(p); }
  GK_MICRO256 static V load(const float* p, Mask m) { return _mm256_maskload_ps(p, m.k); }
  GK_MICRO256 static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  GK_MICRO256 static void store(float* p, Mask m, V v) { store_first(p, v, m.n); }
  GK_MICRO256 static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  GK_MICRO256 static V add(V a, V b) { return _mm256_add_ps(a, b); }
  GK_MICRO256 static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  GK_MICRO256 static V unpack_lo(V a, V b) { return _mm256_unpacklo_ps(a, b); }
  GK_MICRO256 static V unpack_hi(V a, V b) { return _mm256_unpackhi_ps(a, b); }
  GK_MICRO256 static V unpack_lo2(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  GK_MICRO256 static V unpack_hi2(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  GK_MICRO256 static __m128 fold128(V v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
  GK_MICRO256 static float sum(V v) {
    return sum8(v);
  }
};

// Vectors per group of the rows and columns forms: up to 4 with AVX-512's 32 registers (16
// accumulators at 4 rows or columns), 2 with AVX2's 16.
constexpr int64_t group_vectors(int64_t lanes) { return lanes == 16 ? 4 : 2; }

// The templates below and the vector operations are inlined into flattened functions per
// ISA (GK_MICRO_ENTRY), which give them their target: always_inline would
// have GCC inline each ISA's operations into the templates themselves, which have none.
#define GK_MICRO_INLINE inline

// At least four chains of FMAs where K is long enough: with fewer accumulators, kSets sets,
// the k steps dealt round them. Short K takes one set: adding the sets up costs more than
// the chains save (1x96x1).
constexpr int kMicroSetsMinK = 8;
constexpr int sets_for(int accumulators, bool long_k) {
  return !long_k || accumulators >= 4 ? 1 : accumulators == 1 ? 4 : 2;
}

// Rows form: C[0, R) x [0, NV vectors), the last vector's lanes those of `mask` (c, a at the
// block's first row, b at its first column). All NV vectors of a k step at once: one
// block's set-up, loop and stores serve up to 64 columns (a vector a block held 1x143x4 at
// 63 ns against OpenBLAS's 32).
template <typename T, int R, int NV, int kSets>
GK_MICRO_INLINE void rows_block(int64_t k, float alpha, const float* a, int64_t rs_a, int64_t cs_a,
                                const float* b, int64_t rs_b, float beta, float* c, int64_t rs_c,
                                typename T::Mask mask) {
  using V = typename T::V;
  V acc[kSets][R][NV];
#pragma GCC unroll 4
  for (int s = 0; s < kSets; ++s)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[s][r][v] = T::zero();
  const auto step = [&](V(&sums)[R][NV], int64_t p) {
    V row[NV];
#pragma GCC unroll 4
    for (int v = 0; v + 1 < NV; ++v) row[v] = T::load(b + p * rs_b + v * T::kLanes);
    row[NV - 1] = T::load(b + p * rs_b + (NV - 1) * T::kLanes, mask);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const V x = T::set1(a[r * rs_a + p * cs_a]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) sums[r][v] = T::fma(x, row[v], sums[r][v]);
    }
  };
  int64_t p = 0;
  for (; p + kSets <= k; p += kSets)
#pragma GCC unroll 4
    for (int s = 0; s < kSets; ++s) step(acc[s], p + s);
  for (; p < k; ++p) step(acc[0], p);
  const V alpha_v = T::set1(alpha), beta_v = T::set1(beta);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if constexpr (kSets == 4) acc[0][r][v] = T::add(T::add(acc[0][r][v], acc[1][r][v]), T::add(acc[2][r][v], acc[3][r][v]));
      if constexpr (kSets == 2) acc[0][r][v] = T::add(acc[0][r][v], acc[1][r][v]);
      float* out = c + r * rs_c + v * T::kLanes;
      V result = T::mul(acc[0][r][v], alpha_v);
      if (v + 1 < NV) {
        if (beta != 0.0f) result = T::fma(T::load(out), beta_v, result);  // beta == 0: C unread
        T::store(out, result);
      } else {
        if (beta != 0.0f) result = T::fma(T::load(out, mask), beta_v, result);
        T::store(out, mask, result);
      }
    }
}

// The rows of C in blocks of 4, 2 and 1 against one group of NV vectors of columns.
template <typename T, int NV, bool kLongK>
GK_MICRO_INLINE void rows_group(int64_t m, int64_t k, float alpha, const MatrixView& a, const float* b, int64_t rs_b,
                                float beta, float* c, int64_t rs_c, typename T::Mask mask) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    rows_block<T, 4, NV, sets_for(4 * NV, kLongK)>(k, alpha, a.p + i * a.rs, a.rs, a.cs, b, rs_b, beta,
                                                   c + i * rs_c, rs_c, mask);
  if (i + 2 <= m) {
    rows_block<T, 2, NV, sets_for(2 * NV, kLongK)>(k, alpha, a.p + i * a.rs, a.rs, a.cs, b, rs_b, beta,
                                                   c + i * rs_c, rs_c, mask);
    i += 2;
  }
  if (i < m)
    rows_block<T, 1, NV, sets_for(NV, kLongK)>(k, alpha, a.p + i * a.rs, a.rs, a.cs, b, rs_b, beta, c + i * rs_c,
                                               rs_c, mask);
}

// Groups of group_vectors() vectors of columns.
template <typename T, bool kLongK>
GK_MICRO_INLINE void rows_form(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                               const MatrixView& b, float beta, float* c, int64_t rs_c) {
  constexpr int64_t kGroup = group_vectors(T::kLanes);
  for (int64_t j = 0; j < n;) {
    const int64_t vectors = std::min(kGroup, (n - j + T::kLanes - 1) / T::kLanes);
    const int64_t columns = std::min(vectors * T::kLanes, n - j);
    const typename T::Mask mask = T::first(columns - (vectors - 1) * T::kLanes);
    const float* bj = b.p + j;
    float* cj = c + j;
    switch (vectors) {
      case 1: rows_group<T, 1, kLongK>(m, k, alpha, a, bj, b.rs, beta, cj, rs_c, mask); break;
      case 2: rows_group<T, 2, kLongK>(m, k, alpha, a, bj, b.rs, beta, cj, rs_c, mask); break;
      case 3: if constexpr (kGroup >= 3) rows_group<T, 3, kLongK>(m, k, alpha, a, bj, b.rs, beta, cj, rs_c, mask); break;
      default: if constexpr (kGroup >= 4) rows_group<T, 4, kLongK>(m, k, alpha, a, bj, b.rs, beta, cj, rs_c, mask); break;
    }
    j += columns;
  }
}

// The lanes of v to C's rows rs_c apart (C's column), the first mask.n of them, as
// result + beta C; a contiguous column (rs_c 1: one column of a row-major C) stored whole.
template <typename T>
GK_MICRO_INLINE void store_down(float* out, int64_t rs_c, typename T::V v, float beta, typename T::Mask mask) {
  if (rs_c == 1) {
    if (beta != 0.0f) v = T::fma(T::load(out, mask), T::set1(beta), v);  // beta == 0: C unread
    T::store(out, mask, v);
    return;
  }
  alignas(64) float lane[T::kLanes];
  T::store(lane, v);
  if (beta == 0.0f) {
    for (int64_t r = 0; r < mask.n; ++r) out[r * rs_c] = lane[r];
  } else {
    for (int64_t r = 0; r < mask.n; ++r) out[r * rs_c] = lane[r] + beta * out[r * rs_c];
  }
}

// C's rows [0, lanes) of a block rs_c apart from W (4 or 2) floats of `rows` each: after the
// unpacks below, each 128-bit group of a vector holds the pieces of one or two rows; row r's
// piece is floats [kFirst(r), +W) of rows[kVector(r)].
template <int W, size_t R>
constexpr int piece_vector() { return W == 4 ? R % 4 : (R % 4) / 2; }
template <int W, size_t R>
constexpr int piece_first() { return W == 4 ? 4 * (R / 4) : 4 * (R / 4) + 2 * (R % 2); }
template <typename T, int W, size_t... R>
GK_MICRO_INLINE void store_row_pieces(float* out, int64_t rs_c, const typename T::V* rows, float beta,
                                      int64_t lanes, std::index_sequence<R...>) {
  const auto piece = [&](auto row, const typename T::V& v) {
    constexpr int kFirst = piece_first<W, decltype(row)::value>();
    float* to = out + static_cast<int64_t>(decltype(row)::value) * rs_c;
    if constexpr (W == 4) {
      __m128 x = __m128(__builtin_shufflevector(v, v, kFirst, kFirst + 1, kFirst + 2, kFirst + 3));
      if (beta != 0.0f) x = _mm_add_ps(x, _mm_mul_ps(_mm_set1_ps(beta), _mm_loadu_ps(to)));  // beta == 0: C unread
      _mm_storeu_ps(to, x);
    } else {
      __m128 x = __m128(__builtin_shufflevector(v, v, kFirst, kFirst + 1, kFirst, kFirst + 1));
      if (beta != 0.0f)
        x = _mm_add_ps(x, _mm_mul_ps(_mm_set1_ps(beta), _mm_loadl_pi(x, reinterpret_cast<const __m64*>(to))));
      _mm_storel_pi(reinterpret_cast<__m64*>(to), x);
    }
  };
  ((R < static_cast<size_t>(lanes) ? piece(std::integral_constant<size_t, R>{}, rows[piece_vector<W, R>()])
                                   : void()),
   ...);
}

// Four columns of C (rows [0, lanes), rs_c apart) as rows of 4 floats: the kLanes x 4 block
// transposed in registers by two rounds of unpacks, one store per row (lanes stored one by
// one cost as much as the multiply-adds: 1138x4x21 TT).
template <typename T>
GK_MICRO_INLINE void store_across4(float* out, int64_t rs_c, const typename T::V (&col)[4], float beta,
                                   int64_t lanes) {
  using V = typename T::V;
  const V lo01 = T::unpack_lo(col[0], col[1]), hi01 = T::unpack_hi(col[0], col[1]);
  const V lo23 = T::unpack_lo(col[2], col[3]), hi23 = T::unpack_hi(col[2], col[3]);
  const V rows[4] = {T::unpack_lo2(lo01, lo23), T::unpack_hi2(lo01, lo23), T::unpack_lo2(hi01, hi23),
                     T::unpack_hi2(hi01, hi23)};
  store_row_pieces<T, 4>(out, rs_c, rows, beta, lanes, std::make_index_sequence<T::kLanes>{});
}

// Two columns of C as rows of 2 floats, the same way in one round.
template <typename T>
GK_MICRO_INLINE void store_across2(float* out, int64_t rs_c, const typename T::V (&col)[2], float beta,
                                   int64_t lanes) {
  using V = typename T::V;
  const V pairs[2] = {T::unpack_lo(col[0], col[1]), T::unpack_hi(col[0], col[1])};
  store_row_pieces<T, 2>(out, rs_c, pairs, beta, lanes, std::make_index_sequence<T::kLanes>{});
}

// The sums of the lanes of a, b, c and d as one 4-float vector: pairs added across by
// unpacks, then the 128-bit groups folded (13 operations where four sums take 24).
template <typename T>
GK_MICRO_INLINE __m128 sum4(typename T::V a, typename T::V b, typename T::V c, typename T::V d) {
  const typename T::V ab = T::add(T::unpack_lo(a, b), T::unpack_hi(a, b));
  const typename T::V cd = T::add(T::unpack_lo(c, d), T::unpack_hi(c, d));
  return T::fold128(T::add(T::unpack_lo2(ab, cd), T::unpack_hi2(ab, cd)));
}

// Dots form: C([0, R), [0, J)) = the dot products of R rows of A at `a` (rs_a apart) with J
// columns of B at b (cs_b apart), each loaded vector used R or J times; two sets of
// accumulators below 8 of them. A row's J sums stored at once (sum4).
template <typename T, int R, int J>
GK_MICRO_INLINE void dots_block(int64_t k, float alpha, const float* a, int64_t rs_a, const float* b, int64_t cs_b,
                                float beta, float* c, int64_t rs_c, typename T::Mask tail) {
  using V = typename T::V;
  constexpr int kSets = R * J >= 8 ? 1 : 2;  // at least 4 chains; 8 FMAs a step need no more
  V acc[kSets][R][J];
#pragma GCC unroll 2
  for (int s = 0; s < kSets; ++s)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[s][r][j] = T::zero();
  const auto step = [&](V(&sums)[R][J], int64_t q, bool masked) {
    V x[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = masked ? T::load(a + r * rs_a + q, tail) : T::load(a + r * rs_a + q);
      asm("" : "+v"(x[r]));
    }
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      V y = masked ? T::load(b + j * cs_b + q, tail) : T::load(b + j * cs_b + q);
      asm("" : "+v"(y));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) sums[r][j] = T::fma(x[r], y, sums[r][j]);
    }
  };
  int64_t q = 0;
  for (; q + kSets * T::kLanes <= k; q += kSets * T::kLanes)
#pragma GCC unroll 2
    for (int s = 0; s < kSets; ++s) step(acc[s], q + s * T::kLanes, false);
  for (; q + T::kLanes <= k; q += T::kLanes) step(acc[0], q, false);
  if (q < k) step(acc[kSets - 1], q, true);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    V sums[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) sums[j] = kSets == 2 ? T::add(acc[0][r][j], acc[kSets - 1][r][j]) : acc[0][r][j];
    float* out = c + r * rs_c;
    if constexpr (J == 1) {
      const float x = T::sum(sums[0]);
      out[0] = beta == 0.0f ? alpha * x : alpha * x + beta * out[0];
    } else {
      __m128 x;
      if constexpr (J == 4) {
        x = _mm_mul_ps(_mm_set1_ps(alpha), sum4<T>(sums[0], sums[1], sums[2], sums[3]));
        if (beta != 0.0f) x = _mm_add_ps(x, _mm_mul_ps(_mm_set1_ps(beta), _mm_loadu_ps(out)));  // beta == 0: C unread
        _mm_storeu_ps(out, x);
      } else {
        x = _mm_mul_ps(_mm_set1_ps(alpha), sum4<T>(sums[0], sums[1], sums[0], sums[1]));  // the low pair stored
        if (beta != 0.0f)
          x = _mm_add_ps(x, _mm_mul_ps(_mm_set1_ps(beta), _mm_loadl_pi(x, reinterpret_cast<const __m64*>(out))));
        _mm_storel_pi(reinterpret_cast<__m64*>(out), x);
      }
    }
  }
}

// The columns of C in blocks of 4, 2 and 1 against R rows of A.
template <typename T, int R>
GK_MICRO_INLINE void dots_rows(int64_t n, int64_t k, float alpha, const float* a, int64_t rs_a, const MatrixView& b,
                               float beta, float* c, int64_t rs_c, typename T::Mask tail) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) dots_block<T, R, 4>(k, alpha, a, rs_a, b.p + j * b.cs, b.cs, beta, c + j, rs_c, tail);
  if (j + 2 <= n) {
    dots_block<T, R, 2>(k, alpha, a, rs_a, b.p + j * b.cs, b.cs, beta, c + j, rs_c, tail);
    j += 2;
  }
  if (j < n) dots_block<T, R, 1>(k, alpha, a, rs_a, b.p + j * b.cs, b.cs, beta, c + j, rs_c, tail);
}

// Rows of C in blocks of 4 (2 with AVX2's 16 registers: 4 x 4 sums and their operands
// would not fit), 2 and 1.
template <typename T>
GK_MICRO_INLINE void dots_form(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                               const MatrixView& b, float beta, float* c, int64_t rs_c) {
  const typename T::Mask tail = T::first(k % T::kLanes == 0 ? T::kLanes : k % T::kLanes);
  int64_t i = 0;
  if constexpr (T::kRegisters == 32)
    for (; i + 4 <= m; i += 4) dots_rows<T, 4>(n, k, alpha, a.p + i * a.rs, a.rs, b, beta, c + i * rs_c, rs_c, tail);
  for (; i + 2 <= m; i += 2) dots_rows<T, 2>(n, k, alpha, a.p + i * a.rs, a.rs, b, beta, c + i * rs_c, rs_c, tail);
  if (i < m) dots_rows<T, 1>(n, k, alpha, a.p + i * a.rs, a.rs, b, beta, c + i * rs_c, rs_c, tail);
}

// Columns form: C([0, NV vectors), [0, J)) = A's column runs at a (cs_a apart per k step,
// the last vector's lanes those of `mask`) times B's elements (rs_b apart per k step, cs_b
// per column); blocks of 4 and 2 columns stored across C's rows (store_across4/2), a single
// column down it (store_down). NV vectors at once, as the rows form.
template <typename T, int J, int NV, int kSets>
GK_MICRO_INLINE void columns_block(int64_t k, float alpha, const float* a, int64_t cs_a, const float* b, int64_t rs_b,
                                   int64_t cs_b, float beta, float* c, int64_t rs_c, typename T::Mask mask) {
  using V = typename T::V;
  V acc[kSets][J][NV];
#pragma GCC unroll 4
  for (int s = 0; s < kSets; ++s)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[s][j][v] = T::zero();
  const auto step = [&](V(&sums)[J][NV], int64_t p) {
    V column[NV];
#pragma GCC unroll 4
    for (int v = 0; v + 1 < NV; ++v) column[v] = T::load(a + p * cs_a + v * T::kLanes);
    column[NV - 1] = T::load(a + p * cs_a + (NV - 1) * T::kLanes, mask);
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      const V x = T::set1(b[p * rs_b + j * cs_b]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) sums[j][v] = T::fma(column[v], x, sums[j][v]);
    }
  };
  int64_t p = 0;
  for (; p + kSets <= k; p += kSets)
#pragma GCC unroll 4
    for (int s = 0; s < kSets; ++s) step(acc[s], p + s);
  for (; p < k; ++p) step(acc[0], p);
  const typename T::Mask whole = T::first(T::kLanes);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    V col[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      if constexpr (kSets == 4) acc[0][j][v] = T::add(T::add(acc[0][j][v], acc[1][j][v]), T::add(acc[2][j][v], acc[3][j][v]));
      if constexpr (kSets == 2) acc[0][j][v] = T::add(acc[0][j][v], acc[1][j][v]);
      col[j] = T::mul(acc[0][j][v], T::set1(alpha));
    }
    float* out = c + v * T::kLanes * rs_c;
    const typename T::Mask lanes = v + 1 < NV ? whole : mask;
    if constexpr (J == 4) {
      if (rs_c != 1) {
        store_across4<T>(out, rs_c, col, beta, lanes.n);
        continue;
      }
    }
    if constexpr (J == 2) {
      if (rs_c != 1) {
        store_across2<T>(out, rs_c, col, beta, lanes.n);
        continue;
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) store_down<T>(out + j, rs_c, col[j], beta, lanes);
  }
}

// The columns of C in blocks of 4, 2 and 1 against one group of NV vectors of rows.
template <typename T, int NV, bool kLongK>
GK_MICRO_INLINE void columns_group(int64_t n, int64_t k, float alpha, const float* a, int64_t cs_a,
                                   const MatrixView& b, float beta, float* c, int64_t rs_c, typename T::Mask mask) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    columns_block<T, 4, NV, sets_for(4 * NV, kLongK)>(k, alpha, a, cs_a, b.p + j * b.cs, b.rs, b.cs, beta, c + j,
                                                      rs_c, mask);
  if (j + 2 <= n) {
    columns_block<T, 2, NV, sets_for(2 * NV, kLongK)>(k, alpha, a, cs_a, b.p + j * b.cs, b.rs, b.cs, beta, c + j,
                                                      rs_c, mask);
    j += 2;
  }
  if (j < n)
    columns_block<T, 1, NV, sets_for(NV, kLongK)>(k, alpha, a, cs_a, b.p + j * b.cs, b.rs, b.cs, beta, c + j, rs_c,
                                                  mask);
}

// Groups of group_vectors() vectors of rows.
template <typename T, bool kLongK>
GK_MICRO_INLINE void columns_form(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                                  const MatrixView& b, float beta, float* c, int64_t rs_c) {
  constexpr int64_t kGroup = group_vectors(T::kLanes);
  for (int64_t i = 0; i < m;) {
    const int64_t vectors = std::min(kGroup, (m - i + T::kLanes - 1) / T::kLanes);
    const int64_t rows = std::min(vectors * T::kLanes, m - i);
    const typename T::Mask mask = T::first(rows - (vectors - 1) * T::kLanes);
    const float* ai = a.p + i * a.rs;
    float* ci = c + i * rs_c;
    switch (vectors) {
      case 1: columns_group<T, 1, kLongK>(n, k, alpha, ai, a.cs, b, beta, ci, rs_c, mask); break;
      case 2: columns_group<T, 2, kLongK>(n, k, alpha, ai, a.cs, b, beta, ci, rs_c, mask); break;
      case 3: if constexpr (kGroup >= 3) columns_group<T, 3, kLongK>(n, k, alpha, ai, a.cs, b, beta, ci, rs_c, mask); break;
      default: if constexpr (kGroup >= 4) columns_group<T, 4, kLongK>(n, k, alpha, ai, a.cs, b, beta, ci, rs_c, mask); break;
    }
    i += rows;
  }
}

// One flattened function per ISA, form and K (short, or long with sets of accumulators):
// with all of them in one function GCC kept fewer values in registers (7x2x7 43 -> 51 ns).
using MicroEntry = void (*)(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
                            float beta, float* c, int64_t rs_c);
#define GK_MICRO_ENTRY(name, isa, form)                                                                       \
  __attribute__((target(isa), flatten)) void name(int64_t m, int64_t n, int64_t k, float alpha,             \
                                                  const MatrixView& a, const MatrixView& b, float beta,       \
                                                  float* c, int64_t rs_c) {                                   \
    form(m, n, k, alpha, a, b, beta, c, rs_c);                                                                 \
  }
#define GK_ISA512 "avx512f,avx512vl,avx2,fma"
GK_MICRO_ENTRY(rows_512, GK_ISA512, (rows_form<Lanes512, false>))
GK_MICRO_ENTRY(rows_long_512, GK_ISA512, (rows_form<Lanes512, true>))
GK_MICRO_ENTRY(dots_512, GK_ISA512, dots_form<Lanes512>)
GK_MICRO_ENTRY(columns_512, GK_ISA512, (columns_form<Lanes512, false>))
GK_MICRO_ENTRY(columns_long_512, GK_ISA512, (columns_form<Lanes512, true>))
GK_MICRO_ENTRY(rows_half, GK_ISA512, (rows_form<Lanes512Half, false>))
GK_MICRO_ENTRY(rows_long_half, GK_ISA512, (rows_form<Lanes512Half, true>))
GK_MICRO_ENTRY(dots_half, GK_ISA512, dots_form<Lanes512Half>)
GK_MICRO_ENTRY(columns_half, GK_ISA512, (columns_form<Lanes512Half, false>))
GK_MICRO_ENTRY(columns_long_half, GK_ISA512, (columns_form<Lanes512Half, true>))
GK_MICRO_ENTRY(rows_256, "avx2,fma", (rows_form<Lanes256, false>))
GK_MICRO_ENTRY(rows_long_256, "avx2,fma", (rows_form<Lanes256, true>))
GK_MICRO_ENTRY(dots_256, "avx2,fma", dots_form<Lanes256>)
GK_MICRO_ENTRY(columns_256, "avx2,fma", (columns_form<Lanes256, false>))
GK_MICRO_ENTRY(columns_long_256, "avx2,fma", (columns_form<Lanes256, true>))
#undef GK_ISA512
#undef GK_MICRO_ENTRY
#undef GK_MICRO_INLINE
#undef GK_MICRO256
#undef GK_MICRO512

struct MicroEntries {
  MicroEntry rows, rows_long, dots, columns, columns_long;
};
constexpr MicroEntries kEntries512{rows_512, rows_long_512, dots_512, columns_512, columns_long_512};
constexpr MicroEntries kEntries512Half{rows_half, rows_long_half, dots_half, columns_half, columns_long_half};
constexpr MicroEntries kEntries256{rows_256, rows_long_256, dots_256, columns_256, columns_long_256};

void run_micro(const MicroEntries& e, MicroForm form, int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
               const MatrixView& b, float beta, float* c, int64_t rs_c) {
  const bool long_k = k >= kMicroSetsMinK;
  switch (form) {
    case MicroForm::Rows: return (long_k ? e.rows_long : e.rows)(m, n, k, alpha, a, b, beta, c, rs_c);
    case MicroForm::Dots: return e.dots(m, n, k, alpha, a, b, beta, c, rs_c);
    case MicroForm::Columns: return (long_k ? e.columns_long : e.columns)(m, n, k, alpha, a, b, beta, c, rs_c);
    case MicroForm::None: break;
  }
}

bool rows_allowed(int64_t n, const MatrixView& b) { return b.cs == 1 || n == 1; }
bool columns_allowed(int64_t m, const MatrixView& a) { return a.rs == 1 || m == 1; }
bool dots_allowed(int64_t k, const MatrixView& a, const MatrixView& b) { return (a.cs == 1 && b.rs == 1) || k == 1; }

// Blocks of 4, 2 and 1 rows (or columns) that cover `count`.
int64_t blocks_of_4_2_1(int64_t count) { return (count >> 2) + ((count >> 1) & 1) + (count & 1); }

// The form with the lowest estimated cost among those the strides allow, in about cycles:
// a block's set-up as 8, a vector operation as 1, a dot product's horizontal sum and
// store as 6, a row of a block of columns stored to C (4, 2 or 1 floats) as 1 (fitted on
// the Xeon, gemm_micro against the paths it replaces: see path_limits). A dimension of 1 makes its stride irrelevant.
struct MicroChoice {
  MicroForm form = MicroForm::None;
  int64_t cost = 0;
};
template <int64_t kLanes>
MicroChoice micro_choice(int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b, int64_t rs_c) {
  const auto vectors = [](int64_t length) { return (length + kLanes - 1) / kLanes; };
  constexpr int64_t kBlock = 8, kDot = 6, kGroup = group_vectors(kLanes);
  MicroChoice best;
  const auto consider = [&](MicroForm form, bool allowed, int64_t cost) {
    if (allowed && (best.form == MicroForm::None || cost < best.cost)) best = {form, cost};
  };
  consider(MicroForm::Rows, rows_allowed(n, b),
           kBlock * ((vectors(n) + kGroup - 1) / kGroup) * blocks_of_4_2_1(m) + m * vectors(n) * (k + 1));
  consider(MicroForm::Columns, columns_allowed(m, a),
           kBlock * ((vectors(m) + kGroup - 1) / kGroup) * blocks_of_4_2_1(n) + n * vectors(m) * (k + 1) +
               (rs_c == 1 ? 0 : m * blocks_of_4_2_1(n)));
  consider(MicroForm::Dots, dots_allowed(k, a, b), m * n * (vectors(k) + kDot));
  return best;
}

// The wide forms below serve only calls that run on one thread anyway (threads_for; tested
// last, the dearest test).
bool one_thread(int64_t m, int64_t n, int64_t k) { return threads_for(2.0 * double(m) * double(n) * double(k)) == 1; }

// Past the bounds below, the columns form where A's columns are contiguous, C has a few
// columns (4 to micro_columns_max_n; at 2 and 3 the GEMV's passes were faster, at 16 the
// tiny path's), 32 to micro_columns_max_m rows, K from 8 to 256 (the range measured) and A
// stays in L1 (micro_columns_max_a_elements) across the blocks of columns: the tiny path
// gathers a transposed B and the GEMV strides down A (Xeon, one thread, ns per call:
// 128x8x40 TT 1028 -> 602, 183x5x15 TT 501 -> 373, 92x7x86 TN 1558 -> 1016, 250x12x40 TN
// 2617 -> 1827).
bool wide_columns_serve(const PathLimits& l, int64_t m, int64_t n, int64_t k, const MatrixView& a) {
  return a.rs == 1 && n >= 4 && n <= l.micro_columns_max_n && m >= 32 && m <= l.micro_columns_max_m && k >= 8 &&
         k <= 256 && m * k <= l.micro_columns_max_a_elements && one_thread(m, n, k);
}

// Past the bounds below, the dots form where A's rows and B's columns are contiguous, K
// at least two vectors and micro_dots_k_per_row times the shorter side of C, within the
// small products (small_multiply_adds; 60x60x600 NT lost to the in-place-A path, 37.5 ->
// 43.7 us), the larger operand within L2 (past it, the GEMV streams it on its own
// threads), neither side 1 (a GEMV): the GEMV paths make one dot product at a time and the
// tiny path gathers B, about K per row of C (Xeon, one thread, ns per call: 2x6x492 NT 225
// -> 136, 11x12x258 NT 976 -> 700, 12x9x1155 NT 6865 -> 2951, 50x10x400 NT 5494 -> 2637;
// at 16x16x16 126 -> 204 and 64x64x64 3325 -> 4935 the tiny path won).
bool wide_dots_serve(const PathLimits& l, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b) {
  return l.micro_dots_k_per_row > 0 && a.cs == 1 && b.rs == 1 && m >= 2 && n >= 2 && k >= 2 * l.micro_lanes &&
         k >= l.micro_dots_k_per_row * std::min(m, n) && double(m) * double(n) * double(k) <= l.small_multiply_adds &&
         std::max(m, n) * k * static_cast<int64_t>(sizeof(float)) <= l.gemv_min_matrix_bytes && one_thread(m, n, k);
}

template <int64_t kLanes>
MicroForm micro_form(const PathLimits& l, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b,
                     int64_t rs_c) {
  if (!g_micro_path_on.load(std::memory_order_relaxed)) return MicroForm::None;
  // (In integers: a product in doubles was a chain of conversions, a third of the test.)
  const int64_t most = l.micro_max_multiply_adds;
  if (m <= most && n <= most && k <= most && m * n <= l.micro_max_c_elements && m * n * k <= most) {
    const MicroChoice choice = micro_choice<kLanes>(m, n, k, a, b, rs_c);
    // Past the fixed bound, the columns form by the work, in vector multiply-adds: the
    // paths it replaces gather a transposed B (the tiny path) or stride down A's columns
    // (the GEMV). Not the rows form, the tiny path's own method in smaller blocks (16x16x16
    // NN 103 -> 115 ns); nor the dots form, whose estimate is past its work anyway. The
    // vectors as issued (a partial one whole) where C is at most 8 times wider than tall:
    // the tiny path loses as much on short columns (3x3x109 TT 284 -> 131 ns, 9x19x18 TT
    // 190 -> 171); wider, the GEMV's few-rows form is better (2x200x40 TT 882 ns, the
    // columns form 2017).
    const int64_t vector_work = n <= 8 * m ? (m + kLanes - 1) / kLanes * n * k : m * n * k / kLanes;
    const int64_t bound = choice.form == MicroForm::Columns
                              ? std::max(l.micro_max_cost, vector_work * l.micro_columns_cost_per_vector)
                              : l.micro_max_cost;
    if (choice.cost <= bound) return choice.form;
  }
  if (wide_columns_serve(l, m, n, k, a)) return MicroForm::Columns;
  if (wide_dots_serve(l, m, n, k, a, b)) return MicroForm::Dots;
  return MicroForm::None;
}

}  // namespace

bool micro_serves(const PathLimits& l, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b,
                  int64_t rs_c) {
  if (l.micro_lanes == Lanes512::kLanes) return micro_form<Lanes512::kLanes>(l, m, n, k, a, b, rs_c) != MicroForm::None;
  if (l.micro_lanes == Lanes256::kLanes) return micro_form<Lanes256::kLanes>(l, m, n, k, a, b, rs_c) != MicroForm::None;
  return false;
}

bool gemm_micro(const PathLimits& l, int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                const MatrixView& b, float beta, float* c, int64_t rs_c) {
  if (l.micro_lanes == Lanes512::kLanes) {
    const MicroForm form = micro_form<Lanes512::kLanes>(l, m, n, k, a, b, rs_c);
    if (form == MicroForm::None) return false;
    const int64_t along = form == MicroForm::Rows ? n : form == MicroForm::Columns ? m : k;
    run_micro(along <= Lanes512Half::kLanes ? kEntries512Half : kEntries512, form, m, n, k, alpha, a, b, beta, c, rs_c);
    return true;
  }
  if (l.micro_lanes == Lanes256::kLanes) {
    const MicroForm form = micro_form<Lanes256::kLanes>(l, m, n, k, a, b, rs_c);
    if (form == MicroForm::None) return false;
    run_micro(kEntries256, form, m, n, k, alpha, a, b, beta, c, rs_c);
    return true;
  }
  return false;
}

#else
// Never chosen: path_limits() gives no micro path without x86-64.
bool micro_serves(const PathLimits&, int64_t, int64_t, int64_t, const MatrixView&, const MatrixView&, int64_t) {
  return false;
}
bool gemm_micro(const PathLimits&, int64_t, int64_t, int64_t, float, const MatrixView&, const MatrixView&, float,
                float*, int64_t) {
  return false;
}
#endif

}  // namespace gk
