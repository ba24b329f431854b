// One unary call to tunerd (the --server address) with a deadline, for the commands that make
// exactly one request: they differ in the request they build and how they print the answer.
#pragma once

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "client/command.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::client {

template <typename Request, typename Response>
grpc::Status call_tuner(const GlobalFlags& global,
                        grpc::Status (v1::Tuner::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                        const Request& request, Response* response,
                        std::chrono::seconds timeout = std::chrono::seconds(10)) {
  auto stub = v1::Tuner::NewStub(dial(global.server));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  return (stub.get()->*method)(&context, request, response);
}

}  // namespace tunefarm::client
