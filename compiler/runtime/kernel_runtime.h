// The tiny kernel runtime: what a generated kernel may call. Both the tuner's local runner and the
// device agent link it (as a shared library, so that a kernel loaded with dlopen finds these
// symbols), and nothing in it knows about LLVM, gRPC or SQLite.
//
// Kernel ABI: a CPU artifact's entry point is
//     int32_t entry(void* const* args);
// where args[i] points to the i-th tensor argument (dense, row-major). It returns 0 on success.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Body of a parallel loop: runs the share `task_id` of `num_tasks` of the iterations.
typedef int32_t (*tunefarm_parallel_lambda)(int32_t task_id, int32_t num_tasks, void* closure);

// Runs fn(task, n, closure) for task in [0, n) on the runtime's thread pool and waits for all of
// them; n is `num_tasks`, or the pool's size when it is 0. Called from inside a parallel body it
// runs the tasks on the calling thread. Returns 0, or the first non-zero value a task returned.
int32_t tunefarm_parallel_launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks);

// Memory for packed layouts and other scratch buffers, 64-byte aligned. NULL when out of memory.
void* tunefarm_workspace_alloc(int64_t bytes);
void tunefarm_workspace_free(void* ptr);

// Threads of the pool (the caller counts as one). Default: TUNEFARM_NUM_THREADS, else the number
// of CPUs this process may run on. Setting it restarts the pool.
void tunefarm_runtime_set_num_threads(int32_t num_threads);
int32_t tunefarm_runtime_num_threads(void);

#ifdef __cplusplus
}
#endif
