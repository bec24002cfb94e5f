#pragma once

// Moved to <crema/core/batch_label.hpp>. This path forwards to it for one release and then goes.
#include <crema/core/batch_label.hpp>
