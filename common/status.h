// Errors as values. A Status carries a code and a message that a user can act on; StatusOr<T>
// carries either a value or a non-OK Status. Codes mirror gRPC's canonical codes so that services
// can hand a library's Status straight back to a caller.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tunefarm {

enum class StatusCode {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: workload 'foo': unknown operator" — for logs and command lines.
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }
inline Status not_found(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status internal_error(std::string message) { return {StatusCode::kInternal, std::move(message)}; }
inline Status unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }
inline Status failed_precondition(std::string message) { return {StatusCode::kFailedPrecondition, std::move(message)}; }
inline Status unimplemented(std::string message) { return {StatusCode::kUnimplemented, std::move(message)}; }
inline Status deadline_exceeded(std::string message) { return {StatusCode::kDeadlineExceeded, std::move(message)}; }
inline Status resource_exhausted(std::string message) { return {StatusCode::kResourceExhausted, std::move(message)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok() && "StatusOr needs a non-OK status"); }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tunefarm

#define TF_CONCAT_INNER(a, b) a##b
#define TF_CONCAT(a, b) TF_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define TF_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::tunefarm::Status tf_status_ = (expr);       \
    if (!tf_status_.ok()) return tf_status_;      \
  } while (0)

// `TF_ASSIGN_OR_RETURN(auto x, f())` binds the value of a StatusOr or returns its Status.
#define TF_ASSIGN_OR_RETURN(lhs, expr) TF_ASSIGN_OR_RETURN_IMPL(TF_CONCAT(tf_statusor_, __LINE__), lhs, expr)
#define TF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
