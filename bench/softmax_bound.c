// softmax_bound: what a softmax over rows of n floats costs on this CPU when written by hand with
// AVX-512 intrinsics, beside a copy of the same bytes, to tell the exponentials' cost from the
// memory traffic's (bench/RESULTS.md, issue 32's softmax target). Three contenders, interleaved,
// each a median over rounds: a warm copy (memcpy, both tensors in cache), the softmax's passes
// without the exponential (max, sum, scale: the memory and reduction work), and the softmax with
// a 13-instruction vector exponential (the form codegen_llvm.cc emits). Not part of the build:
//   cc -O3 -mavx512f -mfma bench/softmax_bound.c -o softmax_bound -lm && ./softmax_bound 2364 197
// (ViT-B/16's attention, 12 heads x 197 rows of 197). Ends with one JSON line.
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// e^x: x = n ln2 + r, e^r by a degree-5 polynomial, 2^n by scalef.
static inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

static void softmax(const float* x, float* y, long rows, int n, int with_exp) {
  __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
  int whole = n - n % 16;
  for (long i = 0; i < rows; ++i) {
    const float* xr = x + i * n;
    float* yr = y + i * n;
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int k = 0; k < whole; k += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(xr + k));
    if (tail) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, xr + whole));
    __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(m)), s = _mm512_setzero_ps();
    for (int k = 0; k < whole; k += 16) {
      __m512 e = _mm512_sub_ps(_mm512_loadu_ps(xr + k), mv);
      if (with_exp) e = exp16(e);
      _mm512_storeu_ps(yr + k, e);
      s = _mm512_add_ps(s, e);
    }
    if (tail) {
      __m512 e = _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, xr + whole), mv);
      if (with_exp) e = exp16(e);
      e = _mm512_maskz_mov_ps(tail, e);
      _mm512_mask_storeu_ps(yr + whole, tail, e);
      s = _mm512_add_ps(s, e);
    }
    __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(s));
    for (int k = 0; k < whole; k += 16) _mm512_storeu_ps(yr + k, _mm512_mul_ps(_mm512_loadu_ps(yr + k), inv));
    if (tail) _mm512_mask_storeu_ps(yr + whole, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, yr + whole), inv));
  }
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  long rows = argc > 1 ? atol(argv[1]) : 2364;
  int n = argc > 2 ? atoi(argv[2]) : 197;
  enum { kRounds = 101 };
  if (rows < 1 || n < 1) {
    fprintf(stderr, "usage: %s [ROWS [N]]\n", argv[0]);
    return 2;
  }
  size_t count = (size_t)rows * (size_t)n, bytes = (count * 4 + 63) / 64 * 64;
  float *x = aligned_alloc(64, bytes), *y = aligned_alloc(64, bytes);
  if (!x || !y) return 1;
  for (size_t i = 0; i < count; ++i) x[i] = (float)((i * 2654435761u) % 1000) / 100.f - 5.f;
  double t[3][kRounds];
  for (int r = 0; r < kRounds; ++r) {
    for (int c = 0; c < 3; ++c) {
      double start = now();
      if (c == 0) memcpy(y, x, count * 4);
      else softmax(x, y, rows, n, c == 2);
      t[c][r] = now() - start;
    }
  }
  // The softmax's outputs against expf's, on the first rows (the last run left them in y).
  double worst = 0;
  for (long i = 0; i < (rows < 64 ? rows : 64); ++i) {
    const float* xr = x + i * n;
    double m = -INFINITY, sum = 0;
    for (int k = 0; k < n; ++k) m = xr[k] > m ? xr[k] : m;
    for (int k = 0; k < n; ++k) sum += exp(xr[k] - m);
    for (int k = 0; k < n; ++k) {
      double want = exp(xr[k] - m) / sum, err = fabs(y[i * n + k] - want) / want;
      worst = err > worst ? err : worst;
    }
  }
  double med[3];
  for (int c = 0; c < 3; ++c) {
    qsort(t[c], kRounds, sizeof(double), by_value);
    med[c] = t[c][kRounds / 2] * 1e3;
  }
  printf("%ld rows of %d: copy %.4f ms, softmax without exp %.4f ms (%.2fx the copy), softmax %.4f ms (%.2fx), "
         "largest relative error %.1e\n", rows, n, med[0], med[1], med[1] / med[0], med[2], med[2] / med[0], worst);
  printf("{\"rows\":%ld,\"n\":%d,\"copy_ms\":%.5f,\"no_exp_ms\":%.5f,\"softmax_ms\":%.5f,\"softmax_vs_copy\":%.3f,"
         "\"no_exp_vs_copy\":%.3f,\"max_relative_error\":%.2e}\n",
         rows, n, med[0], med[1], med[2], med[2] / med[0], med[1] / med[0], worst);
  free(x);
  free(y);
  return 0;
}
