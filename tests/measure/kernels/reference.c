/* The naive reference for matmul.c: plain loops, accumulating in double. */
#include <stdint.h>

#ifndef N
#define N 64
#endif

int32_t reference_entry(void* const* args) {
  const float* a = (const float*)args[0];
  const float* b = (const float*)args[1];
  float* c = (float*)args[2];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int p = 0; p < N; ++p) sum += (double)a[i * N + p] * b[p * N + j];
      c[i * N + j] = (float)sum;
    }
  return 0;
}
