// Small ONNX models built in code, for the cases the generated models do not cover (bad files,
// unsupported operators), and the paths of the generated ones.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>

#include <initializer_list>
#include <string>
#include <vector>

#include "common/helper_program.h"

namespace tunefarm::model::testing {

inline std::string test_model(const std::string& name) { return std::string(TUNEFARM_TEST_MODELS) + "/" + name; }

#ifdef TUNEFARM_VENV_PYTHON
// Writes the models in the patterns of today's exporters (models/make_models.py
// --exporter-patterns) into `dir` with the current onnx package of build/venv; an error says why not.
inline std::string write_exporter_patterns(const std::string& dir) {
  std::string python = TUNEFARM_VENV_PYTHON;
  if (!std::filesystem::exists(python)) return python + " is missing: deploy/install-deps.sh makes it (make test runs it)";
  auto run = run_helper({python, std::string(TUNEFARM_SOURCE_DIR) + "/models/make_models.py", dir, "--exporter-patterns"},
                        "", std::chrono::minutes(2));
  if (!run.ok()) return run.status().to_string();
  return run->exit_code == 0 ? "" : run->err;
}
#endif

class ModelBuilder {
 public:
  ModelBuilder() {
    model_.set_ir_version(8);
    auto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(13);
    model_.mutable_graph()->set_name("test");
  }
  void set_opset(int version) { model_.mutable_opset_import(0)->set_version(version); }
  void input(const std::string& name, std::initializer_list<int64_t> dims) { value(model_.mutable_graph()->add_input(), name, dims); }
  void output(const std::string& name, std::initializer_list<int64_t> dims) { value(model_.mutable_graph()->add_output(), name, dims); }
  void weight(const std::string& name, std::vector<int64_t> dims, float fill = 0.5f) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(fill + 0.01f * static_cast<float>(i % 7));
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs, std::string output,
                        const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? output + "_node" : name);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& key, std::vector<int64_t> values) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void integer(onnx::NodeProto* n, const std::string& key, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  // Moves the data of weight `name` to `location` (relative to the model's folder) at `offset`, as
  // onnx.save(..., save_as_external_data=True) does; the bytes to write there are returned.
  std::string external(const std::string& name, const std::string& location, int64_t offset = 0) {
    for (auto& t : *model_.mutable_graph()->mutable_initializer()) {
      if (t.name() != name) continue;
      std::string data(reinterpret_cast<const char*>(t.float_data().data()), t.float_data_size() * sizeof(float));
      t.clear_float_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (auto [key, value] : {std::pair<std::string, std::string>{"location", location},
                                {"offset", std::to_string(offset)}, {"length", std::to_string(data.size())}}) {
        auto* kv = t.add_external_data();
        kv->set_key(key);
        kv->set_value(value);
      }
      return data;
    }
    return "";
  }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void value(onnx::ValueInfoProto* v, const std::string& name, std::initializer_list<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto model_;
};

}  // namespace tunefarm::model::testing
