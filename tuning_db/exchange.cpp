// Fleet sharing: JSON export/import of devices + results, and merging another database file;
// per key the faster row (smaller p50) wins.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

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

json to_json(const result_row& r) {
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
              {"kernel_hash", r.kernel_hash},
              {"driver_version", r.driver_version},
              {"prism_version", r.prism_version},
              {"tuned_at", r.tuned_at}};
}

// Reads one result; `where` names it in errors ("results[3]").
result_row result_from_json(const json& j, const std::string& where) {
  auto str = [&](const char* key, bool required) -> std::string {
    if (!j.contains(key)) {
      if (required)
        throw prism::error(errc::config_error, "tuning_db::import_json",
                           where + ": missing required field '" + key + "'");
      return {};
    }
    if (!j[key].is_string())
      throw prism::error(errc::config_error, "tuning_db::import_json",
                         where + ": field '" + key + "' must be a string");
    return j[key].get<std::string>();
  };
  auto num = [&](const char* key, bool required) -> double {
    if (!j.contains(key)) {
      if (required)
        throw prism::error(errc::config_error, "tuning_db::import_json",
                           where + ": missing required field '" + key + "'");
      return 0;
    }
    if (!j[key].is_number())
      throw prism::error(errc::config_error, "tuning_db::import_json",
                         where + ": field '" + key + "' must be a number");
    return j[key].get<double>();
  };
  result_row r;
  r.device = str("device", true);
  r.op = str("op", true);
  r.dtype = str("dtype", true);
  try {
    r.shape = shape_key::parse(str("shape", true)).str();
  } catch (const prism::error& e) {
    throw prism::error(errc::config_error, "tuning_db::import_json", where + ": " + e.message());
  }
  r.backend = str("backend", true);
  r.config = str("config", false);
  r.p50_ns = num("p50_ns", true);
  if (!(r.p50_ns > 0))
    throw prism::error(errc::config_error, "tuning_db::import_json", where + ": p50_ns must be > 0");
  r.p20_ns = j.contains("p20_ns") ? num("p20_ns", false) : r.p50_ns;
  r.p80_ns = j.contains("p80_ns") ? num("p80_ns", false) : r.p50_ns;
  r.default_ns = num("default_ns", false);
  r.kernel_hash = str("kernel_hash", false);
  r.driver_version = str("driver_version", false);
  r.prism_version = str("prism_version", false);
  r.tuned_at = static_cast<std::int64_t>(num("tuned_at", false));
  return r;
}

}  // namespace

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
  for (auto& r : rows) jrows.push_back(to_json(r));
  out["devices"] = std::move(jdevs);
  out["results"] = std::move(jrows);
  return out.dump(2) + "\n";
}

merge_report database::import_json(std::string_view text, bool replace) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw prism::error(errc::config_error, "tuning_db::import_json",
                       "input is not a JSON object (expected a `prism db export` document)");
  if (doc.value("format", std::string()) != format_name)
    throw prism::error(
        errc::config_error, "tuning_db::import_json",
        std::string("field 'format' must be \"") + format_name + "\" (a `prism db export` document)");
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() > format_version)
    throw prism::error(
        errc::config_error, "tuning_db::import_json",
        "unsupported 'version' (this prism reads version <= " + std::to_string(format_version) + ")");
  std::vector<device_record> devs;
  if (doc.contains("devices")) {
    if (!doc["devices"].is_array())
      throw prism::error(errc::config_error, "tuning_db::import_json", "'devices' must be an array");
    std::size_t i = 0;
    for (auto& d : doc["devices"]) {
      std::string where = "devices[" + std::to_string(i++) + "]";
      if (!d.is_object() || !d.contains("fingerprint") || !d["fingerprint"].is_string())
        throw prism::error(errc::config_error, "tuning_db::import_json",
                           where + ": needs a string 'fingerprint'");
      device_record rec;
      rec.fingerprint = d["fingerprint"].get<std::string>();
      rec.name = d.value("name", std::string());
      rec.driver_version = d.value("driver_version", std::string());
      rec.info_json = d.contains("info") ? d["info"].dump() : "{}";
      devs.push_back(std::move(rec));
    }
  }
  std::vector<result_row> rows;
  if (!doc.contains("results") || !doc["results"].is_array())
    throw prism::error(errc::config_error, "tuning_db::import_json", "'results' must be an array");
  std::size_t i = 0;
  for (auto& j : doc["results"]) {
    std::string where = "results[" + std::to_string(i++) + "]";
    if (!j.is_object())
      throw prism::error(errc::config_error, "tuning_db::import_json", where + " must be an object");
    rows.push_back(result_from_json(j, where));
  }

  std::lock_guard lock(impl_->mu);
  impl_->require_writable("tuning_db::import_json");
  merge_report report;
  impl_->guarded("tuning_db::import_json", [&] {
    impl_->conn->write_transaction([&] {
      report = merge_report{};
      for (auto& d : devs) {
        impl_->store_device(d);
        ++report.devices;
      }
      for (auto& r : rows) impl_->store_if_faster(r, replace, &report);
    });
    ++impl_->writes;
  });
  impl_->groups.clear();
  impl_->memo.clear();
  return report;
}

merge_report database::merge_from(const std::string& other_path) {
  std::error_code ec;
  if (!std::filesystem::exists(other_path, ec))
    throw prism::error(errc::not_found, "tuning_db::merge_from", "no database file at " + other_path);
  database other(other_path, access::read_only);
  if (!other.is_open())
    throw prism::error(
        errc::database_error, "tuning_db::merge_from",
        other_path + " could not be opened as a prism tuning database: " + other.read_only_reason());
  return import_json(other.export_json(), false);
}

}  // namespace prism::tuning
