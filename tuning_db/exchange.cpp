// SPDX-License-Identifier: Apache-2.0
// Fleet sharing: JSON export/import of devices + results, and merging another database file;
// per key the faster row (smaller p50) wins.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "prism/runtime/device.hpp"
#include "prism/tuning_db.hpp"
#include "prism/version.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/database_impl.hpp"

namespace prism::tuning {

using nlohmann::json;

namespace {

constexpr const char* format_name = "prism-tuning";
constexpr int format_version = 1;

json row_object(const result_row& r) {
  return json{{"device", r.device},
              {"op", r.op},
              {"dtype", r.dtype},
              {"shape", r.shape},
              {"backend", r.backend},
              {"config", r.config},
              {"p20_ns", r.p20_ns},
              {"p50_ns", r.p50_ns},
              {"p80_ns", r.p80_ns},
              {"default_ns", r.default_ns},
              {"speedup", r.speedup()},
              {"kernel_hash", r.kernel_hash},
              {"driver_version", r.driver_version},
              {"prism_version", r.prism_version},
              {"tuned_at", r.tuned_at}};
}

[[noreturn]] void import_error(const std::string& message) {
  throw prism::error(errc::config_error, "tuning_db::import_json", message);
}

// The latest tuned_at accepted: 9999-12-31T23:59:59Z.
constexpr std::int64_t max_unix_seconds = 253402300799;

// The JSON type of `v` for messages.
std::string type_of(const json& v) {
  return v.type_name();
}

// Reads a string field of `j`; `where` names it in errors ("results[3]").
std::string string_field(const json& j, const std::string& where, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) import_error(where + ": missing required field '" + key + "'");
    return {};
  }
  if (!j[key].is_string())
    import_error(where + ": field '" + key + "' must be a string, got " + type_of(j[key]) + " " +
                 j[key].dump());
  return j[key].get<std::string>();
}

// Reads one result.
result_row result_from_json(const json& j, const std::string& where) {
  auto str = [&](const char* key, bool required) { return string_field(j, where, key, required); };
  // A time in nanoseconds: a finite number >= 0.
  auto ns = [&](const char* key, bool required) -> double {
    if (!j.contains(key)) {
      if (required) import_error(where + ": missing required field '" + key + "'");
      return 0;
    }
    const json& v = j[key];
    if (!v.is_number())
      import_error(where + ": field '" + key + "' must be a number of nanoseconds, got " + type_of(v) + " " +
                   v.dump());
    double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || d > 1e18)
      import_error(where + ": field '" + key + "' must be in [0, 1e18] nanoseconds, got " + v.dump());
    return d;
  };
  result_row r;
  r.device = str("device", true);
  r.op = str("op", true);
  r.dtype = str("dtype", true);
  try {
    r.shape = shape_key::parse(str("shape", true)).str();
  } catch (const prism::error& e) {
    import_error(where + ": " + e.message());
  }
  r.backend = str("backend", true);
  r.config = str("config", false);
  r.p50_ns = ns("p50_ns", true);
  if (!(r.p50_ns > 0)) import_error(where + ": p50_ns must be > 0");
  r.p20_ns = j.contains("p20_ns") ? ns("p20_ns", false) : r.p50_ns;
  r.p80_ns = j.contains("p80_ns") ? ns("p80_ns", false) : r.p50_ns;
  r.default_ns = ns("default_ns", false);
  r.kernel_hash = str("kernel_hash", false);
  r.driver_version = str("driver_version", false);
  r.prism_version = str("prism_version", false);
  if (j.contains("tuned_at")) {
    const json& v = j["tuned_at"];
    bool ok = false;
    if (v.is_number_unsigned())
      ok = v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max_unix_seconds);
    else if (v.is_number_integer())
      ok = v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= max_unix_seconds;
    if (!ok)
      import_error(where + ": field 'tuned_at' must be an integer number of unix seconds in [0, " +
                   std::to_string(max_unix_seconds) + "], got " + v.dump());
    r.tuned_at = v.get<std::int64_t>();
  }
  return r;
}

}  // namespace

std::string to_json(const result_row& row) {
  return row_object(row).dump();
}

device_record describe(const prism::device& dev) {
  device_record d;
  d.fingerprint = dev.fingerprint().hash;
  d.name = dev.name();
  d.driver_version = dev.driver_version();
  json info{{"fingerprint_text", dev.fingerprint().text},
            {"vendor", dev.vendor()},
            {"vendor_id", dev.vendor_id()},
            {"platform", dev.platform_name()},
            {"platform_version", dev.platform_version()},
            {"opencl_version", dev.opencl_version()},
            {"type", device_type_name(dev.type())},
            {"compute_units", dev.compute_units()},
            {"global_mem_size", dev.global_mem_size()},
            {"local_mem_size", dev.local_mem_size()},
            {"max_work_group_size", dev.max_work_group_size()},
            {"max_clock_mhz", dev.max_clock_mhz()}};
  d.info_json = info.dump();
  return d;
}

std::string database::export_json(const row_filter& filter) {
  auto rows = results(filter);
  auto devs = devices();
  json out{{"format", format_name}, {"version", format_version}, {"prism_version", prism::version()}};
  json jdevs = json::array();
  for (auto& d : devs) {
    bool used = std::any_of(rows.begin(), rows.end(), [&](auto& r) { return r.device == d.fingerprint; });
    if (!used) continue;
    json info = json::parse(d.info_json.empty() ? "{}" : d.info_json, nullptr, false);
    if (info.is_discarded()) info = json::object();
    jdevs.push_back(json{{"fingerprint", d.fingerprint},
                         {"name", d.name},
                         {"driver_version", d.driver_version},
                         {"info", info}});
  }
  json jrows = json::array();
  for (auto& r : rows) jrows.push_back(row_object(r));
  out["devices"] = std::move(jdevs);
  out["results"] = std::move(jrows);
  return out.dump(2) + "\n";
}

merge_report database::import_json(std::string_view text, bool replace) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    import_error("input is not a JSON object (expected a `prism db export` document)");
  if (!doc.contains("format") || !doc["format"].is_string() ||
      doc["format"].get<std::string>() != format_name)
    import_error(std::string("field 'format' must be \"") + format_name +
                 "\" (a `prism db export` document), got " +
                 (doc.contains("format") ? doc["format"].dump() : std::string("nothing")));
  {
    const json* v = doc.contains("version") ? &doc["version"] : nullptr;
    bool ok =
        v &&
        ((v->is_number_unsigned() && v->get<std::uint64_t>() >= 1 &&
          v->get<std::uint64_t>() <= static_cast<std::uint64_t>(format_version)) ||
         (v->is_number_integer() && v->get<std::int64_t>() >= 1 && v->get<std::int64_t>() <= format_version));
    if (!ok)
      import_error("field 'version' must be an integer in [1, " + std::to_string(format_version) +
                   "] (this prism reads versions up to " + std::to_string(format_version) + "), got " +
                   (v ? v->dump() : std::string("nothing")));
  }
  std::vector<device_record> devs;
  if (doc.contains("devices")) {
    if (!doc["devices"].is_array())
      import_error("'devices' must be an array, got " + type_of(doc["devices"]));
    std::size_t i = 0;
    for (auto& d : doc["devices"]) {
      std::string where = "devices[" + std::to_string(i++) + "]";
      if (!d.is_object()) import_error(where + " must be an object, got " + type_of(d));
      device_record rec;
      rec.fingerprint = string_field(d, where, "fingerprint", true);
      rec.name = string_field(d, where, "name", false);
      rec.driver_version = string_field(d, where, "driver_version", false);
      if (d.contains("info") && !d["info"].is_object())
        import_error(where + ": field 'info' must be an object, got " + type_of(d["info"]));
      rec.info_json = d.contains("info") ? d["info"].dump() : "{}";
      devs.push_back(std::move(rec));
    }
  }
  std::vector<result_row> rows;
  if (!doc.contains("results") || !doc["results"].is_array())
    import_error("'results' must be an array, got " +
                 (doc.contains("results") ? type_of(doc["results"]) : std::string("nothing")));
  std::size_t i = 0;
  for (auto& j : doc["results"]) {
    std::string where = "results[" + std::to_string(i++) + "]";
    if (!j.is_object()) import_error(where + " must be an object, got " + type_of(j));
    rows.push_back(result_from_json(j, where));
  }

  row_bundle bundle;
  bundle.devices = std::move(devs);
  bundle.results = std::move(rows);
  std::lock_guard lock(impl_->mu);
  auto report = impl_->st->store_rows(bundle, replace);
  ++impl_->writes;
  impl_->forget_all();
  return report;
}

merge_report database::merge_from(const std::string& other_location, const row_filter& filter) {
  if (auto why = location_error(other_location); !why.empty())
    throw prism::error(errc::invalid_argument, "tuning_db::merge_from", why);
  std::error_code ec;
  if (!is_server_location(other_location) && !std::filesystem::exists(other_location, ec))
    throw prism::error(errc::not_found, "tuning_db::merge_from", "no database file at " + other_location);
  auto other = open_store(other_location, access::read_only);
  if (!other->refusal().empty() || !other->is_open())
    throw prism::error(errc::database_error, "tuning_db::merge_from",
                       other->location() + " could not be opened as a prism tuning database: " +
                           (other->refusal().empty() ? other->read_only_reason() : other->refusal()));
  row_bundle bundle;
  bundle.results = other->results(filter);
  bundle.candidates = other->all_candidates(filter);
  // The device records of the rows taken along.
  std::set<std::string> used;
  for (auto& r : bundle.results) used.insert(r.device);
  for (auto& d : other->devices())
    if (used.count(d.fingerprint)) bundle.devices.push_back(d);
  std::lock_guard lock(impl_->mu);
  auto report = impl_->st->store_rows(bundle, false);
  ++impl_->writes;
  impl_->forget_all();
  return report;
}

}  // namespace prism::tuning
