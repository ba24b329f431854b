/* Loads a model built by `tune-client build --model ... --name resnet50`, runs one deterministic
 * input and prints the five highest-scoring classes, as the tutorials do:
 *
 *   cc -O2 -I DIR top5.c -L DIR -lresnet50 -Wl,-rpath,DIR -o top5 && ./top5 DIR/resnet50.weights
 *
 * Another model name: -DMODEL_NAME=<name> -DMODEL_HEADER='"<name>.h"'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef MODEL_NAME
#define MODEL_NAME resnet50
#define MODEL_HEADER "resnet50.h"
#endif
#include MODEL_HEADER

#define PASTE(a, b) a##_##b
#define EXPAND(a, b) PASTE(a, b)
#define MODEL(fn) EXPAND(MODEL_NAME, fn)

static int64_t elements(const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s WEIGHTS_FILE\n", argv[0]);
    return 2;
  }
  MODEL(model)* model = NULL;
  if (MODEL(create)(argv[1], &model) != 0) {
    fprintf(stderr, "create: %s\n", MODEL(last_error)());
    return 1;
  }
  int64_t in_n = elements(MODEL(input_shape)(0), MODEL(input_rank)(0));
  int64_t out_n = elements(MODEL(output_shape)(0), MODEL(output_rank)(0));
  float* input = malloc(sizeof(float) * (size_t)in_n);
  float* scores = malloc(sizeof(float) * (size_t)out_n);
  if (!input || !scores) return 1;
  /* A deterministic image: a smooth pattern in [-1, 1]. */
  for (int64_t i = 0; i < in_n; ++i) input[i] = (float)sin(0.001 * (double)i);
  const void* inputs[] = {input};
  float* outputs[] = {scores};
  if (MODEL(run)(model, inputs, &in_n, outputs, &out_n) != 0) {
    fprintf(stderr, "run: %s\n", MODEL(last_error)());
    return 1;
  }
  printf("top-5 of %lld classes:\n", (long long)out_n);
  for (int k = 0; k < 5 && k < out_n; ++k) {
    int64_t best = -1;
    for (int64_t i = 0; i < out_n; ++i)
      if (!isnan(scores[i]) && (best < 0 || scores[i] > scores[best])) best = i;
    if (best < 0) break;
    printf("  class %4lld  score %.4f\n", (long long)best, scores[best]);
    scores[best] = NAN;
  }
  MODEL(destroy)(model);
  free(input);
  free(scores);
  return 0;
}
