// The emitter of the libraries' C: the fixed sources made a library's, with its tables put in.
#include "compiler/c_source.h"

#include <gtest/gtest.h>

namespace tunefarm::c_source {
namespace {

TEST(CSource, TheLibraryNameAndTablesTakeTheirMarkersPlaces) {
  std::string out = instantiate("int libname_f(void) { return LIBNAME_OK; }\n/* {{TABLES}} */\nx = {{N}};\n", "net",
                                {{"TABLES", "static int t[] = {1};"}, {"N", "3"}});
  EXPECT_EQ(out, "int net_f(void) { return NET_OK; }\nstatic int t[] = {1};\nx = 3;\n");
}

TEST(CSource, TableTextIsNeverSearchedForMarkersOrTheName) {
  // A value name from a model file may hold anything, markers and "libname" included.
  std::string out = instantiate("{{A}}|{{B}}", "lib", {{"A", "{{B}} libname"}, {"B", "b"}});
  EXPECT_EQ(out, "{{B}} libname|b");
  EXPECT_EQ(instantiate("{{UNKNOWN}} libname", "m", {}), "{{UNKNOWN}} m");
}

TEST(CSource, EveryLibraryStartsItsEnumWithTheSharedErrorCodes) {
  std::string codes = error_codes("resnet");
  for (const char* code : {"RESNET_OK = 0,", "RESNET_ERROR_NULL_ARGUMENT = 1,", "RESNET_ERROR_OUT_OF_MEMORY = 2,",
                           "RESNET_ERROR_INVALID_ARGUMENT = 3,"})
    EXPECT_NE(codes.find(code), std::string::npos) << code;
  EXPECT_NE(instantiate("enum {\n/* {{ERROR_CODES}} */\n};", "resnet", {}).find(codes), std::string::npos);
}

TEST(CSource, StringLiteralsHoldAnyBytes) {
  EXPECT_EQ(string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(string_literal(std::string("\t\x01\xff", 3)), "\"\\011\\001\\377\"");
  // A newline ends the literal's line; the next line continues the same string.
  EXPECT_EQ(string_literal("x\ny"), "\"x\\n\"\n    \"y\"");
  EXPECT_EQ(upper("net_v2"), "NET_V2");
}

}  // namespace
}  // namespace tunefarm::c_source
