// SPDX-License-Identifier: Apache-2.0
// The op descriptor framework: one `op_descriptor` per op (argument rules, dtypes, shape key,
// FLOP/byte counts, host reference, tolerance, config schema, OpenCL implementations), the
// generic call representation `op_call`, and the process-wide registry every layer reads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kernels/gemm_lowering.hpp"
#include "prism/dtype.hpp"
#include "prism/error.hpp"
#include "prism/runtime/device.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/shape_key.hpp"
#include "prism/tensor.hpp"

namespace prism {

// ---------------------------------------------------------------------------------------------
// Attributes and calls

/// An attribute value: integer, real, flag, word or integer list (dims).
using attr_value = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>>;
using attr_map = std::map<std::string, attr_value, std::less<>>;

/// Text form of one value: 3, 1.5 (reals always carry '.' or 'e'), true, neox (words are
/// [A-Za-z_][A-Za-z0-9_.-]*, others are "quoted"), [0,2].
std::string format_attr(const attr_value& v);
/// "alpha=1.0;dims=[0,2];mode=neox" (sorted by name); parse_attrs reads it back exactly.
/// Throws errc::invalid_argument naming the offending text.
std::string format_attrs(const attr_map& attrs);
attr_map parse_attrs(std::string_view text);

/// One call of an op, independent of any backend: what the dispatcher routes, `prism run`
/// builds from the command line, the tuner times and the dispatch log replays.
/// Inputs and outputs follow the descriptor's order; optional inputs may be undefined tensors.
/// An op that updates a tensor in place lists it both as input and output (same storage).
struct op_call {
  std::string op;
  std::vector<tensor> inputs;
  std::vector<tensor> outputs;
  attr_map attrs;

  bool has(std::string_view name) const { return attrs.find(name) != attrs.end(); }
  /// Typed getters. They take no fallback: defaults come from the descriptor's attr_spec list,
  /// filled in by complete_attrs() before kernels, references and shape rules read a call.
  /// Throw errc::invalid_argument naming op and attr when it is missing or of another type
  /// (get_f64 also accepts an integer).
  std::int64_t get_int(std::string_view name) const;
  double get_f64(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  std::string get_str(std::string_view name) const;
  std::vector<std::int64_t> get_ints(std::string_view name) const;
  op_call& set(std::string name, attr_value v) {
    attrs[std::move(name)] = std::move(v);
    return *this;
  }
};

/// Shape and dtype of one output, as the op's shape rule infers it.
struct tensor_spec {
  dims shape;
  dtype type = dtype::f32;
};

// ---------------------------------------------------------------------------------------------
// Kernel configs: ordered named integers with a parseable text form (shape keys are
// prism::shape_key, prism/shape_key.hpp).

class named_ints {
 public:
  named_ints() = default;
  named_ints(std::initializer_list<std::pair<std::string, std::int64_t>> items) : items_(items) {}

  const std::vector<std::pair<std::string, std::int64_t>>& items() const noexcept { return items_; }
  bool empty() const noexcept { return items_.empty(); }
  std::optional<std::int64_t> find(std::string_view name) const;
  /// Throws errc::not_found naming the component and listing those present.
  std::int64_t at(std::string_view name) const;
  std::int64_t get(std::string_view name, std::int64_t fallback) const;
  /// Replaces the value of an existing name, or appends it.
  void set(std::string_view name, std::int64_t value);
  /// "m=128,n=4096,k=4096" (in component order); "" when empty.
  std::string str() const;
  bool operator==(const named_ints& o) const = default;
  auto operator<=>(const named_ints& o) const = default;

 protected:
  /// Parses the str() form; throws errc::invalid_argument ("<what>: ...") on malformed text.
  static std::vector<std::pair<std::string, std::int64_t>> parse_items(std::string_view text,
                                                                       const char* what);
  std::vector<std::pair<std::string, std::int64_t>> items_;
};

/// A tunable kernel configuration, e.g. "wg=64,vec=4,ept=4".
class kernel_config : public named_ints {
 public:
  using named_ints::named_ints;
  static kernel_config parse(std::string_view text);
};

/// One tunable parameter: its name, default and the values it may take.
struct config_param {
  std::string name;
  std::int64_t default_value = 0;
  std::vector<std::int64_t> allowed;  ///< empty: any value >= 1
  std::string help;
};

/// The tunable parameters of an op (shared by its implementations; "variant" picks between
/// implementations where they differ in algorithm).
struct config_schema {
  std::vector<config_param> params;
  /// Device-independent rule across params (e.g. "tile_m must be a multiple of vec"); returns
  /// the reason a config is invalid, nullopt when valid. May be empty.
  std::function<std::optional<std::string>(const kernel_config&)> rule;

  kernel_config defaults() const;
  /// "wg, vec, ept" in schema order, "none" without parameters.
  std::string param_names() const;
  bool has(std::string_view name) const;
  /// Unknown names (the reason lists param_names()), values outside `allowed`, then `rule`;
  /// nullopt when valid.
  std::optional<std::string> validate(const kernel_config& c) const;
  /// `c` with missing params set to their defaults, in schema order. Throws errc::config_error
  /// with validate()'s reason when the result is invalid.
  kernel_config complete(const kernel_config& c) const;
};

// ---------------------------------------------------------------------------------------------
// Host references and tolerances

/// Logical elements of one tensor on the host, in double, row-major over `shape`.
struct host_tensor {
  bool defined = false;
  dims shape;
  dtype type = dtype::f32;
  std::vector<double> values;
  /// Optional per-element error scale filled by references of accumulating ops (for a sum:
  /// sum |x_i|; for GEMM: sum |a_ik * b_kj|); tolerance::magnitude_eps multiplies it.
  std::vector<double> magnitude;
  std::int64_t numel() const noexcept { return shape.product(); }
};

/// What a host reference sees: the call (attrs), its inputs read to host and its outputs
/// pre-shaped (values zeroed) for the reference to fill.
struct host_call {
  const op_call* call = nullptr;
  std::vector<host_tensor> inputs;
  std::vector<host_tensor> outputs;
};

/// Per element: |got - expected| <= ulps * ulp_<out dtype>(expected) + atol + rtol * |expected|
/// + magnitude_eps * magnitude. NaN expected needs NaN; infinities must match exactly. Integer
/// and bool outputs are always compared exactly.
struct tolerance {
  double ulps = 0;
  double atol = 0;
  double rtol = 0;
  double magnitude_eps = 0;
};

/// The spacing of `dt` at |x| (f32: 2^(e-23), f16: 2^(e-10) down to 2^-24, bf16: 2^(e-7)).
double ulp_of(dtype dt, double x) noexcept;

/// The result of comparing device outputs against the reference: the worst element (largest
/// error/bound ratio) over all outputs.
struct comparison {
  bool ok = true;
  int output = -1;          ///< which output held the worst element
  std::int64_t index = -1;  ///< its row-major index
  dims coord;               ///< its coordinates
  double expected = 0, got = 0, error = 0, bound = 0;
  std::int64_t mismatches = 0;  ///< elements over their bound
  std::int64_t checked = 0;
  /// "worst at out0[3, 17] (index 113): expected 1.25 got 1.2502 |err| 2e-4 > bound 1.2e-7;
  /// 5 of 4096 elements over bound"
  std::string message;
};

// ---------------------------------------------------------------------------------------------
// Samples and test cases

struct sample_options {
  dtype type = dtype::f32;
  /// The activations' dtype where `type` is a block-quantized weight's (f32, f16 or bf16; a
  /// shape set entry's `act`); ignored otherwise.
  dtype act = dtype::f32;
  std::uint64_t seed = 0;
  /// Inputs are small integers (exactly representable, sums exact in f32): accumulating ops are
  /// then compared exactly.
  bool small_integers = false;
};

/// One suite case: a shape class ("empty", "one", "odd", "large", "broadcast", "strided", ...)
/// and a builder of a ready call (inputs filled, outputs allocated).
struct test_case {
  std::string shape_class;
  std::function<op_call(queue&, const sample_options&)> make;
};

// ---------------------------------------------------------------------------------------------
// Implementations

/// An op's OpenCL kernel source replacement (a vendor profile's kernels/<file> text). Empty
/// optional: use the embedded source.
using source_override = std::optional<std::string_view>;

/// One implementation of an op, on any backend: the descriptors list their OpenCL ones, and
/// each dispatch backend (dispatch/backends/) makes its own of this same type. `supports`
/// answers nullopt when it can run the call with the config on the device, otherwise why not
/// ("needs local memory 96 KiB > 48 KiB"); empty means always. `enqueue` launches it (the call
/// is already checked) and returns the last event; OpenCL kernel parameters go in as
/// build-time defines and programs come from the runtime's cache.
struct op_implementation {
  std::string name;         ///< unique within the op, e.g. "opencl.flat", "clblast.gemm"
  std::string kernel_file;  ///< OpenCL only: the kernels/cl file it builds (what a vendor override replaces)
  std::function<std::optional<std::string>(const device&, const op_call&, const kernel_config&)> supports;
  std::function<event(queue&, const op_call&, const kernel_config&, source_override)> enqueue;
};

/// Declared attribute: name, default (whose type is the attribute's type), one line of help.
/// The descriptor's list is the one source of attribute names, types and defaults:
/// complete_attrs() checks calls against it and fills the defaults in.
struct attr_spec {
  std::string name;
  attr_value default_value;
  std::string help;
  /// Absence means something of its own, said in `help` (e.g. "take the shape of the given
  /// output"): complete_attrs() leaves it absent, and default_value gives only the type.
  bool optional = false;
};

/// Declared input or output.
struct arg_spec {
  std::string name;
  bool optional = false;  ///< inputs only: may be an undefined tensor
  /// Outputs only: the input this output updates in place (must be that very view);
  /// allocate_outputs() reuses the input for it.
  std::string in_place_of = {};
};

// ---------------------------------------------------------------------------------------------
// The descriptor

struct op_descriptor {
  std::string name;     ///< "add", "gelu.tanh", "mm", ...
  std::string family;   ///< "unary", "binary", "reduce", "norm", "layout", "gemm", ... (suite split)
  std::string summary;  ///< one line for --help and docs
  std::vector<arg_spec> inputs;
  std::vector<arg_spec> outputs;
  /// The last input repeats (1..n tensors, e.g. cat's "tensors").
  bool variadic_inputs = false;
  std::vector<attr_spec> attrs;
  /// The dtypes of the op's main tensors (the suite runs each).
  std::vector<dtype> dtypes;

  /// Argument rules beyond what check_call() does generically (arity, defined-ness, one
  /// context, output specs): throws prism::error(invalid_argument, "ops::<name>", ...) naming
  /// the argument, what it got and what is valid.
  std::function<void(const op_call&)> check;
  /// Output shapes and dtypes from inputs + attrs (called after check on the inputs).
  std::function<std::vector<tensor_spec>(const op_call&)> infer_outputs;
  /// Outputs that may be non-contiguous views (default: none may).
  std::vector<bool> strided_outputs_ok;

  std::function<shape_key(const op_call&)> key;
  /// The component names `key` produces, declared so routes files and vendor profiles can be
  /// checked at start-up without a call (conditional routes, `when: "m <= 16"`).
  std::vector<std::string> key_names;
  /// Tuned rows of another shape serve a call only from its side of each (component, value)
  /// split (tuning::lookup_query::splits): where the op switches kernels, e.g. {"m", 16}.
  std::vector<std::pair<std::string, std::int64_t>> nearest_splits;
  /// GEMM-family ops only: the call as one strided GEMM (kernels/gemm_lowering.hpp). Every
  /// backend that serves GEMMs (prism's kernels, CLBlast, OpenBLAS) reads this lowering; an op
  /// without one is not a GEMM to them.
  std::function<gemm_problem(const op_call&)> gemm;
  std::function<double(const op_call&)> flops;
  std::function<double(const op_call&)> bytes;

  std::function<void(host_call&)> reference;
  std::function<tolerance(const op_call&, int output)> tol;
  /// With sample_options::small_integers, outputs must match exactly.
  bool exact_on_small_integers = false;

  config_schema config;
  std::vector<op_implementation> implementations;

  /// A valid random call for a shape key (contiguous canonical layout), used by benchmarks,
  /// `prism run` and pretune. Throws errc::invalid_argument when the key lacks components.
  std::function<op_call(queue&, const shape_key&, const sample_options&)> sample;
  /// Shape keys used to check every config of the vendor search spaces.
  std::vector<std::string> config_test_shapes;
  /// Suite cases for one dtype (every shape class the op supports).
  std::function<std::vector<test_case>(dtype)> test_cases;

  /// Index of an input / output by name; -1 when absent.
  int input_index(std::string_view n) const;
  int output_index(std::string_view n) const;
};

// ---------------------------------------------------------------------------------------------
// Registry

/// Every op, registered once at first use. Thread safety: safe after construction (read-only).
class op_registry {
 public:
  static const op_registry& instance();
  /// Throws errc::not_found listing the registered names (closest first).
  const op_descriptor& get(std::string_view name) const;
  const op_descriptor* find(std::string_view name) const;
  /// All descriptors sorted by name.
  const std::vector<const op_descriptor*>& all() const noexcept { return sorted_; }

  /// Used by the registration functions of kernels/ops/*.cpp: each file <stem>.cpp defines
  /// `void register_<stem>_ops(prism::op_registry&)`, which a generated index calls at first use.
  /// Throws errc::internal on a duplicate name.
  void add(op_descriptor d);

 private:
  op_registry() = default;
  std::map<std::string, op_descriptor, std::less<>> ops_;
  std::vector<const op_descriptor*> sorted_;
};

// ---------------------------------------------------------------------------------------------
// Generic helpers over descriptors

/// "add(input=f32[4, 8], other=f32[8], out=f32[4, 8]; alpha=1.0)".
std::string describe_call(const op_descriptor& d, const op_call& call);

/// The type an attribute takes, as error messages name it: "an integer", "a number",
/// "true or false", "a word", "an integer list like [0,2]".
const char* attr_type_name(const attr_value& v) noexcept;
/// Checks call.attrs against d.attrs and fills in the defaults of absent ones: the one place
/// attribute defaults are applied. The dispatcher calls it before it memoizes and routes, so an
/// omitted attribute and an explicit default make one decision, log line and tuning key.
/// Values are stored in the declared type (an integer for a number, 0/1 for a flag, one integer
/// for a list are accepted). Throws errc::invalid_argument naming the op and the attribute: an
/// unknown name lists the valid ones (with a did-you-mean when one is close), a value of another
/// type names the expected type.
void complete_attrs(const op_descriptor& d, op_call& call);
/// True when complete_attrs() would leave call.attrs unchanged.
bool attrs_complete(const op_descriptor& d, const op_call& call) noexcept;

/// Checks attributes (as complete_attrs; an incomplete call is checked as its completed copy),
/// arity, defined inputs/outputs, one context for all tensors, dtype in `dtypes` (of the first
/// input), output shapes/dtypes against infer_outputs, output contiguity, then d.check.
/// Throws prism::error(invalid_argument, "ops::<name>", ...). Enqueues nothing.
void check_call(const op_descriptor& d, const op_call& call);
/// Completes call.attrs, checks the inputs (as check_call does) and returns the outputs'
/// shapes and dtypes per infer_outputs, without allocating (bindings allocate them in memory of
/// their own). Throws prism::error(invalid_argument, "ops::<name>", ...).
std::vector<tensor_spec> infer_output_specs(const op_descriptor& d, op_call& call);
/// Completes call.attrs, then fills call.outputs with new contiguous tensors per infer_outputs
/// (after checking inputs).
void allocate_outputs(queue& q, const op_descriptor& d, op_call& call);

/// The first implementation whose supports() accepts; `refusals` (if given) receives
/// "<impl>: <reason>" for each one skipped. nullptr when none accepts.
const op_implementation* select_implementation(const op_descriptor& d, const device& dev, const op_call& call,
                                               const kernel_config& config,
                                               std::vector<std::string>* refusals = nullptr);
/// check_call, complete the config, select, enqueue. Throws errc::unsupported listing each
/// refusal when no implementation accepts.
event enqueue_opencl(queue& q, const op_descriptor& d, const op_call& call, const kernel_config& config = {},
                     source_override src = std::nullopt);

/// Reads a tensor's logical elements to host as double (undefined tensor -> defined=false).
host_tensor read_host(queue& q, const tensor& t);
/// Runs the reference on the call's current inputs; returns the expected outputs.
std::vector<host_tensor> compute_reference(queue& q, const op_descriptor& d, const op_call& call);
/// The "host" backend: computes the reference and writes it into call.outputs (converted to
/// their dtypes, honouring strides). Blocking; returns a complete event.
event run_host(queue& q, const op_descriptor& d, const op_call& call);
/// Compares got (read_host of the outputs) against expected under d.tol (exact when
/// small_integers and d.exact_on_small_integers).
comparison compare_outputs(const op_descriptor& d, const op_call& call,
                           const std::vector<host_tensor>& expected, const std::vector<host_tensor>& got,
                           bool small_integers = false);

// ---------------------------------------------------------------------------------------------
// Vendor tune configs (vendors/<vendor>/tune_configs.yaml, see docs/tune_configs.md). The
// kernels layer parses only text it is handed: the vendor loader (dispatch/vendors) reads files.

/// The default config and search space of one op for one vendor profile.
struct tune_space {
  std::string vendor;  ///< the profile the entry came from ("generic" when it fell back, "schema")
  std::string op;
  kernel_config defaults;              ///< complete (schema defaults filled in)
  std::vector<kernel_config> configs;  ///< expanded, complete, valid, deduplicated, in file order
};
/// The schema's defaults alone: the space of an op no tune_configs.yaml names.
tune_space schema_tune_space(const op_descriptor& d);
/// The same, made once per descriptor and kept for the process (thread-safe).
const tune_space& schema_tune_space_of(const op_descriptor& d);
/// Parses one tune_configs.yaml text for every op it names (validated against the registry).
std::map<std::string, tune_space> parse_tune_configs(std::string_view yaml_text, std::string_view vendor,
                                                     std::string_view file_name = "<text>");

}  // namespace prism
