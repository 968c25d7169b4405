// Ops by name (prism/op_info.hpp): the descriptors' declarations as plain public structs, output
// inference and one generic call through the dispatcher, for bindings such as the Python module.
#include "prism/op_info.hpp"

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"

namespace prism::ops {
namespace {

op_info info_of(const op_descriptor& d) {
  op_info i;
  i.name = d.name;
  i.family = d.family;
  i.summary = d.summary;
  for (const auto& a : d.inputs) i.inputs.push_back({a.name, a.optional, a.in_place_of});
  for (const auto& a : d.outputs) i.outputs.push_back({a.name, a.optional, a.in_place_of});
  i.variadic_inputs = d.variadic_inputs;
  for (const auto& a : d.attrs) i.attrs.push_back({a.name, a.default_value, a.optional, a.help});
  i.dtypes = d.dtypes;
  i.key_names = d.key_names;
  return i;
}

const op_descriptor& descriptor(int op) {
  const auto& all = op_registry::instance().all();
  if (op < 0 || op >= static_cast<int>(all.size()))
    throw error(errc::invalid_argument, "ops::call",
                "op id " + std::to_string(op) + " is not one of the " + std::to_string(all.size()) +
                    " registered ops (get ids from ops::op_id)");
  return *all[op];
}

op_call make_call(const op_descriptor& d, std::vector<tensor> inputs, attr_map attrs) {
  op_call c;
  c.op = d.name;
  c.inputs = std::move(inputs);
  // Trailing optional inputs may be left out: they are absent (undefined) tensors, so a caller
  // written before an op grew an optional input (attention's key_mask) keeps working.
  if (!d.variadic_inputs) {
    std::size_t n = c.inputs.size();
    while (n < d.inputs.size() && d.inputs[n].optional) ++n;
    if (n == d.inputs.size()) c.inputs.resize(n);
  }
  c.attrs = std::move(attrs);
  return c;
}

}  // namespace

const std::vector<op_info>& op_infos() {
  static const auto* infos = [] {
    auto* v = new std::vector<op_info>;  // never destroyed, like the registry
    for (const op_descriptor* d : op_registry::instance().all()) v->push_back(info_of(*d));
    return v;
  }();
  return *infos;
}

const op_info& describe_op(std::string_view op) {
  return op_infos()[op_id(op)];
}

int op_id(std::string_view op) {
  // The registry's order is op_infos()' order (both sorted by name).
  return dispatch::op_index(op);
}

std::vector<output_spec> infer_outputs(int op, const std::vector<tensor>& inputs, const attr_map& attrs) {
  const op_descriptor& d = descriptor(op);
  op_call c = make_call(d, inputs, attrs);
  std::vector<output_spec> out;
  for (auto& s : infer_output_specs(d, c)) out.push_back({s.shape, s.type});
  return out;
}

std::vector<tensor> call(queue& q, int op, std::vector<tensor> inputs, attr_map attrs,
                         std::vector<tensor> outputs) {
  const op_descriptor& d = descriptor(op);
  op_call c = make_call(d, std::move(inputs), std::move(attrs));
  if (!outputs.empty()) {
    if (outputs.size() != d.outputs.size())
      throw error(errc::invalid_argument, "ops::" + d.name,
                  "got " + std::to_string(outputs.size()) + " outputs; expected none (allocate them) or " +
                      std::to_string(d.outputs.size()));
    // Undefined outputs among given ones: in-place ones are their inputs, others are allocated.
    bool any_undefined = false;
    for (auto& o : outputs) any_undefined = any_undefined || !o.defined();
    if (any_undefined) {
      op_call probe = c;
      auto specs = infer_output_specs(d, probe);
      for (std::size_t i = 0; i < outputs.size() && i < specs.size(); ++i) {
        if (outputs[i].defined()) continue;
        int in = d.outputs[i].in_place_of.empty() ? -1 : d.input_index(d.outputs[i].in_place_of);
        outputs[i] = in >= 0 && in < static_cast<int>(c.inputs.size())
                         ? c.inputs[in]
                         : tensor::empty(q, specs[i].shape, specs[i].type);
      }
    }
    c.outputs = std::move(outputs);
  }
  dispatch::dispatch_call(q, op, c);
  return std::move(c.outputs);
}

}  // namespace prism::ops
