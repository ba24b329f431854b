// Models written for newer IR versions and opsets than Debian's libonnx (1.12: IR 8, opset 17)
// knows. The IR version says how a file is written, not what it computes: the fields a newer IR
// adds are ones tunefarm does not read, so the checker runs at the IR version it knows. Operators
// whose form changed after opset 17 in ways exporters use (Reduce*'s axes became an input in 18,
// Split's num_outputs, new attributes left at their defaults) are rewritten to the form libonnx
// checks and infers; operators added since (Gelu, Swish, Mish) get schemas of their own here, and
// Einsum a shape inference (libonnx 1.12 infers its rank only).
// What stays is refused up front, naming the opset and the operators that need it.
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <string>

#include "common/status.h"

namespace tunefarm::model {

// The newest opset of the ONNX operators whose changes tunefarm knows (that of onnx 1.23).
inline constexpr int kNewestOpset = 28;

// ONNX's exceptions carry several lines of context; errors here are one line.
std::string one_line(std::string text);

// The opset of the default domain a model imports (0 when it imports none).
int onnx_opset(const onnx::ModelProto& model);

// libonnx's schemas, and those of the operators it does not know that tunefarm reads.
const onnx::ISchemaRegistry& onnx_schemas();

// Rewrites `model` into the form libonnx checks (see above); an error names the opset and every
// operator it cannot take.
Status to_known_forms(onnx::ModelProto& model);

// ONNX's checker over the rewritten model, at the IR version libonnx knows, with onnx_schemas().
Status check_onnx_model(const onnx::ModelProto& model);

}  // namespace tunefarm::model
