// No exception crosses an extern "C" function (DESIGN.md, "The contract with the
// caller"): every entry point runs its body through guard_c_boundary, which turns an
// exception into a status and a gk_last_error message, in one place.
#pragma once
#include <cstring>

#include "gemmkit.h"

namespace gk {

// The integer a caller stored in an enum field or argument. A C caller can pass any int;
// loading an out-of-range value as the C++ enum type would be undefined, so values that
// are not validated yet are read as their bytes.
template <typename E>
int raw_enum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The status for the exception being handled, its message set for gk_last_error:
// GK_ERR_OUT_OF_MEMORY for std::bad_alloc, GK_ERR_INTERNAL for anything else. Call it
// only from a catch block.
gk_status status_of_current_exception(const char* function) noexcept;

// body() (returning a gk_status), or the status of whatever it threw. `function` names the
// entry point in the message.
template <typename Body>
gk_status guard_c_boundary(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return status_of_current_exception(function);
  }
}

}  // namespace gk
