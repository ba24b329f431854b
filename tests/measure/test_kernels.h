// Artifacts built from the test kernels of tests/measure/kernels (64 x 64 x 64 float
// matmuls and broken variants), for the measurement, tracker and farm tests.
#pragma once

#include <string>

#include "tunefarm/v1/common.pb.h"

namespace tunefarm::testing {

// "matmul", "matmul_wrong", "reference", "crash", "hang", "failing", "nosym", "counter" (adds
// one to C[0] each run), and the sandbox probes "socket", "escape", "hog", "probe".
v1::Artifact kernel_artifact(const std::string& name);
v1::Artifact reference_artifact();
// matmul:M=64,N=64,K=64, the workload every test kernel implements.
v1::Workload test_workload();
// Quick options: one run per repeat, two repeats, correctness checked.
v1::MeasureOptions quick_options(double timeout_s = 5);

}  // namespace tunefarm::testing
