// ttrcheck._core: the C++ core behind the Python package (python/ttrcheck/). Thin:
// every function here calls what the CLI calls (oracles/loaded_inputs.hpp,
// oracles/oracle.hpp, gate/check_request.hpp, oracles/vector_files.hpp,
// oracles/catalogue.hpp), so results, reports and error messages are the CLI's.
// The GIL is released while MPFR and the error model compute.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "gate/check_request.hpp"
#include "gate/domain_note.hpp"
#include "gate/report.hpp"
#include "oracles/catalogue.hpp"
#include "oracles/error.hpp"
#include "oracles/loaded_inputs.hpp"
#include "oracles/oracle.hpp"
#include "oracles/vector_files.hpp"
#include "oracles/vectors.hpp"
#include "tensor_io.hpp"

namespace nb = nanobind;

namespace ttr::python {
namespace {

using Tensors = std::vector<PyTensor>;
using FileOut = std::pair<Tensors, Metadata>;

FileOut file_out(const io::TensorFile& f) { return {from_file(f), f.metadata}; }

std::string layers_json() {
  nlohmann::json j = nlohmann::json::array();
  for (const LayerEntry& e : registry()) j.push_back(layer_json(e));
  return j.dump();
}

FileOut oracle(const std::string& layer, const Tensors& tensors, const Metadata& metadata,
               const std::vector<std::string>& sets, bool backward, unsigned bits, const std::string& form,
               int chunk_size, bool certified, const std::string& oracle_tier) {
  find_layer(layer);  // an unknown layer first, as the CLI does
  const OracleMode mode = parse_oracle_mode(oracle_tier);
  io::TensorFile file = to_file(tensors, metadata, "inputs");
  io::TensorFile out;
  {
    nb::gil_scoped_release release;
    const Direction dir = backward ? Direction::backward : Direction::forward;
    const LoadedInputs in = load_inputs(layer, std::move(file), "inputs", sets, dir);
    OracleOptions opt;
    opt.direction = dir;
    opt.form = parse_form(form);
    opt.bits = bits;
    opt.certified = certified;
    opt.chunk_size = chunk_size;
    opt.mode = mode;
    out = compute_oracle(*in.layer, in.inputs, in.config, opt, in.file.metadata);
  }
  return file_out(out);
}

// The request both check() and explain_policy() judge.
CheckRequest check_request(const std::string& layer, const Tensors& inputs, const Metadata& in_meta,
                           const Tensors& candidate, const std::optional<Tensors>& oracle_tensors,
                           const Metadata& oracle_meta, const std::string& dtype, const std::string& policy,
                           const std::string& form, int chunk_size, int samples, std::uint64_t seed, bool backward,
                           bool strict_range, const std::vector<std::string>& sets, const std::string& case_name,
                           const std::string& oracle_tier, const std::vector<std::string>& not_judged) {
  find_layer(layer);
  CheckRequest req;
  req.layer = layer;
  req.inputs = to_file(inputs, in_meta, "inputs");
  req.candidate = to_file(candidate, {}, "candidate");
  if (oracle_tensors) req.oracle = to_file(*oracle_tensors, oracle_meta, "oracle");
  req.dtype = dtype;
  req.policy = policy;
  req.form = form;
  req.chunk_size = chunk_size;
  req.samples = samples;
  req.seed = seed;
  req.backward = backward;
  req.strict_range = strict_range;
  req.oracle_mode = parse_oracle_mode(oracle_tier);
  req.sets = sets;
  req.case_name = case_name;
  req.not_judged = not_judged;
  return req;
}

// The report as the CLI writes it (`check --report`) and the table it prints.
std::pair<std::string, std::string> report_and_table(const std::vector<NamedCheck>& checks) {
  std::string report = dump_json(report_json("check", checks)), table;
  char* buf = nullptr;
  std::size_t size = 0;
  std::FILE* mem = open_memstream(&buf, &size);
  if (!mem) throw std::runtime_error("open_memstream failed");
  print_table(mem, checks);
  std::fclose(mem);
  table.assign(buf, size);
  std::free(buf);
  return {report, table};
}

std::pair<std::string, std::string> check(const std::string& layer, const Tensors& inputs, const Metadata& in_meta,
                                          const Tensors& candidate, const std::optional<Tensors>& oracle_tensors,
                                          const Metadata& oracle_meta, const std::string& dtype,
                                          const std::string& policy, const std::string& form, int chunk_size,
                                          int samples, std::uint64_t seed, bool backward, bool strict_range,
                                          const std::vector<std::string>& sets, const std::string& case_name,
                                          const std::string& oracle_tier, const std::vector<std::string>& not_judged) {
  const CheckRequest req = check_request(layer, inputs, in_meta, candidate, oracle_tensors, oracle_meta, dtype, policy,
                                         form, chunk_size, samples, seed, backward, strict_range, sets, case_name,
                                         oracle_tier, not_judged);
  nb::gil_scoped_release release;
  std::vector<DomainViolation> domain;  // the guaranteed-domain note, as `check` writes it
  const NamedCheck c = run_check(req, &domain);
  std::string table;
  char* buf = nullptr;
  std::size_t size = 0;
  std::FILE* mem = open_memstream(&buf, &size);
  if (!mem) throw std::runtime_error("open_memstream failed");
  print_check_table(mem, c, domain);
  std::fclose(mem);
  table.assign(buf, size);
  std::free(buf);
  return {dump_json(check_report_json(c, domain)), table};
}

// `check --explain-policy`: (report, table) per policy of explain_order(), the best,
// and the notes (gate/check_request.hpp: a floor-bound worst row), one per policy.
std::tuple<std::vector<std::pair<std::string, std::string>>, std::string, std::vector<std::string>> explain_policy(
    const std::string& layer, const Tensors& inputs, const Metadata& in_meta, const Tensors& candidate,
    const std::optional<Tensors>& oracle_tensors, const Metadata& oracle_meta, const std::string& form,
    int chunk_size, int samples, std::uint64_t seed, bool backward, bool strict_range,
    const std::vector<std::string>& sets, const std::string& case_name, const std::string& oracle_tier,
    const std::vector<std::string>& not_judged) {
  const CheckRequest req = check_request(layer, inputs, in_meta, candidate, oracle_tensors, oracle_meta, "", "", form,
                                         chunk_size, samples, seed, backward, strict_range, sets, case_name,
                                         oracle_tier, not_judged);
  nb::gil_scoped_release release;
  const PolicyExplanation e = ttr::explain_policy(req);
  std::vector<std::pair<std::string, std::string>> out;
  for (const NamedCheck& c : e.checks) out.push_back(report_and_table({c}));
  return {out, e.best, e.notes};
}

struct CaseOut {
  std::string stem, entry;
  FileOut inputs;
  std::optional<FileOut> oracle, backward_inputs, backward_oracle;
};

std::vector<CaseOut> vectors(const std::string& layer, const std::string& suite, std::uint64_t seed, unsigned bits,
                             bool with_oracle, bool backward, const std::optional<std::string>& only_case) {
  const LayerEntry& l = find_layer(layer);
  std::vector<CaseFiles> files;
  {
    nb::gil_scoped_release release;
    const std::vector<VectorCase> cases = suite_cases(l.spec, suite);
    bool found = false;
    for (const VectorCase& c : cases) {
      if (only_case && c.name != *only_case) continue;
      found = true;
      VectorFileOptions opt;
      opt.suite = suite;
      opt.seed = seed;
      opt.bits = bits;
      opt.oracle = with_oracle;
      opt.backward = backward;
      files.push_back(case_files(l, c, opt));
    }
    if (only_case && !found) {
      std::string names;
      for (const VectorCase& c : cases) names += (names.empty() ? "" : "|") + c.name;
      throw InputError("case: suite '" + suite + "' of layer '" + layer + "' has no case '" + *only_case + "' (" +
                       names + ")");
    }
  }
  std::vector<CaseOut> out;
  for (const CaseFiles& f : files) {
    CaseOut c{f.stem, f.entry.dump(), file_out(f.inputs), {}, {}, {}};
    if (f.oracle) c.oracle = file_out(*f.oracle);
    if (f.backward_inputs) c.backward_inputs = file_out(*f.backward_inputs);
    if (f.backward_oracle) c.backward_oracle = file_out(*f.backward_oracle);
    out.push_back(std::move(c));
  }
  return out;
}

// Round-to-nearest-even into BF16/F16/F32 (io::from_f64, what `ttrcheck run` stores):
// `values` are float64 bytes.
nb::bytes round_to(const nb::bytes& values, const std::vector<std::int64_t>& shape, const std::string& dtype) {
  const auto d = io::parse_dtype(dtype);
  if (!d || !io::is_floating(*d)) throw InputError("round_to: dtype '" + dtype + "' is not F64, F32, BF16 or F16");
  std::vector<double> v(values.size() / sizeof(double));
  if (v.size() * sizeof(double) != values.size()) throw InputError("round_to: not float64 bytes");
  std::memcpy(v.data(), values.c_str(), values.size());
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  if (n != static_cast<std::int64_t>(v.size())) throw InputError("round_to: shape does not match the values");
  const io::RawTensor t = io::from_f64(v, shape, *d);
  return nb::bytes(reinterpret_cast<const char*>(t.data.data()), t.data.size());
}

}  // namespace
}  // namespace ttr::python

NB_MODULE(_core, m) {
  using namespace ttr::python;
  m.doc() = "ttrcheck's C++ core (use the ttrcheck package, not this module)";
  nb::exception<ttr::InputError>(m, "InputError", PyExc_ValueError);
  m.attr("__version__") = ttr::kToolVersion;
  m.def("layers_json", &layers_json);
  m.def("layer_json", [](const std::string& name) { return ttr::layer_json(ttr::find_layer(name)).dump(); });
  m.attr("default_samples") = ttr::ModelSpec{}.samples;
  m.def("suites", [] { return ttr::suite_names(); });
  m.def("oracle", &oracle);
  m.def("check", &check);
  m.def("explain_policy", &explain_policy);
  m.def("explain_order", [] { return ttr::explain_order(); });
  nb::class_<CaseOut>(m, "CaseOut")
      .def_ro("stem", &CaseOut::stem)
      .def_ro("entry", &CaseOut::entry)
      .def_ro("inputs", &CaseOut::inputs)
      .def_ro("oracle", &CaseOut::oracle)
      .def_ro("backward_inputs", &CaseOut::backward_inputs)
      .def_ro("backward_oracle", &CaseOut::backward_oracle);
  m.def("vectors", &vectors);
  m.def("round_to", &round_to);
}
