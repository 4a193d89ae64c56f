#pragma once
// Writes ONNX models (ModelProto bytes) without protobuf in the interface: the tests build small
// models with it, and generators write example networks that `mf run model.onnx` reads.
//
// It writes what it is told, valid or not (a raw tensor whose bytes disagree with its dims, a node
// reading an undefined value), so tests can also hand the importer broken files.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/tensor.h"

namespace mf::onnx {

// The element types of TensorProto.DataType that the writer names directly.
enum class OnnxType : int32_t {
  kFloat = 1,
  kUint8 = 2,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11
};
OnnxType onnx_type_of(DType dtype);

// An attribute value: INT, FLOAT, STRING, INTS, FLOATS or TENSOR.
using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>, Tensor>;
struct NodeAttr {
  std::string name;
  AttrValue value;
};

// Builds one ModelProto: inputs, initializers, nodes (in the order added) and outputs.
// Names are ONNX value names; nothing is checked, so tests can write broken models on purpose.
class ModelWriter {
 public:
  explicit ModelWriter(int64_t opset = 17, std::string graph_name = "graph");
  ~ModelWriter();
  ModelWriter(const ModelWriter&) = delete;
  ModelWriter& operator=(const ModelWriter&) = delete;

  // dim_params[i], when given and non-empty, makes dimension i symbolic (a dynamic dimension);
  // "?" writes it with neither value nor name (an unnamed dynamic dimension).
  void add_input(const std::string& name, DType dtype, const Shape& shape,
                 const std::vector<std::string>& dim_params = {});
  void add_initializer(const std::string& name, const Tensor& value);
  // A tensor exactly as given: any type code, any dims, any bytes.
  void add_raw_initializer(const std::string& name, int32_t onnx_type,
                           const std::vector<int64_t>& dims, const std::string& raw_data);
  // A tensor stored as external data: its bytes in a file the entries name ("location", "offset",
  // "length"), written by the caller.
  void add_external_initializer(
      const std::string& name, int32_t onnx_type, const std::vector<int64_t>& dims,
      const std::vector<std::pair<std::string, std::string>>& external_data);
  void add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                const std::vector<std::string>& outputs, const std::vector<NodeAttr>& attrs = {},
                const std::string& name = "", const std::string& domain = "");
  void add_output(const std::string& name);

  std::string serialize() const;
  void save(const std::filesystem::path& file) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::onnx
