// A process-wide route: how this process has an act done that it gave up the privilege for
// (its root broker's request), installed once at start and read by many threads. A reader
// keeps the route it got while another is installed. Empty until Set.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace space {

template <typename T>
class Route {
 public:
  constexpr Route() = default;
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;

  // Replaces the route; null removes it.
  void Set(std::shared_ptr<const T> route) {
    std::lock_guard<std::mutex> lock(mu_);
    route_ = std::move(route);
  }
  // The route now (null when none).
  std::shared_ptr<const T> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return route_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> route_;  // GUARDED_BY(mu_)
};

}  // namespace space
