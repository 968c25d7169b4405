// Candidate generation for pretune. CLBlast sets follow the constraints of CLBlast's own tuners
// (xgemm / xgemm_direct): tile sizes divisible by thread and vector sizes, local memory and
// work-group size within the device's limits.
#include "dispatch/tuner/candidates.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/dispatcher.hpp"

namespace prism::dispatch::tuner {
namespace {

bool allowed(const device& dev, const candidate_options& o, const std::string& backend) {
  const bool listed = std::find(o.backends.begin(), o.backends.end(), backend) != o.backends.end();
  // host is blocking: inside a model each call drains the queue first, which timing the op alone
  // does not see. On a GPU that drain idles the device (and host needs transfers); on a CPU
  // device host maps buffers without copies and runs on the same cores, so what a drain costs is
  // the lost enqueue-ahead: microseconds, negligible against a call of a millisecond or more.
  // So without a list, host is a candidate on CPU devices for calls whose default takes >= 1 ms
  // (docs/tuning.md, "When host is a candidate").
  if (backend == "host")
    return listed || (o.backends.empty() && dev.is_cpu() && o.default_ns >= host_min_default_ns);
  return o.backends.empty() || listed;
}

template <class T>
std::vector<T> pick(std::vector<T> all, const candidate_options& o, std::uint64_t salt) {
  if (o.pick == strategy::exhaustive || o.max_per_backend == 0 || all.size() <= o.max_per_backend) return all;
  // Keep the first entry (the file's or library's own default comes first), sample the rest.
  std::vector<T> rest(all.begin() + 1, all.end());
  std::mt19937_64 rng(o.seed ^ salt);
  std::shuffle(rest.begin(), rest.end(), rng);
  rest.resize(o.max_per_backend - 1);
  // Back into file order so that runs are readable.
  std::vector<T> out{all.front()};
  for (auto& a : all)
    if (std::find(rest.begin(), rest.end(), a) != rest.end()) out.push_back(a);
  return out;
}

}  // namespace

opencl_space opencl_configs(const op_descriptor& d, const std::string& vendor, const candidate_options& o) {
  auto space = load_tune_space(d, vendor);
  opencl_space out;
  out.vendor = space.vendor;
  std::vector<kernel_config> base{space.defaults};
  for (const auto& c : space.configs)
    if (std::find(base.begin(), base.end(), c) == base.end()) base.push_back(c);
  for (const auto& c : base) out.explicit_configs.push_back(c.str());

  // The parameters the vendor file actually varies are the ones that matter on this device;
  // step each of them through its allowed values around every explicit config.
  std::vector<const config_param*> varying;
  for (const auto& p : d.config.params) {
    bool differs = false;
    for (const auto& c : base)
      differs = differs || c.get(p.name, p.default_value) != base[0].get(p.name, p.default_value);
    if (differs) varying.push_back(&p);
  }
  std::vector<std::string> generated;
  std::set<std::string> seen(out.explicit_configs.begin(), out.explicit_configs.end());
  for (const auto& b : base)
    for (const auto* p : varying) {
      std::vector<std::int64_t> values = p->allowed;
      if (values.empty()) {
        const std::int64_t v = b.get(p->name, p->default_value);
        values = {std::max<std::int64_t>(1, v / 2), v * 2};
      }
      for (auto v : values) {
        kernel_config c = b;
        c.set(p->name, v);
        if (d.config.validate(c)) continue;
        std::string text = d.config.complete(c).str();
        if (seen.insert(text).second) generated.push_back(text);
      }
    }
  if (o.pick == strategy::random && o.max_per_backend > 0 && generated.size() > o.max_per_backend) {
    std::mt19937_64 rng(o.seed ^ 0x67656e6572617465ULL);
    std::vector<std::size_t> idx(generated.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(o.max_per_backend);
    std::sort(idx.begin(), idx.end());
    std::vector<std::string> kept;
    for (auto i : idx) kept.push_back(generated[i]);
    generated = std::move(kept);
  }
  out.generated = std::move(generated);
  return out;
}

std::vector<std::string> clblast_parameter_sets(const device& dev, dtype type) {
  const std::size_t elem = type == dtype::f16 ? 2 : 4;
  const std::uint64_t local_mem = dev.local_mem_size();
  const std::size_t max_wg = dev.max_work_group_size();
  std::vector<std::string> out;
  // Xgemm (indirect: pads/transposes into tiles first). Thread tile MDIMC x NDIMC, each thread
  // computing (MWG/MDIMC) x (NWG/NDIMC) values with vector widths VWM/VWN.
  for (int mwg : {32, 64, 128})
    for (int nwg : {32, 64, 128})
      for (int kwg : {16, 32})
        for (int mdimc : {8, 16})
          for (int ndimc : {8, 16})
            for (int vwm : {2, 4})
              for (int vwn : {2, 4})
                for (int s : {0, 1}) {
                  const int mdima = mdimc, ndimb = ndimc, kwi = 2;
                  if (mwg % (mdimc * vwm) || nwg % (ndimc * vwn) || mwg % (mdima * vwm) ||
                      nwg % (ndimb * vwn))
                    continue;
                  if (kwg % ((mdimc * ndimc) / mdima) || kwg % ((mdimc * ndimc) / ndimb) || kwg % kwi)
                    continue;
                  if (static_cast<std::size_t>(mdimc * ndimc) > max_wg) continue;
                  if (static_cast<std::uint64_t>(s * kwg * (mwg + nwg)) * elem > local_mem) continue;
                  // Keep per-thread register tiles moderate (<= 64 accumulators).
                  if ((mwg / mdimc) * (nwg / ndimc) > 64) continue;
                  out.push_back(
                      fmt::format("GEMMK=0,KREG=1,KWG={},KWI={},MDIMA={},MDIMC={},MWG={},NDIMB={},NDIMC={},"
                                  "NWG={},SA={},SB={},"
                                  "STRM=0,STRN=0,VWM={},VWN={},XGEMM_MIN_INDIRECT_SIZE=1",
                                  kwg, kwi, mdima, mdimc, mwg, ndimb, ndimc, nwg, s, s, vwm, vwn));
                }
  // XgemmDirect (no helper kernels; good for small or skinny problems).
  for (int wgd : {8, 16, 32, 64})
    for (int mdimcd : {8, 16})
      for (int ndimcd : {8, 16})
        for (int vwmd : {1, 2, 4})
          for (int vwnd : {1, 2, 4}) {
            const int mdimad = mdimcd, ndimbd = ndimcd, kwid = 2;
            if (wgd % (mdimcd * vwmd) || wgd % (ndimcd * vwnd) || wgd % (mdimad * vwmd) ||
                wgd % (ndimbd * vwnd))
              continue;
            if (wgd % ((mdimcd * ndimcd) / mdimad) || wgd % ((mdimcd * ndimcd) / ndimbd) || wgd % kwid)
              continue;
            if (static_cast<std::size_t>(mdimcd * ndimcd) > max_wg) continue;
            if (static_cast<std::uint64_t>(2 * wgd * (wgd + 1)) * elem > local_mem) continue;
            out.push_back(fmt::format(
                "KWID={},MDIMAD={},MDIMCD={},NDIMBD={},NDIMCD={},PADA=1,PADB=1,VWMD={},VWND={},WGD={},"
                "XGEMM_MIN_INDIRECT_SIZE=100000",
                kwid, mdimad, mdimcd, ndimbd, ndimcd, vwmd, vwnd, wgd));
          }
  return out;
}

std::vector<candidate> make_candidates(const device& dev, const op_descriptor& d, dtype type,
                                       const std::string& vendor, const candidate_options& o) {
  std::vector<candidate> out;
  std::set<std::pair<std::string, std::string>> seen;
  auto add = [&](const std::string& backend, const std::string& config, const std::string& origin) {
    if (seen.emplace(backend, config).second) out.push_back(candidate{backend, config, origin});
  };
  for (const auto& backend : op_backends(d)) {
    if (!allowed(dev, o, backend)) continue;
    if (backend == "opencl") {
      if (d.config.params.empty()) {
        add("opencl", "", "opencl (no tunable parameters)");
        continue;
      }
      auto configs = opencl_configs(d, vendor, o);
      for (const auto& c : configs.explicit_configs)
        add("opencl", c, "vendors/" + configs.vendor + "/tune_configs.yaml");
      for (const auto& c : configs.generated) add("opencl", c, "generated around tune_configs.yaml");
    } else if (backend == "clblast") {
      if (type != dtype::f32 && type != dtype::f16) continue;
      std::vector<std::string> sets{""};  // CLBlast's own parameters for the device
      for (auto& s : clblast_parameter_sets(dev, type)) sets.push_back(s);
      // CLBlast's kernels are written for GPUs: on a CPU device a few sets are enough to know.
      candidate_options co = o;
      if (dev.is_cpu() && co.max_per_backend > 0)
        co.max_per_backend = std::max<std::size_t>(2, co.max_per_backend / 4);
      for (const auto& s : pick(sets, co, 0x636c626c6173ULL))
        add("clblast", s,
            s.empty() ? "clblast defaults"
                      : (s.find("WGD=") != std::string::npos ? "clblast XgemmDirect" : "clblast Xgemm"));
    } else {
      add(backend, "", backend);
    }
  }
  return out;
}

}  // namespace prism::dispatch::tuner
