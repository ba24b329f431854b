/* libname.h: a model built by tunefarm (`tune-client build --model`) for target '{{TARGET}}'.
 *
{{IO}} *
 * Link with liblibname.so (or liblibname.a plus -lstdc++ -lpthread -lm). Create an instance from the
 * weights file built with the library (libname.weights), run it as often as needed, destroy it.
 * Tensors are dense arrays, row-major, in the model's shapes, each of the element type above:
 * float32, or int64 / int32 / bool for token ids and masks in, and for labels and comparisons out
 * (a bool is one byte). Every function that can fail returns LIBNAME_OK (0) or an error code; libname_last_error() says what went wrong on this thread.
 * One instance runs one inference at a time; use one instance per thread to run several.
 */
#ifndef LIBNAME_H_
#define LIBNAME_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
/* {{ERROR_CODES}} */
  LIBNAME_ERROR_WEIGHTS = 4,          /* the weights file is missing, unreadable or not this library's */
  LIBNAME_ERROR_SHAPE = 5             /* an input or output buffer has the wrong number of elements */
};

typedef struct libname_model libname_model;

/* Reads and checks the weights file; *out is the new instance. */
int libname_create(const char* weights_path, libname_model** out);
void libname_destroy(libname_model* model);

/* Runs the model: inputs[i] holds input_elements[i] elements of the input's type (see
 * libname_input_dtype) and outputs[i] room for output_elements[i] elements of the output's type
 * (libname_output_dtype; an int64 output's buffer is passed as (float*) of its int64_t array),
 * which must be the model's sizes (see the shapes above and the functions below). */
int libname_run(libname_model* model, const void* const* inputs, const int64_t* input_elements, float* const* outputs,
            const int64_t* output_elements);
/* The same, adding each step's seconds to step_seconds[0 .. libname_num_steps() - 1]. */
int libname_run_profiled(libname_model* model, const void* const* inputs, const int64_t* input_elements,
                     float* const* outputs, const int64_t* output_elements, double* step_seconds);

/* Threads the kernels use, the calling thread included; 0 restores the default
 * ($TUNEFARM_NUM_THREADS, else the CPUs this process may run on). */
int libname_set_num_threads(int num_threads);

const char* libname_last_error(void);
const char* libname_error_string(int code);

int libname_num_inputs(void);
int libname_num_outputs(void);
const char* libname_input_name(int i);
const char* libname_output_name(int i);
const char* libname_input_dtype(int i);   /* "float32", "int64", "int32" or "bool" (one byte) */
const char* libname_output_dtype(int i);  /* "float32", "int64", "int32" or "bool" */
int libname_input_rank(int i);
int libname_output_rank(int i);
const int64_t* libname_input_shape(int i);
const int64_t* libname_output_shape(int i);
int libname_num_steps(void);
const char* libname_step_name(int i);  /* "node (operator)" */

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* LIBNAME_H_ */
