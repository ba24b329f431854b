#include "tracker/service.h"

#include <deque>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/blocking_queue.h"
#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "tracker/metrics.h"

namespace tunefarm {
namespace {

// How often a waiting Measure handler checks whether its tuner has gone.
constexpr std::chrono::milliseconds kCancelPoll{100};

// Writes what was queued, in order.
template <typename Stream, typename Message>
bool write_burst(Stream* stream, std::deque<Message>& messages) {
  while (!messages.empty()) {
    if (!stream->Write(messages.front())) return false;
    messages.pop_front();
  }
  return true;
}

v1::TrackerMessage goodbye(const Status& why) {
  v1::TrackerMessage message;
  message.mutable_goodbye()->set_reason(why.to_string());
  return message;
}

// The broker's way down one agent stream; a writer thread drains the outbox.
class AgentStream : public AgentChannel {
 public:
  explicit AgentStream(grpc::ServerContext* context) : context_(context) {}

  void send_batch(v1::LeasedBatch batch) override {
    v1::TrackerMessage message;
    *message.mutable_batch() = std::move(batch);
    outbox_.push(std::move(message));
  }

  // From the broker: the reader is blocked in Read, so the call is cancelled once the goodbye is out.
  void close(const Status& why) override { end(why, true); }

  // From the reader, which has stopped reading: `why` is OK when the agent ended the stream.
  void finish(const Status& why) { end(why, false); }

  // The status the session ends with.
  Status why() {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

  void write_loop(grpc::ServerReaderWriter<v1::TrackerMessage, v1::AgentMessage>* stream) {
    std::deque<v1::TrackerMessage> messages;
    for (bool open = true; open;) {
      auto got = outbox_.pop_all(messages, std::chrono::hours(1));
      if (got == BlockingQueue<v1::TrackerMessage>::Pop::kTimeout) continue;
      if (got == BlockingQueue<v1::TrackerMessage>::Pop::kClosed) break;
      open = write_burst(stream, messages);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (cancel_) context_->TryCancel();
  }

 private:
  void end(const Status& why, bool cancel) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ended_) return;
      ended_ = true;
      why_ = why;
      cancel_ = cancel;
    }
    if (!why.ok()) outbox_.push(goodbye(why));
    outbox_.close();
  }

  grpc::ServerContext* context_;
  BlockingQueue<v1::TrackerMessage> outbox_;
  std::mutex mu_;
  bool ended_ = false;
  bool cancel_ = false;
  Status why_;
};

class TunerStream : public TunerChannel {
 public:
  void send_result(v1::MeasureResponse response) override { outbox_.push(std::move(response)); }
  void finish() override { outbox_.close(); }
  BlockingQueue<v1::MeasureResponse>& outbox() { return outbox_; }

 private:
  BlockingQueue<v1::MeasureResponse> outbox_;
};

}  // namespace

grpc::Status TrackerService::AgentSession(grpc::ServerContext* context,
                                          grpc::ServerReaderWriter<v1::TrackerMessage, v1::AgentMessage>* stream) {
  if (auto s = authorize(context, "AgentSession"); !s.ok()) return s;
  v1::AgentMessage first;
  // A first message that does not parse also ends up here: the synchronous API reports both alike.
  if (!stream->Read(&first))
    return to_grpc(invalid_argument("no hello: the stream ended, or its first message is not an AgentMessage"));
  if (first.msg_case() != v1::AgentMessage::kHello) {
    Status refused = invalid_argument("the first message of a session must be a hello");
    stream->Write(goodbye(refused));
    return to_grpc(refused);
  }
  auto channel = std::make_shared<AgentStream>(context);
  SessionId session = 0;
  auto ack = broker_.open_session(first.hello(), context->peer(), channel, session);
  if (!ack.ok()) {
    spdlog::warn("refused a hello from {}: {}", context->peer(), ack.status().to_string());
    stream->Write(goodbye(ack.status()));
    return to_grpc(ack.status());
  }
  v1::TrackerMessage ack_message;
  *ack_message.mutable_hello_ack() = *ack;
  // The ack goes out before the writer starts, so that it precedes any batch.
  stream->Write(ack_message);
  std::thread writer([&] { channel->write_loop(stream); });

  Status ended = Status();
  v1::AgentMessage message;
  while (stream->Read(&message)) {
    Status s = broker_.on_agent_message(session, message);
    if (!s.ok()) {
      spdlog::warn("agent session {} broke the protocol: {}", session, s.to_string());
      ended = s;
      break;
    }
  }
  broker_.close_session(session, ended.ok() ? "the stream ended" : ended.message());
  channel->finish(ended);
  writer.join();
  return to_grpc(channel->why());
}

grpc::Status TrackerService::Measure(grpc::ServerContext* context, const v1::MeasureRequest* request,
                                     grpc::ServerWriter<v1::MeasureResponse>* writer) {
  if (auto s = authorize(context, "Measure"); !s.ok()) return s;
  auto channel = std::make_shared<TunerStream>();
  auto id = broker_.submit(*request, channel);
  if (!id.ok()) return to_grpc(id.status());
  std::deque<v1::MeasureResponse> responses;
  for (;;) {
    auto got = channel->outbox().pop_all(responses, kCancelPoll);
    if (got == BlockingQueue<v1::MeasureResponse>::Pop::kClosed) return grpc::Status::OK;
    if (got == BlockingQueue<v1::MeasureResponse>::Pop::kItem && write_burst(writer, responses)) continue;
    if (got == BlockingQueue<v1::MeasureResponse>::Pop::kTimeout && !context->IsCancelled()) continue;
    broker_.cancel(*id);
    return grpc::Status(grpc::StatusCode::CANCELLED, "the tuner went away");
  }
}

const std::map<std::string, TrackerCaller, std::less<>>& tracker_access() {
  static const std::map<std::string, TrackerCaller, std::less<>> table = {
      {"AgentSession", TrackerCaller::kAgent},
      {"Measure", TrackerCaller::kTuner},
      {"ListDevices", TrackerCaller::kReader},
      {"QueueStatus", TrackerCaller::kReader},
  };
  return table;
}

CallGate tracker_gate(const BrokerOptions& options) {
  CallGate gate{{},
                "this trackerd requires a token in the call's metadata: the agent token for agents (device-agent "
                "--token-file), the tuner token for tuners (tunerd --tracker-token-file), or a reader token "
                "(tune-client --tracker-token-file)",
                "the token is not one this trackerd knows"};
  if (options.agent_token.empty() || options.tuner_token.empty()) return gate;
  gate.tokens = {options.agent_token, options.tuner_token};
  gate.tokens.insert(gate.tokens.end(), options.reader_tokens.begin(), options.reader_tokens.end());
  return gate;
}

grpc::Status TrackerService::authorize(const grpc::ServerContext* context, std::string_view rpc) const {
  auto caller = tracker_access().find(rpc);
  if (caller == tracker_access().end())
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, fmt::format("{} has no access rule in trackerd", rpc));
  const BrokerOptions& options = broker_.options();
  std::string_view presented;
  auto found = context->client_metadata().find("authorization");
  if (found != context->client_metadata().end())
    presented = bearer_token(std::string_view(found->second.data(), found->second.size()));
  std::string needs;
  switch (caller->second) {
    case TrackerCaller::kAgent:
      if (options.agent_token.empty() || same_secret(presented, options.agent_token)) return grpc::Status::OK;
      needs = "an agent session needs the agent token (device-agent --token-file)";
      break;
    case TrackerCaller::kTuner:
      if (options.tuner_token.empty() || same_secret(presented, options.tuner_token)) return grpc::Status::OK;
      needs = "Measure needs the tuner token (tunerd --tracker-token-file)";
      break;
    case TrackerCaller::kReader:
      if (options.tuner_token.empty() && options.reader_tokens.empty()) return grpc::Status::OK;
      if (same_secret(presented, options.tuner_token) || any_secret(options.reader_tokens, presented))
        return grpc::Status::OK;
      needs = "listing the farm needs the tuner token or a reader token (tune-client --tracker-token-file)";
      break;
  }
  // Past the gate (or without one): the request was read. Counted, so that what the gate stops
  // before the body can be told from what only the service stopped after it.
  if (options.metrics) options.metrics->refused(std::string(rpc));
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, needs + ", in the call's metadata");
}

grpc::Status TrackerService::ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest* request,
                                         v1::ListDevicesResponse* response) {
  if (auto s = authorize(context, "ListDevices"); !s.ok()) return s;
  if (Status s = validate_key_filter(request->device_key()); !s.ok()) return to_grpc(s);
  *response = broker_.list_devices(request->device_key());
  return grpc::Status::OK;
}

grpc::Status TrackerService::QueueStatus(grpc::ServerContext* context, const v1::QueueStatusRequest* request,
                                         v1::QueueStatusResponse* response) {
  if (auto s = authorize(context, "QueueStatus"); !s.ok()) return s;
  if (Status s = validate_key_filter(request->device_key()); !s.ok()) return to_grpc(s);
  *response = broker_.queue_status(request->device_key());
  return grpc::Status::OK;
}

}  // namespace tunefarm
