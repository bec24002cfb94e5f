#pragma once

// Moved to <crema/core/record_shape.hpp>. This path forwards to it for one release and then goes.
#include <crema/core/record_shape.hpp>
