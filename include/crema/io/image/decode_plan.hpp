#pragma once

// Moved to <crema/io/decode_plan.hpp>. This path forwards to it for one release and then
// goes: include the new one.
#include <crema/io/decode_plan.hpp>
