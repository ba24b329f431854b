#include "history_test.h"

namespace tunefarm::testing {

std::vector<Backend> test_backends() { return {Backend::kSqlite}; }

}  // namespace tunefarm::testing
