#pragma once

// Moved to <crema/core/queue_pair.hpp>. This path forwards to it for one release and then goes.
#include <crema/core/queue_pair.hpp>
