// A whole worker on a ZeroMQ context: loads the model (and drafter), starts the engine thread and
// serves the broker on this thread until a shutdown on `shutdown_fd` has drained. flashq-worker
// runs it on its own context; `flashq up` runs it beside the broker on a shared one (inproc).
#pragma once

#include <zmq.hpp>

#include "worker/process/worker_options.h"

namespace flashq {

// Fills in the default id and model name; kInvalidArgument for a bad id, and every model
// loading error as is.
void serve_worker(zmq::context_t& context, WorkerOptions& options, int shutdown_fd);

}  // namespace flashq
