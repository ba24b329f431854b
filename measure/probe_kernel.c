/* The agent's probe: a small float matmul following the kernel ABI (entry) with itself as the
 * reference (reference_entry). The agent measures it once at start, checked against the reference,
 * so that an agent whose sandbox cannot run kernels (too small a memory limit, a missing library)
 * says so instead of failing every candidate it is sent. */
#include <stdint.h>

#define N 32

static int32_t matmul(void* const* args) {
  const float* a = (const float*)args[0];
  const float* b = (const float*)args[1];
  float* c = (float*)args[2];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int p = 0; p < N; ++p) sum += a[i * N + p] * b[p * N + j];
      c[i * N + j] = sum;
    }
  return 0;
}

int32_t entry(void* const* args) { return matmul(args); }
int32_t reference_entry(void* const* args) { return matmul(args); }
