// tunefarm-model-import: an ONNX model on stdin, its tuning tasks (an ExtractTasksResponse) on
// stdout; a bad model is one line on stderr and exit status 2. tunerd imports uploaded models
// through this program so that a model that crashes the ONNX library, or exhausts memory or time,
// ends this process and not the service.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>

#include "common/input_shape.h"
#include "tuner/model_tasks.h"

int main(int argc, char** argv) {
  CLI::App app("tunefarm-model-import: an ONNX model's tuning tasks (run by tunerd)");
  std::string name;
  std::vector<std::string> shapes;
  uint64_t memory_mb = 8192, cpu_seconds = 300;
  app.add_option("--name", name, "The model's file name, for messages");
  app.add_option("--input-shape", shapes, "NAME=d0,d1,...");
  app.add_option("--memory-limit-mb", memory_mb, "Address-space limit")->capture_default_str();
  app.add_option("--cpu-seconds", cpu_seconds, "CPU time limit")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  rlimit memory{memory_mb << 20, memory_mb << 20}, cpu{cpu_seconds, cpu_seconds};
  setrlimit(RLIMIT_AS, &memory);
  setrlimit(RLIMIT_CPU, &cpu);
  std::map<std::string, std::vector<int64_t>> input_shapes;
  for (const auto& text : shapes) {
    auto shape = tunefarm::parse_input_shape(text);
    if (!shape.ok()) {
      std::fprintf(stderr, "%s\n", shape.status().message().c_str());
      return 2;
    }
    input_shapes[shape->first] = shape->second;
  }
  std::string model((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto tasks = tunefarm::extract_model_tasks(model, name, input_shapes);
  if (!tasks.ok()) {
    std::fprintf(stderr, "%s\n", tasks.status().message().c_str());
    return 2;
  }
  return tasks->SerializeToFileDescriptor(STDOUT_FILENO) ? 0 : 1;
}
