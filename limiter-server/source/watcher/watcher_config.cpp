#include "gpulimit/server/watcher/watcher_config.h"

namespace gpulimit::server {

const char* watch_mode_name(WatchMode mode) {
  switch (mode) {
    case WatchMode::kAuto:
      return "auto";
    case WatchMode::kOn:
      return "on";
    case WatchMode::kOff:
      return "off";
  }
  return "auto";
}

std::optional<WatchMode> parse_watch_mode(std::string_view text) {
  for (const WatchMode mode : {WatchMode::kAuto, WatchMode::kOn, WatchMode::kOff})
    if (text == watch_mode_name(mode)) return mode;
  return std::nullopt;
}

std::optional<UnmanagedAction> parse_unmanaged_action(std::string_view text) {
  for (const UnmanagedAction action :
       {UnmanagedAction::kAllow, UnmanagedAction::kWarn, UnmanagedAction::kKill})
    if (text == unmanaged_action_name(action)) return action;
  return std::nullopt;
}

}  // namespace gpulimit::server
