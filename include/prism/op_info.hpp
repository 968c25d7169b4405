// Ops by name: what the op descriptors declare (inputs, outputs, attributes with their types and
// defaults, dtypes), output inference, and one generic call through the dispatcher. For bindings
// and tools that expose every op without listing them (the Python module, docs/python.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "prism/dtype.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/tensor.hpp"

namespace prism::ops {

/// An attribute value: integer, real, flag, word or integer list, as the descriptors declare.
using attr_value = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>>;
using attr_map = std::map<std::string, attr_value, std::less<>>;

/// One declared attribute.
struct attr_info {
  std::string name;
  attr_value default_value;  ///< its type is the attribute's type
  /// Absence means something of its own (said in `help`): leave it out rather than pass the
  /// default.
  bool optional = false;
  std::string help;
};

/// One declared input or output.
struct arg_info {
  std::string name;
  bool optional = false;    ///< inputs: may be an undefined tensor
  std::string in_place_of;  ///< outputs: the input it updates in place ("" for none)
};

/// What an op declares.
struct op_info {
  std::string name;
  std::string family;
  std::string summary;
  std::vector<arg_info> inputs;
  std::vector<arg_info> outputs;
  bool variadic_inputs = false;  ///< the last input takes one or more tensors (cat)
  std::vector<attr_info> attrs;
  std::vector<dtype> dtypes;           ///< the dtypes of the op's main tensors
  std::vector<std::string> key_names;  ///< the components of its shape key
};

/// Every op, sorted by name. Thread safety: safe (built once).
const std::vector<op_info>& op_infos();
/// One op; throws errc::not_found listing the registered names (closest first).
const op_info& describe_op(std::string_view op);

/// A stable index of `op` for call(): no name lookup on the warm path. Throws like describe_op.
int op_id(std::string_view op);

/// The shape and dtype of one output.
struct output_spec {
  dims shape;
  dtype type = dtype::f32;
};
/// The outputs `op` would produce for these inputs and attributes (defaults filled in), after
/// the op's argument checks. Throws errc::invalid_argument like the op itself; enqueues nothing.
std::vector<output_spec> infer_outputs(int op, const std::vector<tensor>& inputs, const attr_map& attrs);

/// Runs `op` through the dispatcher, as its function in prism/ops.hpp does. `inputs` follow the
/// declared order (a variadic last input is given as its tensors, one after another; an absent
/// optional input is an undefined tensor, and trailing optional ones may be left out); `outputs` is empty (every output allocated) or one
/// tensor per declared output (undefined = allocate; an in-place output must be its input).
/// Returns the outputs. Throws what the op throws: errc::invalid_argument naming the op, the
/// argument or attribute, what was given and what is valid.
/// Thread safety: as every op.
std::vector<tensor> call(queue& q, int op, std::vector<tensor> inputs, attr_map attrs = {},
                         std::vector<tensor> outputs = {});

}  // namespace prism::ops
