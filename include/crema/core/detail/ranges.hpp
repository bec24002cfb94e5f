#pragma once

// The ranges' concepts (`std::ranges::range`, `borrowed_range`), for crema's headers. libstdc++'s
// <ranges> also defines every view and adaptor, which a file including crema's pipeline would
// parse for nothing; its <bits/ranges_base.h> holds the concepts alone. Other standard libraries
// get <ranges>.
#include <version>

#if defined(__GLIBCXX__) && __has_include(<bits/ranges_base.h>)
#include <compare>  // what <ranges> includes before it, and it needs
#include <initializer_list>
#include <iterator>

#include <bits/ranges_base.h>
#else
#include <ranges>
#endif
