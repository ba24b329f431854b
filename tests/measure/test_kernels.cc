#include "tests/measure/test_kernels.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tunefarm::testing {

v1::Artifact kernel_artifact(const std::string& name) {
  std::string path = std::string(TUNEFARM_TEST_KERNEL_DIR) + "/kernel_" + name + ".so";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("test kernel missing: " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::Artifact artifact;
  artifact.set_format(v1::Artifact::SHARED_OBJECT);
  artifact.set_data(bytes.str());
  artifact.set_entry_symbol(name == "reference" ? "reference_entry" : "entry");
  for (const char* arg : {"A", "B", "C"}) {
    auto* a = artifact.add_args();
    a->set_name(arg);
    a->add_shape(64);
    a->add_shape(64);
    a->set_dtype(v1::FLOAT32);
    a->set_is_output(std::string(arg) == "C");
  }
  artifact.mutable_target()->set_kind("llvm");
  return artifact;
}

v1::Artifact reference_artifact() { return kernel_artifact("reference"); }

v1::Workload test_workload() {
  v1::Workload w;
  w.set_op("matmul");
  for (const char* p : {"M", "N", "K"}) {
    auto* param = w.add_params();
    param->set_name(p);
    param->set_value(64);
  }
  w.set_dtype(v1::FLOAT32);
  return w;
}

v1::MeasureOptions quick_options(double timeout_s) {
  v1::MeasureOptions o;
  o.set_number(1);
  o.set_repeat(2);
  o.set_timeout_s(timeout_s);
  o.set_check_correctness(true);
  o.set_input_seed(42);
  return o;
}

}  // namespace tunefarm::testing
