// prism._prism: the native part of the Python module, bound with nanobind over prism's public C++
// API only (devices, queues, tensors over host memory, ops by name, the dispatch log, the tuning
// database and pretune). The Python package (python/prism/) builds the user-facing API on it.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/op_info.hpp"
#include "prism/pretune.hpp"
#include "prism/runtime.hpp"
#include "prism/tensor.hpp"
#include "prism/tuning_db.hpp"
#include "prism/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---- errors ----------------------------------------------------------------------------------

// prism.Error and its subclasses; a prism::error becomes the class of its code, carrying the
// same message (what()) and the code and operation as attributes.
PyObject* error_base = nullptr;
PyObject* error_invalid_argument = nullptr;
PyObject* error_not_found = nullptr;
PyObject* error_unsupported = nullptr;
PyObject* error_device_not_found = nullptr;

PyObject* error_class(prism::errc code) {
  switch (code) {
    case prism::errc::invalid_argument:
    case prism::errc::config_error:
      return error_invalid_argument;
    case prism::errc::not_found:
      return error_not_found;
    case prism::errc::device_not_found:
      return error_device_not_found;
    case prism::errc::unsupported:
      return error_unsupported;
    default:
      return error_base;
  }
}

PyObject* new_error_class(nb::module_& m, const char* name, PyObject* extra_base, const char* doc) {
  std::string qualified = std::string("prism.") + name;
  nb::object bases = extra_base ? nb::make_tuple(nb::handle(error_base), nb::handle(extra_base))
                                : nb::make_tuple(nb::handle(error_base));
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!cls) throw nb::python_error();
  m.attr(name) = nb::handle(cls);
  return cls;
}

void raise_prism_error(const prism::error& e) {
  PyObject* cls = error_class(e.code());
  nb::object exc = nb::steal(PyObject_CallOneArg(cls, nb::str(e.what()).ptr()));
  if (!exc.is_valid()) return;  // the call set its own error
  exc.attr("code") = nb::str(prism::errc_name(e.code()));
  exc.attr("operation") = nb::str(e.operation().c_str());
  PyErr_SetObject(cls, exc.ptr());
}

// ---- dtypes ----------------------------------------------------------------------------------

nb::dlpack::dtype dlpack_dtype(prism::dtype t) {
  using code = nb::dlpack::dtype_code;
  switch (t) {
    case prism::dtype::f32:
      return {static_cast<uint8_t>(code::Float), 32, 1};
    case prism::dtype::f16:
      return {static_cast<uint8_t>(code::Float), 16, 1};
    case prism::dtype::bf16:
      return {static_cast<uint8_t>(code::Bfloat), 16, 1};
    case prism::dtype::i32:
      return {static_cast<uint8_t>(code::Int), 32, 1};
    case prism::dtype::i64:
      return {static_cast<uint8_t>(code::Int), 64, 1};
    case prism::dtype::boolean:
      return {static_cast<uint8_t>(code::Bool), 8, 1};
  }
  return {};
}

const char* valid_dtypes_text =
    "valid: float32 (f32), float16 (f16), bfloat16 (bf16, through DLPack), int32 (i32), int64 (i64), bool";

std::string dlpack_dtype_name(nb::dlpack::dtype d) {
  using code = nb::dlpack::dtype_code;
  std::string kind;
  switch (static_cast<code>(d.code)) {
    case code::Int:
      kind = "int";
      break;
    case code::UInt:
      kind = "uint";
      break;
    case code::Float:
      kind = "float";
      break;
    case code::Bfloat:
      kind = "bfloat";
      break;
    case code::Complex:
      kind = "complex";
      break;
    case code::Bool:
      kind = "bool";
      break;
    default:
      kind = "type code " + std::to_string(d.code) + " of ";
  }
  std::string s = kind + std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

prism::dtype prism_dtype(nb::dlpack::dtype d, const char* what) {
  using code = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == static_cast<uint8_t>(code::Float) && d.bits == 32) return prism::dtype::f32;
    if (d.code == static_cast<uint8_t>(code::Float) && d.bits == 16) return prism::dtype::f16;
    if (d.code == static_cast<uint8_t>(code::Bfloat) && d.bits == 16) return prism::dtype::bf16;
    if (d.code == static_cast<uint8_t>(code::Int) && d.bits == 32) return prism::dtype::i32;
    if (d.code == static_cast<uint8_t>(code::Int) && d.bits == 64) return prism::dtype::i64;
    if (d.code == static_cast<uint8_t>(code::Bool) && d.bits == 8) return prism::dtype::boolean;
  }
  throw prism::error(prism::errc::invalid_argument, what,
                     "the array's dtype " + dlpack_dtype_name(d) + " is not one prism stores; " +
                         valid_dtypes_text + " (convert it first, e.g. arr.astype(numpy.float32))");
}

// ---- host memory -----------------------------------------------------------------------------

bool shares_host_memory(const prism::device& dev) {
  return dev.type() == prism::device_type::cpu;
}

// Keeps a Python object (an ndarray handle) alive for prism's storage; releases it under the
// GIL, from whichever thread drops the storage last.
struct python_owner {
  nb::ndarray<> array;
  ~python_owner() {
    if (!Py_IsInitialized()) {
      // The interpreter is gone: leak the reference rather than touch freed state.
      new nb::ndarray<>(std::move(array));
      return;
    }
    nb::gil_scoped_acquire gil;
    array = nb::ndarray<>();
  }
};

// Host memory prism allocated for a tensor on a device that shares host memory: aligned so the
// OpenCL driver uses it as is (PoCL copies misaligned host pointers).
constexpr std::size_t host_alignment = 128;

std::shared_ptr<void> aligned_host(std::size_t bytes) {
  std::size_t rounded = ((bytes + host_alignment - 1) / host_alignment) * host_alignment;
  void* p = std::aligned_alloc(host_alignment, rounded == 0 ? host_alignment : rounded);
  if (!p)
    throw prism::error(prism::errc::out_of_memory, "prism.tensor",
                       "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

prism::tensor host_empty(const prism::queue& q, const prism::dims& shape, prism::dtype t) {
  auto mem = aligned_host(static_cast<std::size_t>(shape.product()) * prism::dtype_size(t));
  void* data = mem.get();
  return prism::tensor::wrap_host(q, data, shape, prism::contiguous_strides(shape), t, std::move(mem));
}

// A new contiguous tensor: host memory of ours where the device shares it, else prism's.
prism::tensor new_tensor(const prism::queue& q, const prism::dims& shape, prism::dtype t) {
  return shares_host_memory(q.get_device()) ? host_empty(q, shape, t) : prism::tensor::empty(q, shape, t);
}

prism::dims to_dims(const std::vector<std::int64_t>& v, const char* what) {
  if (v.size() > static_cast<std::size_t>(prism::max_tensor_dims))
    throw prism::error(prism::errc::invalid_argument, what,
                       std::to_string(v.size()) + " dims; prism tensors have at most " +
                           std::to_string(prism::max_tensor_dims));
  return prism::dims(std::span<const std::int64_t>(v.data(), v.size()));
}

// A tensor over an array's memory (zero copy), or nullopt with the reason it cannot be.
prism::tensor wrap_array(const prism::queue& q, const nb::ndarray<>& a, prism::dtype t) {
  std::vector<std::int64_t> shape(a.ndim()), strides(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = static_cast<std::int64_t>(a.shape(i));
    strides[i] = a.stride(i);
  }
  auto owner = std::make_shared<python_owner>();
  owner->array = a;
  return prism::tensor::wrap_host(q, a.data(), to_dims(shape, "prism.tensor"),
                                  to_dims(strides, "prism.tensor"), t, std::move(owner));
}

// A copy of a C-contiguous array's bytes on q's device.
prism::tensor copy_array(const prism::queue& q, const nb::ndarray<nb::ro>& a, prism::dtype t) {
  std::vector<std::int64_t> shape(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<std::int64_t>(a.shape(i));
  prism::dims d = to_dims(shape, "prism.tensor");
  prism::tensor out = new_tensor(q, d, t);
  if (out.numel() == 0) return out;
  if (void* host = out.storage().host_memory()) {
    std::memcpy(host, a.data(), out.nbytes());
    return out;
  }
  return prism::tensor::from_host(q, a.data(), d, t);
}

bool c_contiguous(const nb::ndarray<nb::ro>& a) {
  std::int64_t expect = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// Waits for the tensor's writers and returns a pointer to its elements in host memory that is
// the tensor's own storage (nullptr when the device keeps a copy of it elsewhere).
const std::byte* synced_host_elements(prism::tensor& t) {
  std::byte* host = t.storage().host_memory();
  if (!host || !shares_host_memory(t.get_context().get_device())) return nullptr;
  if (t.storage().size() == 0) return host;
  prism::host_accessor<std::byte> view(t.storage(), prism::read_only);
  if (view.data() != host) return nullptr;  // the driver keeps its own copy
  return host + t.offset() * static_cast<std::int64_t>(prism::dtype_size(t.type()));
}

// The tensor as an ndarray: a view of its host memory when it has one, else a host copy (row
// major). The view keeps the tensor (its storage) alive. Waits with the GIL released.
template <class Array>
Array host_array(prism::tensor t, bool allow_copy, const char* what) {
  const int n = t.dim();
  std::vector<std::size_t> shape(n);
  std::vector<std::int64_t> strides(n);
  for (int i = 0; i < n; ++i) {
    shape[i] = static_cast<std::size_t>(t.shape()[i]);
    strides[i] = t.strides()[i];
  }
  const std::byte* data = nullptr;
  {
    nb::gil_scoped_release release;
    data = synced_host_elements(t);
  }
  if (!data) {
    if (!allow_copy)
      throw prism::error(prism::errc::unsupported, what,
                         "the tensor lives in the memory of " + t.get_context().get_device().name() +
                             ", which the host cannot see; pass copy=True (or use .numpy()) for a host copy");
    std::vector<std::byte>* bytes = nullptr;
    {
      nb::gil_scoped_release release;
      prism::queue q(t.get_context());
      bytes = new std::vector<std::byte>(t.to_host(q));
    }
    nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
    return Array(bytes->data(), n, shape.data(), owner, nullptr, dlpack_dtype(t.type()),
                 nb::device::cpu::value);
  }
  auto keep = new prism::tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<prism::tensor*>(p); });
  return Array(const_cast<std::byte*>(data), n, shape.data(), owner, strides.data(), dlpack_dtype(t.type()),
               nb::device::cpu::value);
}

// ---- ops -------------------------------------------------------------------------------------

nb::object attr_to_python(const prism::ops::attr_value& v) {
  return std::visit(
      [](const auto& x) -> nb::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          nb::list l;
          for (auto i : x) l.append(i);
          return l;
        } else {
          return nb::cast(x);
        }
      },
      v);
}

prism::ops::attr_value attr_from_python(const std::string& op, const std::string& name, nb::handle h) {
  if (PyBool_Check(h.ptr())) return h.ptr() == Py_True;
  if (PyLong_Check(h.ptr())) return nb::cast<std::int64_t>(h);
  if (PyFloat_Check(h.ptr())) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    std::vector<std::int64_t> v;
    for (nb::handle x : h) {
      if (!PyLong_Check(x.ptr()) || PyBool_Check(x.ptr()))
        throw prism::error(prism::errc::invalid_argument, "ops::" + op,
                           "attribute '" + name + "' holds " + nb::cast<std::string>(nb::repr(x)) +
                               "; valid: a list of integers");
      v.push_back(nb::cast<std::int64_t>(x));
    }
    return v;
  }
  // Objects that stand for an integer (numpy integers, torch.dtype names are words already).
  if (PyIndex_Check(h.ptr())) return nb::cast<std::int64_t>(nb::int_(h));
  if (PyNumber_Check(h.ptr())) return nb::cast<double>(nb::float_(h));
  throw prism::error(prism::errc::invalid_argument, "ops::" + op,
                     "attribute '" + name + "' is a " +
                         nb::cast<std::string>(nb::str(h.type().attr("__name__"))) +
                         "; valid: an int, a float, a bool, a str or a list of ints");
}

std::vector<prism::tensor> run_op(prism::queue& q, int op, std::vector<std::optional<prism::tensor>> inputs,
                                  nb::dict attrs,
                                  std::optional<std::vector<std::optional<prism::tensor>>> outputs) {
  const auto& info = prism::ops::op_infos().at(static_cast<std::size_t>(op));
  std::vector<prism::tensor> ins;
  ins.reserve(inputs.size());
  for (auto& t : inputs) ins.push_back(t ? std::move(*t) : prism::tensor{});
  prism::ops::attr_map am;
  for (auto [k, v] : attrs) {
    std::string name = nb::cast<std::string>(k);
    am.emplace(name, attr_from_python(info.name, name, v));
  }
  std::vector<prism::tensor> outs;
  if (outputs) {
    for (auto& t : *outputs) outs.push_back(t ? std::move(*t) : prism::tensor{});
  } else if (shares_host_memory(q.get_device()) && !info.outputs.empty()) {
    // Results in host memory of ours, so that numpy and DLPack see them without a copy.
    auto specs = prism::ops::infer_outputs(op, ins, am);
    bool in_place = false;
    for (auto& o : info.outputs) in_place = in_place || !o.in_place_of.empty();
    for (std::size_t i = 0; i < specs.size(); ++i)
      outs.push_back(in_place && !info.outputs[i].in_place_of.empty()
                         ? prism::tensor{}
                         : host_empty(q, specs[i].shape, specs[i].type));
  }
  nb::gil_scoped_release release;
  return prism::ops::call(q, op, std::move(ins), std::move(am), std::move(outs));
}

nb::dict op_info_dict(const prism::ops::op_info& i) {
  nb::dict d;
  d["name"] = i.name;
  d["family"] = i.family;
  d["summary"] = i.summary;
  nb::list ins, outs, attrs, dtypes;
  for (auto& a : i.inputs) ins.append(nb::make_tuple(a.name, a.optional));
  for (auto& a : i.outputs) outs.append(nb::make_tuple(a.name, a.in_place_of));
  for (auto& a : i.attrs)
    attrs.append(nb::make_tuple(a.name, attr_to_python(a.default_value), a.optional, a.help));
  for (auto t : i.dtypes) dtypes.append(prism::dtype_name(t));
  d["inputs"] = ins;
  d["outputs"] = outs;
  d["variadic"] = i.variadic_inputs;
  d["attrs"] = attrs;
  d["dtypes"] = dtypes;
  d["key_names"] = i.key_names;
  return d;
}

// ---- tuning ----------------------------------------------------------------------------------

nb::dict result_row_dict(const prism::tuning::result_row& r) {
  nb::dict d;
  d["device"] = r.device;
  d["op"] = r.op;
  d["dtype"] = r.dtype;
  d["shape"] = r.shape;
  d["backend"] = r.backend;
  d["config"] = r.config;
  d["p50_ns"] = r.p50_ns;
  d["default_ns"] = r.default_ns;
  d["speedup"] = r.speedup();
  d["kernel_hash"] = r.kernel_hash;
  d["driver_version"] = r.driver_version;
  d["prism_version"] = r.prism_version;
  d["tuned_at"] = r.tuned_at;
  return d;
}

}  // namespace

NB_MODULE(_prism, m) {
  m.doc() = "prism's native module: use the `prism` package, which wraps it.";
  // The default queue lives until the process ends (no OpenCL from interpreter teardown), which
  // nanobind would report as a leak at exit.
  nb::set_leak_warnings(false);

  error_base = PyErr_NewExceptionWithDoc(
      "prism.Error",
      "An error prism reported: the same message as the C++ prism::error, with `code` (e.g. "
      "'invalid_argument') and `operation` (e.g. 'ops::add').",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(error_base);
  error_invalid_argument = new_error_class(m, "InvalidArgumentError", PyExc_ValueError,
                                           "Bad input: shapes, dtypes, attributes, names, configuration.");
  error_not_found = new_error_class(m, "NotFoundError", PyExc_LookupError,
                                    "A named thing (op, backend, vendor, file, row) does not exist.");
  error_device_not_found =
      new_error_class(m, "DeviceNotFoundError", PyExc_LookupError, "No device matched the selection.");
  error_unsupported = new_error_class(m, "UnsupportedError", PyExc_NotImplementedError,
                                      "The device or backend cannot do what was asked.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const prism::error& e) {
      raise_prism_error(e);
    }
  });

  // ---- devices and queues ----
  nb::class_<prism::device>(m, "Device", "An OpenCL device (prism.devices() lists them).")
      .def_prop_ro("name", &prism::device::name)
      .def_prop_ro("vendor", &prism::device::vendor)
      .def_prop_ro("type", [](const prism::device& d) { return prism::device_type_name(d.type()); })
      .def_prop_ro("driver_version", &prism::device::driver_version)
      .def_prop_ro("opencl_version", &prism::device::opencl_version)
      .def_prop_ro("platform", &prism::device::platform_name)
      .def_prop_ro("index", &prism::device::global_index)
      .def_prop_ro("compute_units", &prism::device::compute_units)
      .def_prop_ro("global_mem_size", &prism::device::global_mem_size)
      .def_prop_ro("fingerprint", [](const prism::device& d) { return d.fingerprint().hash; })
      .def_prop_ro("shares_host_memory", &shares_host_memory,
                   "True when tensors made from host arrays use their memory without a copy (CPU devices).")
      .def("__eq__", [](const prism::device& a, const prism::device& b) { return a == b; })
      .def("__hash__",
           [](const prism::device& d) {
             return std::hash<std::string>()(d.fingerprint().hash + std::to_string(d.global_index()));
           })
      .def("__repr__", [](const prism::device& d) {
        return "<prism.Device " + std::to_string(d.global_index()) + ": " + d.name() + " (" +
               prism::device_type_name(d.type()) + ", " + d.platform_name() + ")>";
      });
  m.def("_devices", &prism::device::get_devices);
  m.def("_devices_matching",
        [](const std::string& spec) { return prism::devices_matching(spec, "device spec"); });
  m.def("_default_device", []() { return prism::select_device(); });
  m.def("_device_spec_syntax", []() { return std::string(prism::device_spec_syntax()); });

  nb::class_<prism::queue>(m, "Queue", "An in-order command queue on one device; ops run on a queue.")
      .def(nb::init<const prism::device&>(), "device"_a)
      .def_prop_ro("device", &prism::queue::get_device)
      .def("wait", &prism::queue::wait, nb::call_guard<nb::gil_scoped_release>(),
           "Waits for every command submitted so far.")
      .def("__repr__",
           [](const prism::queue& q) { return "<prism.Queue on " + q.get_device().name() + ">"; });

  // ---- tensors ----
  nb::class_<prism::tensor>(m, "Tensor")
      .def_prop_ro("shape",
                   [](const prism::tensor& t) {
                     nb::list l;
                     for (auto x : t.shape()) l.append(x);
                     return nb::tuple(l);
                   })
      .def_prop_ro("strides",
                   [](const prism::tensor& t) {
                     nb::list l;
                     for (auto x : t.strides()) l.append(x);
                     return nb::tuple(l);
                   })
      .def_prop_ro("dtype", [](const prism::tensor& t) { return std::string(prism::dtype_name(t.type())); })
      .def_prop_ro("ndim", &prism::tensor::dim)
      .def_prop_ro("offset", &prism::tensor::offset)
      .def_prop_ro("nbytes", &prism::tensor::nbytes)
      .def_prop_ro("device", [](const prism::tensor& t) { return t.get_context().get_device(); })
      .def_prop_ro(
          "host_memory",
          [](const prism::tensor& t) { return reinterpret_cast<std::uintptr_t>(t.storage().host_memory()); })
      .def("numel", &prism::tensor::numel)
      .def("is_contiguous", &prism::tensor::is_contiguous)
      .def("same_storage", &prism::tensor::same_storage)
      .def("transpose", &prism::tensor::transpose, "dim0"_a, "dim1"_a)
      .def("permute",
           [](const prism::tensor& t, std::vector<std::int64_t> order) {
             return t.permute(to_dims(order, "Tensor.permute"));
           })
      .def("reshape",
           [](const prism::tensor& t, std::vector<std::int64_t> shape) {
             return t.reshape(to_dims(shape, "Tensor.reshape"));
           })
      .def("slice", &prism::tensor::slice, "dim"_a, "start"_a, "end"_a, "step"_a = 1)
      .def("select", &prism::tensor::select, "dim"_a, "index"_a)
      .def("unsqueeze", &prism::tensor::unsqueeze)
      .def("squeeze", &prism::tensor::squeeze)
      .def("expand",
           [](const prism::tensor& t, std::vector<std::int64_t> shape) {
             return t.expand(to_dims(shape, "Tensor.expand"));
           })
      .def(
          "numpy",
          [](prism::tensor t) {
            if (t.type() == prism::dtype::bf16)
              throw prism::error(
                  prism::errc::unsupported, "Tensor.numpy",
                  "numpy has no bfloat16; convert first (prism.ops.cast(t, dtype='f32')) or hand "
                  "the tensor to a DLPack consumer (torch.from_dlpack(t))");
            return nb::cast(host_array<nb::ndarray<nb::numpy>>(t, true, "Tensor.numpy"));
          },
          "A NumPy array of the tensor: a view of its memory when the host shares it (CPU devices; "
          "it waits for the commands writing the tensor), else a copy.")
      .def(
          "__dlpack__",
          [](prism::tensor t, nb::kwargs kwargs) {
            bool allow_copy = false;
            if (kwargs.contains("copy")) {
              nb::object c = kwargs["copy"];
              allow_copy = !c.is_none() && nb::cast<bool>(c);
              nb::del(kwargs["copy"]);
            }
            // An ndarray without a framework becomes a DLPack capsule ("dltensor"), which every
            // consumer takes; stream, max_version and dl_device need nothing for CPU memory.
            return nb::cast(host_array<nb::ndarray<>>(t, allow_copy, "Tensor.__dlpack__"));
          },
          "kwargs"_a, "DLPack export (CPU-visible memory: zero copy; copy=True copies from other devices).")
      .def(
          "__dlpack_device__",
          [](const prism::tensor& t) {
            const auto& dev = t.get_context().get_device();
            if (shares_host_memory(dev) && t.storage().host_memory()) return nb::make_tuple(1, 0);  // kDLCPU
            return nb::make_tuple(4, static_cast<int>(dev.global_index()));  // kDLOpenCL
          },
          "(device type, id): kDLCPU (1) for memory the host sees, kDLOpenCL (4) otherwise.")
      .def("__repr__", &prism::tensor::str);

  m.def("_empty", [](prism::queue& q, std::vector<std::int64_t> shape, const std::string& dtype) {
    return new_tensor(q, to_dims(shape, "prism.empty"), prism::parse_dtype(dtype));
  });
  // From any array nanobind reads (numpy, DLPack producers such as torch). zero_copy: "auto",
  // "never", "require".
  m.def("_from_array", [](prism::queue& q, nb::handle obj, const std::string& zero_copy) {
    const char* what = "prism.tensor";
    nb::ndarray<> writable;
    nb::ndarray<nb::ro> a;
    const bool is_writable = nb::try_cast<nb::ndarray<>>(obj, writable, false);
    if (is_writable) {
      a = nb::ndarray<nb::ro>(writable);
    } else if (!nb::try_cast<nb::ndarray<nb::ro>>(obj, a, false)) {
      throw prism::error(
          prism::errc::invalid_argument, what,
          "a " + nb::cast<std::string>(nb::str(obj.type().attr("__name__"))) +
              " is not an array prism can read; valid: a NumPy array, a DLPack producer on the CPU "
              "(torch tensor) or what numpy.asarray accepts");
    }
    if (a.device_type() != nb::device::cpu::value)
      throw prism::error(
          prism::errc::invalid_argument, what,
          "the array lives on DLPack device type " + std::to_string(a.device_type()) + " (id " +
              std::to_string(a.device_id()) +
              "); prism takes CPU memory (kDLCPU = 1): move it to the CPU first (e.g. t.cpu())");
    prism::dtype t = prism_dtype(a.dtype(), what);
    std::string why_not;
    if (!shares_host_memory(q.get_device()))
      why_not = q.get_device().name() + " does not share host memory";
    else if (reinterpret_cast<std::uintptr_t>(a.data()) % prism::dtype_size(t) != 0)
      why_not = "the array's memory is not aligned to its elements";
    else if (!is_writable)
      why_not = "the array is read-only";
    if (why_not.empty() && zero_copy != "never") return wrap_array(q, writable, t);
    if (zero_copy == "require")
      throw prism::error(
          prism::errc::invalid_argument, what,
          "cannot use the array's memory without a copy: " + why_not + " (pass copy=None or True)");
    if (!c_contiguous(a))
      throw prism::error(
          prism::errc::invalid_argument,
          what, "copying needs a C-contiguous array; this one is strided (strides in elements: " + [&] {
            std::string s;
            for (std::size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.stride(i));
            return s;
          }() + "); pass numpy.ascontiguousarray(arr)");
    return copy_array(q, a, t);
  });
  m.def("_sync", [](prism::tensor t) {
    nb::gil_scoped_release release;
    if (t.storage().size() > 0) prism::host_accessor<std::byte> view(t.storage(), prism::read_only);
  });
  m.def("_shares_host_memory", &shares_host_memory);

  // ---- ops ----
  m.def("_op_infos", []() {
    nb::list l;
    for (const auto& i : prism::ops::op_infos()) l.append(op_info_dict(i));
    return l;
  });
  m.def("_op_id", [](const std::string& name) { return prism::ops::op_id(name); });
  m.def("_call", &run_op, "queue"_a, "op"_a, "inputs"_a, "attrs"_a, "outputs"_a.none() = nb::none());

  // ---- dispatch ----
  m.def("_get_log", []() {
    auto o = prism::dispatch::get_log_options();
    return nb::make_tuple(o.mode, o.file, o.filter);
  });
  m.def("_set_log", [](const std::string& mode, const std::string& file, const std::string& filter) {
    prism::dispatch::set_log_options({mode, file, filter});
  });
  m.def("_statistics", []() {
    nb::list l;
    for (auto& s : prism::dispatch::statistics()) {
      nb::dict d;
      d["op"] = s.op;
      d["backend"] = s.backend;
      d["tier"] = prism::dispatch::source_tier_name(s.tier);
      d["calls"] = s.calls;
      d["fallbacks"] = s.fallbacks;
      d["time_ns"] = s.time_ns;
      l.append(d);
    }
    return l;
  });
  m.def("_reset_statistics", &prism::dispatch::reset_statistics);
  m.def("_log_fallback", &prism::dispatch::log_fallback, "op"_a, "dtypes"_a, "shape"_a, "served_by"_a,
        "reason"_a);
  m.def("_backend_names", &prism::dispatch::backend_names);
  m.def("_set_record_path", [](const std::string& path) {
    prism::tuning::set_untuned_record_path(path);
    prism::dispatch::use_tuning_database();  // look shapes up (and record misses) afresh
  });
  m.def("_record_path", &prism::tuning::untuned_record_path);

  // ---- tuning database ----
  nb::class_<prism::tuning::database>(m, "_Database")
      .def(nb::init<std::string>(), "path"_a)
      .def_prop_ro("path", &prism::tuning::database::path)
      .def_prop_ro("is_open", &prism::tuning::database::is_open)
      .def_prop_ro("writable", &prism::tuning::database::writable)
      .def_prop_ro("refusal", &prism::tuning::database::refusal)
      .def_prop_ro("read_only_reason", &prism::tuning::database::read_only_reason)
      .def("close", &prism::tuning::database::close)
      .def(
          "results",
          [](prism::tuning::database& db, const std::string& device, const std::string& op,
             const std::string& dtype) {
            prism::tuning::row_filter f;
            f.device = device;
            f.op = op;
            f.dtype = dtype;
            nb::list l;
            for (auto& r : db.results(f)) l.append(result_row_dict(r));
            return l;
          },
          "device"_a = "", "op"_a = "", "dtype"_a = "")
      .def("export_json", [](prism::tuning::database& db) { return db.export_json(); });
  m.def("_default_db_path", &prism::tuning::database::default_path);
  m.def(
      "_pretune",
      [](const prism::device& dev, prism::tuning::database& db, const std::string& shapes_file,
         const std::string& model, std::vector<std::string> ops, std::vector<std::string> dtypes,
         std::vector<std::string> backends, double budget_s, std::size_t max_candidates, int min_runs,
         int max_runs, int pipeline_calls, bool force, nb::object progress) {
        prism::dispatch::pretune_request r;
        r.shapes = model.empty() ? prism::tuning::load_shape_set(shapes_file)
                                 : prism::tuning::load_model_shape_set(model);
        r.ops = std::move(ops);
        r.dtypes = std::move(dtypes);
        r.backends = std::move(backends);
        r.budget_s = budget_s;
        r.max_candidates = max_candidates;
        r.min_runs = min_runs;
        r.max_runs = max_runs;
        r.pipeline_calls = pipeline_calls;
        r.force = force;
        // The callback runs on this thread with the GIL taken back; its first exception is
        // raised once pretune returns (pretune itself keeps going: its rows are committed).
        auto failure = std::make_shared<std::optional<nb::python_error>>();
        if (!progress.is_none())
          r.on_progress = [progress, failure](const prism::dispatch::pretune_progress& p) {
            nb::gil_scoped_acquire gil;
            if (failure->has_value()) return;
            try {
              progress(p.done, p.total, p.label, p.detail, p.line);
            } catch (nb::python_error& e) {
              failure->emplace(std::move(e));
            }
          };
        prism::dispatch::pretune_summary s;
        {
          nb::gil_scoped_release release;
          s = prism::dispatch::pretune(dev, db, r);
        }
        if (failure->has_value()) {
          (*failure)->restore();
          throw nb::python_error();
        }
        nb::list shapes;
        for (auto& p : s.shapes) {
          nb::dict d;
          d["op"] = p.op;
          d["dtype"] = p.dtype;
          d["shape"] = p.shape;
          d["status"] = p.status;
          d["detail"] = p.detail;
          d["backend"] = p.backend;
          d["config"] = p.config;
          d["p50_ns"] = p.p50_ns;
          d["default_ns"] = p.default_ns;
          d["calls_per_sample"] = p.calls_per_sample;
          shapes.append(d);
        }
        nb::dict out;
        out["shapes"] = shapes;
        out["seconds"] = s.seconds;
        out["budget_exhausted"] = s.budget_exhausted;
        out["table"] = s.table;
        return out;
      },
      "device"_a, "db"_a, "shapes_file"_a, "model"_a, "ops"_a, "dtypes"_a, "backends"_a, "budget_s"_a,
      "max_candidates"_a, "min_runs"_a, "max_runs"_a, "pipeline_calls"_a, "force"_a, "progress"_a.none());
  m.def("_shipped_models", &prism::tuning::shipped_models);
  m.def("_version", []() { return std::string(prism::version()); });
}
