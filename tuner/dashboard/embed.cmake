# Writes OUT, a C++ file whose dashboard_assets() holds each file of INPUTS (a |-separated list)
# under its name, so that tunerd serves its page without files beside the binary.
string(REPLACE "|" ";" INPUTS "${INPUTS}")
set(body "")
foreach(input ${INPUTS})
  file(READ ${input} content)
  get_filename_component(name ${input} NAME)
  string(FIND "${content}" ")tfasset\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${input} contains the raw-string delimiter )tfasset\"")
  endif()
  string(APPEND body "      {\"${name}\", R\"tfasset(${content})tfasset\"},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from tuner/dashboard/ by embed.cmake; edit those files instead.
#include \"tuner/dashboard.h\"

namespace tunefarm {

const std::map<std::string, std::string>& dashboard_assets() {
  static const std::map<std::string, std::string> assets = {
${body}  };
  return assets;
}

}  // namespace tunefarm
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
