// Defaults of the measurement options, in one place: the agent's measurement code applies them and
// the tracker derives lease deadlines from the same timeout. Header-only so that the tracker need
// not link the measurement library.
#pragma once

#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

inline constexpr int kDefaultRepeat = 3;
inline constexpr double kDefaultTimeoutS = 10.0;
inline constexpr double kDefaultRtol = 1e-4;
inline constexpr double kDefaultAtol = 1e-5;

// Proto3 cannot tell "unset" from zero, so zero means "the default" for repeat, timeout and the
// tolerances; number 0 with min_repeat_ms 0 means one run per repeat.
inline v1::MeasureOptions with_defaults(v1::MeasureOptions options) {
  if (options.repeat() <= 0) options.set_repeat(kDefaultRepeat);
  if (options.number() < 0) options.set_number(0);
  if (options.number() == 0 && options.min_repeat_ms() <= 0) options.set_number(1);
  if (options.min_repeat_ms() < 0) options.set_min_repeat_ms(0);
  if (!(options.timeout_s() > 0)) options.set_timeout_s(kDefaultTimeoutS);
  if (!(options.rtol() > 0)) options.set_rtol(kDefaultRtol);
  if (!(options.atol() > 0)) options.set_atol(kDefaultAtol);
  return options;
}

}  // namespace tunefarm
