#pragma once

#include <crema/collective/ps/mpi/client.hpp>
#include <crema/collective/ps/mpi/server.hpp>

/// @file
/// An asynchronous parameter server over MPI, in the manner of caffe-parallel: the server
/// (`parameter_server`, server.hpp) on one rank, a client (`ps_client`, client.hpp) on each
/// other, their options and update policies (options.hpp, update_policy.hpp), how diffs travel
/// (compression.hpp) and the messages they exchange (wire.hpp). Component `crema::mpi`.
