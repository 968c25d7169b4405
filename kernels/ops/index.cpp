// SPDX-License-Identifier: Apache-2.0
// embedding: rows of a [V, D] weight gathered by i32/i64 indices of any shape. Out-of-range
// indices are caught on the device (flag + first offending position) and raised as prism::error
// after the kernel (so the call waits for the kernel).
#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

const char* raw_type(dtype t) {
  switch (dtype_size(t)) {
    case 1:
      return "uchar";
    case 2:
      return "ushort";
    case 4:
      return "uint";
    default:
      return "ulong";
  }
}

op_descriptor make_embedding() {
  op_descriptor d;
  d.name = "embedding";
  d.family = "index";
  d.summary = "out[..., :] = weight[indices[...], :]; an index outside [0, V) raises an error";
  d.inputs = {{"weight"}, {"indices"}};
  d.outputs = {{"out"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = [](const op_call& c) {
    require_rank(c, c.inputs[0], "weight", 2, 2);
    require_dtype(c, c.inputs[1], "indices", {dtype::i32, dtype::i64});
    if (c.inputs[1].dim() + 1 > max_tensor_dims)
      fail(c,
           "'indices' has rank " + std::to_string(c.inputs[1].dim()) + "; at most 7 (the output adds a dim)");
  };
  d.infer_outputs = [](const op_call& c) {
    dims s = c.inputs[1].shape();
    s.push_back(c.inputs[0].size(1));
    return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
  };
  d.key_names = {"n", "v", "d"};
  d.key = [](const op_call& c) {
    return shape_key{{"n", c.inputs[1].numel()}, {"v", c.inputs[0].size(0)}, {"d", c.inputs[0].size(1)}};
  };
  d.flops = [](const op_call&) { return 0.0; };
  d.bytes = [](const op_call& c) {
    return 2.0 * static_cast<double>(c.outputs[0].nbytes()) + static_cast<double>(c.inputs[1].nbytes());
  };
  d.reference = [](host_call& h) {
    const auto& w = h.inputs[0];
    const auto& idx = h.inputs[1];
    const std::int64_t V = w.shape[0], D = w.shape[1];
    auto& out = h.outputs[0];
    for (std::int64_t i = 0; i < idx.numel(); ++i) {
      auto v = static_cast<std::int64_t>(idx.values[i]);
      for (std::int64_t j = 0; j < D; ++j)
        out.values[i * D + j] = (v >= 0 && v < V) ? w.values[v * D + j] : 0.0;
    }
  };
  d.tol = [](const op_call&, int) { return tolerance{}; };
  config_schema s;
  s.params = {{"wg", 256, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, "work-group size"},
              {"vec", 4, {2, 4, 8, 16}, "variant 1: vector width of the row copy"},
              {"variant",
               0,
               {0, 1, 2},
               "0: one work-item per output element; 1: one work-item per index (row copy); 2: variant 1 "
               "with non-temporal row stores (PoCL CPUs: no read-for-ownership)"}};
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.embedding";
  impl.kernel_file = "embedding.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    tensor w = c.inputs[0].contiguous(q);
    tensor idx = c.inputs[1].contiguous(q);
    tensor out = c.outputs[0];
    const std::int64_t n = idx.numel(), V = w.size(0), D = w.size(1);
    if (n * D == 0) return event{};
    const std::int64_t wg = cfg.at("wg");
    std::string opts = std::string("-DRAW_T=") + raw_type(w.type()) + " " + dtype_defines("I", idx.type()) +
                       "-DVEC=" + std::to_string(cfg.at("vec")) +
                       " -DNT=" + (cfg.at("variant") == 2 ? "1" : "0");
    const bool rows = cfg.at("variant") >= 1;
    kernel k =
        build_kernel(q.get_context(), "embedding.cl", src, opts, rows ? "embedding_rows" : "embedding");
    const std::int64_t zeros[4] = {0, 0, 0, 0};
    buffer<std::int64_t> err(q.get_context(), zeros, 4);
    event e = q.submit([&](handler& h) {
      accessor<std::byte> I(idx.storage(), h, read_only, idx.byte_extent());
      accessor<std::byte> W(w.storage(), h, read_only, w.byte_extent());
      accessor<std::byte> O(out.storage(), h, access_mode::write, out.byte_extent());
      accessor<std::int64_t> E(err, h, read_write);
      h.parallel_for(nd_range(range<1>(round_up(static_cast<std::size_t>(rows ? n : n * D),
                                                static_cast<std::size_t>(wg))),
                              range<1>(static_cast<std::size_t>(wg))),
                     k, n, D, V, I, idx.offset(), W, w.offset(), O, out.offset(), E);
    });
    // Inside a graph recording nothing runs yet and a host read cannot be recorded: replays
    // zero the rows of out-of-range indices without the error (docs/runtime.md, "Graphs").
    if (q.is_recording()) return e;
    auto flag = err.read();
    if (flag[0] != 0) {
      dims pos;
      std::int64_t rem = flag[1];
      std::vector<std::int64_t> co(idx.dim());
      for (int k2 = idx.dim() - 1; k2 >= 0; --k2) {
        co[k2] = rem % idx.shape()[k2];
        rem /= idx.shape()[k2];
      }
      for (auto v : co) pos.push_back(v);
      throw error(errc::invalid_argument, "ops::embedding",
                  "indices" + pos.str() + " = " + std::to_string(flag[2]) +
                      " is out of range for 'weight' with " + std::to_string(V) + " rows; valid: [0, " +
                      std::to_string(V - 1) + "] (rows of out-of-range indices were zeroed)");
    }
    return e;
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::int64_t V, std::int64_t D, dims ishape, dtype it,
                 bool bad) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = "embedding";
    tensor w = random_tensor(q, {V, D}, o.type, rng, -2, 2, o.small_integers);
    std::vector<double> iv(static_cast<std::size_t>(ishape.product()));
    for (auto& v : iv)
      v = static_cast<double>(rng() % static_cast<std::uint64_t>(std::max<std::int64_t>(V, 1)));
    if (bad && !iv.empty()) iv[iv.size() / 2] = static_cast<double>(V + 3);
    std::vector<std::byte> ib(iv.size() * dtype_size(it));
    encode_values(it, iv.data(), iv.size(), ib.data());
    c.inputs = {w, tensor::from_host(q, ib.data(), ishape, it)};
    allocate_outputs(q, op_registry::instance().get("embedding"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, k.at("v"), k.at("d"), {k.at("n")}, dtype::i64, false);
  };
  d.config_test_shapes = {"n=1,v=1,d=1", "n=37,v=1000,d=259"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::int64_t V, std::int64_t D, dims s, dtype it) {
      return [=](queue& q, const sample_options& o) { return make(q, o, V, D, s, it, false); };
    };
    return std::vector<test_case>{{"empty", tc(10, 8, {0}, dtype::i64)},
                                  {"one", tc(1, 1, {1}, dtype::i32)},
                                  {"odd.i32", tc(1000, 259, {3, 37}, dtype::i32)},
                                  {"odd.i64", tc(1000, 259, {37}, dtype::i64)},
                                  {"large", tc(8000, 512, {512}, dtype::i64)}};
  };
  return d;
}

}  // namespace

void register_index_ops(op_registry& r) {
  r.add(make_embedding());
}

}  // namespace prism
