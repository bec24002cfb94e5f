#pragma once

/// @file
/// `CREMA_HOST_DEVICE`: a function compiled for the host and, under nvcc, for the device too, so
/// that the same code runs in a kernel and in a CPU test.

#if !defined(CREMA_HOST_DEVICE)
#if defined(__CUDACC__)
#define CREMA_HOST_DEVICE __host__ __device__
#else
#define CREMA_HOST_DEVICE
#endif
#endif
