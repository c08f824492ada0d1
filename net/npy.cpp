// .npy: a magic string, a version, a header length, a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (N, C, H, W), } padded with spaces,
// then the raw data.
#include "net/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace gknet {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxElements = int64_t(1) << 34;

// The value after 'key': in the header dict, up to the next ',' outside parentheses.
bool dict_value(const std::string& header, const std::string& key, std::string* value) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return false;
  size_t p = header.find(':', k);
  if (p == std::string::npos) return false;
  ++p;
  int depth = 0;
  size_t end = p;
  for (; end < header.size(); ++end) {
    const char ch = header[end];
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if ((ch == ',' && depth == 0) || ch == '}') break;
  }
  *value = header.substr(p, end - p);
  value->erase(0, value->find_first_not_of(' '));
  value->erase(value->find_last_not_of(' ') + 1);
  return true;
}

bool parse_shape(std::string s, std::vector<int64_t>* shape) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return false;
  s = s.substr(1, s.size() - 2);
  std::istringstream in(s);
  std::string part;
  int64_t total = 1;
  while (std::getline(in, part, ',')) {
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (part.empty()) continue;  // the trailing comma of a 1-tuple
    if (part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12) return false;
    const int64_t d = std::stoll(part);
    if (d < 1 || d > kMaxElements || total > kMaxElements / d) return false;
    total *= d;
    shape->push_back(d);
  }
  return !shape->empty();
}

}  // namespace

bool read_npy(const std::string& path, NpyArray* array, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = path + ": cannot open", false;
  char head[10];
  if (!in.read(head, 10) || std::memcmp(head, kMagic, 6) != 0)
    return *error = path + ": not a .npy file", false;
  const int major = (unsigned char)head[6];
  uint32_t header_len = (unsigned char)head[8] | (unsigned char)head[9] << 8;
  if (major >= 2) {  // versions 2 and 3: a 4-byte header length
    char more[2];
    if (!in.read(more, 2)) return *error = path + ": truncated header", false;
    header_len |= uint32_t((unsigned char)more[0]) << 16 | uint32_t((unsigned char)more[1]) << 24;
  } else if (major != 1) {
    return *error = path + ": unknown .npy version " + std::to_string(major), false;
  }
  if (header_len > (1u << 20)) return *error = path + ": header too long", false;
  std::string header(header_len, '\0');
  if (!in.read(&header[0], header_len)) return *error = path + ": truncated header", false;
  std::string descr, fortran, shape_text;
  if (!dict_value(header, "descr", &descr) || !dict_value(header, "fortran_order", &fortran) ||
      !dict_value(header, "shape", &shape_text))
    return *error = path + ": malformed header", false;
  if (descr != "'<f4'") return *error = path + ": dtype " + descr + ", expected float32 ('<f4')", false;
  if (fortran != "False") return *error = path + ": Fortran order is not supported", false;
  NpyArray a;
  if (!parse_shape(shape_text, &a.shape)) return *error = path + ": bad shape " + shape_text, false;
  int64_t count = 1;
  for (int64_t d : a.shape) count *= d;
  a.data.resize(size_t(count));
  if (!in.read(reinterpret_cast<char*>(a.data.data()), count * 4))
    return *error = path + ": truncated data (shape " + shape_text + ")", false;
  if (in.peek() != std::char_traits<char>::eof()) return *error = path + ": data longer than its shape", false;
  *array = std::move(a);
  return true;
}

bool write_npy(const std::string& path, const NpyArray& array, std::string* error) {
  std::string shape = "(";
  for (int64_t d : array.shape) shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  else shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version and length take 10 bytes; the header ends with '\n' on a 64-byte boundary.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  const char version[2] = {1, 0};
  const char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
  out.write(kMagic, 6).write(version, 2).write(len, 2).write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(array.data.data()), std::streamsize(array.data.size() * 4));
  out.close();
  if (!out) return *error = path + ": cannot write", false;
  return true;
}

}  // namespace gknet
