/* A correct N x N x N float matmul following the kernel ABI, parallel over rows through the kernel
 * runtime (so that loading it proves the runtime's symbols resolve). Built with WRONG_ANSWER
 * defined it adds one to one element, for the wrong-answer test. */
#include <stdint.h>

#include "compiler/runtime/kernel_runtime.h"

#ifndef N
#define N 64
#endif

struct closure {
  const float* a;
  const float* b;
  float* c;
};

static int32_t rows(int32_t task, int32_t num_tasks, void* data) {
  struct closure* k = (struct closure*)data;
  int begin = N * task / num_tasks, end = N * (task + 1) / num_tasks;
  for (int i = begin; i < end; ++i) {
    for (int j = 0; j < N; ++j) k->c[i * N + j] = 0.0f;
    for (int p = 0; p < N; ++p) {
      float a = k->a[i * N + p];
      for (int j = 0; j < N; ++j) k->c[i * N + j] += a * k->b[p * N + j];
    }
  }
  return 0;
}

int32_t ENTRY(void* const* args) {
  struct closure k = {(const float*)args[0], (const float*)args[1], (float*)args[2]};
  int32_t rc = tunefarm_parallel_launch(rows, &k, 0);
#ifdef WRONG_ANSWER
  k.c[N + 3] += 1.0f;
#endif
  return rc;
}
