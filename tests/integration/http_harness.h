// HTTP for integration tests: GET (and other methods) against a daemon's metrics or dashboard
// endpoint, and the Prometheus text format read into series.
#pragma once

#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <httplib.h>

namespace tunefarm::testing {

struct HttpAnswer {
  int status = 0;  // 0: no answer (connection refused, timeout).
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  httplib::Headers headers;
};

inline HttpAnswer http_request(const std::string& method, int port, const std::string& path,
                               const httplib::Headers& headers = {}, const std::string& body = {}) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(20));
  httplib::Result result = method == "GET"    ? client.Get(path, headers)
                           : method == "POST" ? client.Post(path, headers, body, "application/json")
                           : method == "PUT"  ? client.Put(path, headers, body, "application/json")
                                              : client.Delete(path, headers);
  HttpAnswer out;
  if (!result) return out;
  out.status = result->status;
  out.body = result->body;
  out.headers = result->headers;
  return out;
}

inline HttpAnswer http_get(int port, const std::string& path, const std::string& bearer = {}) {
  httplib::Headers headers;
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  return http_request("GET", port, path, headers);
}

// Prometheus' text format as series -> value; a series is written as the exposition writes it,
// name{label="value",...} with the labels in name order (prometheus-cpp sorts them).
class Scrape {
 public:
  explicit Scrape(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      size_t space = line.rfind(' ');
      if (space == std::string::npos) continue;
      series_[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
  }
  // The value of a series, 0 when it is absent (a counter never incremented).
  double get(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    auto it = series_.find(key(name, labels));
    return it == series_.end() ? 0 : it->second;
  }
  bool has(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    return series_.count(key(name, labels)) > 0;
  }
  // The sum over every series of `name` whose labels include `labels`.
  double sum(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    double total = 0;
    for (const auto& [series, value] : series_) {
      if (series != name && !series.starts_with(name + "{")) continue;
      bool match = true;
      for (const auto& [k, v] : labels) match &= series.find(fmt::format("{}=\"{}\"", k, v)) != std::string::npos;
      if (match) total += value;
    }
    return total;
  }
  size_t size() const { return series_.size(); }

 private:
  static std::string key(const std::string& name, const std::map<std::string, std::string>& labels) {
    if (labels.empty()) return name;
    std::string out = name + "{";
    bool first = true;
    for (const auto& [k, v] : labels) {
      out += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, v);
      first = false;
    }
    return out + "}";
  }
  std::map<std::string, double> series_;
};

// Scrapes GET /metrics on `port`; an empty scrape when it does not answer 200.
inline Scrape scrape(int port, const std::string& bearer = {}) {
  HttpAnswer a = http_get(port, "/metrics", bearer);
  return Scrape(a.status == 200 ? a.body : std::string());
}

}  // namespace tunefarm::testing
