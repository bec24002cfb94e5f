#pragma once

// Moved to <crema/core/slot_pool.hpp>. This path forwards to it for one release and then goes.
#include <crema/core/slot_pool.hpp>
