#pragma once

// Moved to <crema/io/caffe/caffe_normalization.hpp>. This path forwards to it for one release and
// then goes: include the new one.
#include <crema/io/caffe/caffe_normalization.hpp>
