// libFuzzer targets for requests as they arrive off the wire, below the gRPC layer:
//  - requests_fuzz: bytes parsed as the request messages of both services (Measure, agent
//    messages, SubmitJob, QueryBest, ListRecords) and put through the checks each handler runs
//    first: validate_measure_request, validate_hello, validate_key_filter and the proto -> C++
//    conversions of workloads, targets and configs.
//  - record_fuzz: a line of ImportRecords' JSON-lines upload, parsed and encoded as the history
//    stores it; a record that encodes must decode and encode again to the same canonical row.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "common/wire/wire.h"
#include "tracker/broker.h"
#include "tunefarm/v1/tracker.pb.h"
#include "tunefarm/v1/tuner.pb.h"

#if defined(TUNEFARM_FUZZ_RECORD)
#include "db/record_codec.h"
#endif

namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::abort();
}

}  // namespace

// Protobuf logs every string field that is not UTF-8; the fuzzer makes millions of them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

#if defined(TUNEFARM_FUZZ_REQUESTS)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  if (size == 0) return 0;
  const auto* body = reinterpret_cast<const char*>(data + 1);
  int length = static_cast<int>(size - 1);
  BrokerOptions options;
  options.max_candidates = 64;
  options.max_artifact_bytes = 1 << 16;
  switch (data[0] % 5) {
    case 0: {
      v1::MeasureRequest request;
      if (!request.ParseFromArray(body, length)) return 0;
      (void)validate_measure_request(request, options);
      break;
    }
    case 1: {
      v1::AgentMessage message;
      if (!message.ParseFromArray(body, length)) return 0;
      if (message.has_hello()) (void)validate_hello(message.hello(), options);
      break;
    }
    case 2: {
      v1::SubmitJobRequest request;
      if (!request.ParseFromArray(body, length)) return 0;
      for (const auto& task : request.spec().tasks()) {
        auto workload = from_proto(task.workload());
        if (workload.ok() && !validate_workload(*workload).ok()) broken("a converted workload fails validation");
      }
      (void)from_proto(request.spec().target());
      break;
    }
    case 3: {
      v1::QueryBestRequest request;
      if (!request.ParseFromArray(body, length)) return 0;
      (void)from_proto(request.workload());
      (void)from_proto(request.target());
      (void)validate_key_filter(request.device_key());
      break;
    }
    default: {
      v1::Record record;
      if (!record.ParseFromArray(body, length)) return 0;
      (void)from_proto(record.config());
      break;
    }
  }
  return 0;
}
#elif defined(TUNEFARM_FUZZ_RECORD)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  auto record = record_from_json_line({reinterpret_cast<const char*>(data), size});
  if (!record.ok()) return 0;
  auto row = db::to_row(*record);
  if (!row.ok()) return 0;
  auto back = db::from_row(*row, 1);
  if (!back.ok()) broken("a row the encoder made does not decode: " + back.status().message());
  auto again = db::to_row(*back);
  if (!again.ok()) broken("a decoded record does not encode again: " + again.status().message());
  if (again->workload != row->workload || again->target != row->target || again->config != row->config ||
      again->costs != row->costs || again->device_key != row->device_key || again->error_code != row->error_code)
    broken("a record's canonical row changes after a round trip: " + row->workload + " " + row->config);
  return 0;
}
#else
#error "define TUNEFARM_FUZZ_REQUESTS or TUNEFARM_FUZZ_RECORD"
#endif
