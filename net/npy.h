// NumPy .npy files of little-endian float32 in C order (format versions 1.0 to 3.0): what
// gk-infer reads as its input and writes as its output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gknet {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// false with a message when the file is missing, not .npy, not '<f4', Fortran-ordered,
// truncated or longer than its shape says.
bool read_npy(const std::string& path, NpyArray* array, std::string* error);
bool write_npy(const std::string& path, const NpyArray& array, std::string* error);

}  // namespace gknet
