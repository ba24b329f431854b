/* Calls a GEMM and a convolution from a kernel library that `tune-client build` made of
 * workloads.txt with --name example_kernels, and checks both against naive loops. Prints "ok" and
 * exits 0 when they agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_kernels.h"

enum { M = 128, N = 96, K = 64 };
enum { C = 16, H = 14, W = 14, KO = 32, R = 3, S = 3, PAD = 1 };

static float frand(unsigned* state) {
  *state = *state * 1103515245u + 12345u;
  return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int close_enough(const float* got, const double* want, int n, int terms) {
  for (int i = 0; i < n; ++i) {
    double tol = 1e-5 * sqrt((double)terms) * (1.0 + fabs(want[i]));
    if (!(fabs(got[i] - want[i]) <= tol)) {
      fprintf(stderr, "element %d: got %g, want %g\n", i, got[i], want[i]);
      return 0;
    }
  }
  return 1;
}

static int check_gemm(void) {
  static float a[M * K], b[K * N], c[M * N];
  static double want[M * N];
  unsigned seed = 1;
  for (int i = 0; i < M * K; ++i) a[i] = frand(&seed);
  for (int i = 0; i < K * N; ++i) b[i] = frand(&seed);
  int rc = example_kernels_matmul_M128_N96_K64(a, b, c);
  if (rc != EXAMPLE_KERNELS_OK) {
    fprintf(stderr, "gemm: %s\n", example_kernels_error_string(rc));
    return 0;
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (double)a[i * K + k] * b[k * N + j];
      want[i * N + j] = s;
    }
  return close_enough(c, want, M * N, K);
}

static int check_conv(void) {
  static float in[C * H * W], w[KO * C * R * S], out[KO * H * W];
  static double want[KO * H * W];
  unsigned seed = 2;
  for (int i = 0; i < C * H * W; ++i) in[i] = frand(&seed);
  for (int i = 0; i < KO * C * R * S; ++i) w[i] = frand(&seed);
  int rc = example_kernels_conv2d_nchw_N1_C16_H14_W14_K32_R3_S3_stride1_pad1(in, w, out);
  if (rc != EXAMPLE_KERNELS_OK) {
    fprintf(stderr, "conv: %s\n", example_kernels_error_string(rc));
    return 0;
  }
  for (int k = 0; k < KO; ++k)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        double s = 0;
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r)
            for (int q = 0; q < S; ++q) {
              int iy = y + r - PAD, ix = x + q - PAD;
              if (iy >= 0 && iy < H && ix >= 0 && ix < W) s += (double)in[(c * H + iy) * W + ix] * w[((k * C + c) * R + r) * S + q];
            }
        want[(k * H + y) * W + x] = s;
      }
  return close_enough(out, want, KO * H * W, C * R * S);
}

int main(void) {
  if (example_kernels_set_num_threads(2) != EXAMPLE_KERNELS_OK) return 1;
  if (!check_gemm() || !check_conv()) return 1;
  printf("ok\n");
  return 0;
}
