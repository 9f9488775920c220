// gpulimitd's Prometheus metrics: the text exposition format (version
// 0.0.4) of a status snapshot. Series are labelled as dcgm-exporter labels
// its own, so that both join on a GPU:
//   gpu     the device's index in gpulimitd's board (not the NVML index:
//           gpulimitd does not load NVML; join on UUID across exporters)
//   UUID    "GPU-...", spelled and cased as dcgm-exporter spells it
//   tenant  the tenant id, user  its owner's login name
//
// Families (base units; counters end in _total):
//   gpulimit_build_info{version,mode}                   gauge, always 1
//   gpulimit_uptime_seconds                             gauge
//   gpulimit_tenants, gpulimit_processes                gauge, attached now
//   gpulimit_tenant_processes{tenant,user}              gauge
//   gpulimit_token_waiting_tenants{gpu,UUID}            gauge
//   per {gpu,UUID,tenant,user}:
//   gpulimit_memory_used_bytes, gpulimit_memory_cap_bytes   gauge (capped devices only)
//   gpulimit_gpu_seconds_total                          counter, token held
//   gpulimit_token_wait_seconds                         histogram, Want to grant
//   gpulimit_token_grants_total, gpulimit_token_revokes_total,
//   gpulimit_token_overruns_total                       counter
//   gpulimit_token_overrun_seconds_total                counter, forced release to late drain
//   gpulimit_oom_denials_total                          counter (capped devices only)
//   gpulimit_share_target, gpulimit_share_achieved      gauge, 0 to 1
// Per-tenant series go when the tenant goes (its last process exits).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/server/metrics/status_report.h"

namespace gpulimit::server {

// The exposition's content type, for the HTTP reply.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// The whole exposition of `status`; `version` is gpulimitd's.
std::string render_metrics(const StatusSnapshot& snapshot, std::string_view version);

// The name of every family render_metrics() writes (histograms without
// their _bucket, _sum and _count suffixes).
std::vector<std::string> metric_family_names();

// A label value as the exposition quotes it: \ " and newline escaped.
std::string escape_label_value(std::string_view value);

}  // namespace gpulimit::server
