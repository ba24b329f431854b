// Writing the C of a library tunefarm builds (a kernel library, compiler/library.cc; a model,
// model/build.cc): the fixed C lives in real .c/.h files (compiler/library_c/, model/library_c/),
// embedded at build time as the kernel runtime is, and only the tables are generated, here.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tunefarm::c_source {

// The fixed C of a kernel library (compiler/library_c/kernels_api.c), embedded at build time.
extern const char kKernelsApi[];

// The upper-case form of a library's name, as its macros and error codes spell it.
std::string upper(std::string_view name);

// `text` as a C string literal, any bytes allowed: quotes and backslashes escaped, a newline ending
// the literal's source line (the next line continues it), other control and non-ASCII bytes as
// three-digit octal escapes.
std::string string_literal(std::string_view text);

// The error codes every library's enum starts with (compiler/library_c/error_codes.h), for
// library `name`; its own codes follow them.
std::string error_codes(const std::string& name);

// A generated part of a fixed source: the text that takes the place of its marker "{{slot}}" (or
// of "/* {{slot}} */").
struct Table {
  std::string slot;
  std::string text;
};

// The fixed source `fixed` made library `name`'s: "libname" becomes `name` and "LIBNAME"
// upper(name); the marker "{{ERROR_CODES}}" becomes error_codes(name); each table's marker becomes its text, which is taken as it
// is (names from a model file may hold anything).
std::string instantiate(std::string_view fixed, const std::string& name, const std::vector<Table>& tables);

}  // namespace tunefarm::c_source
