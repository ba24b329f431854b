// Conversions between the C++ types of common/ and their wire messages, and between Status and
// grpc::Status. Kept apart from the rest of common/ so that the compiler never sees gRPC.
#pragma once

#include <grpcpp/support/status.h>

#include "common/config.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

v1::DType to_proto(DType dtype);
StatusOr<DType> from_proto(v1::DType dtype);

v1::Workload to_proto(const Workload& workload);
// Validates as parse_workload does; errors name the workload.
StatusOr<Workload> from_proto(const v1::Workload& workload);

v1::Target to_proto(const Target& target);
StatusOr<Target> from_proto(const v1::Target& target);

v1::Config to_proto(const Config& config);
Config from_proto(const v1::Config& config);

grpc::Status to_grpc(const Status& status);
Status from_grpc(const grpc::Status& status);

}  // namespace tunefarm
