#pragma once

// <chrono>'s clocks and durations, for crema's headers. Under C++20, libstdc++'s <chrono> also
// brings the clocks' stream output and with it <sstream> and the locale facets, a fair part of
// what a file that includes crema's pipeline parses (docs/building.md); its <bits/chrono.h>
// holds the clocks, durations and time points alone, which are all crema's headers use. Other
// standard libraries get <chrono>.
#include <version>

#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#else
#include <chrono>
#endif
