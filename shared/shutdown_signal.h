// SIGTERM and SIGINT as a readable eventfd: the I/O thread polls it next to its sockets. A handler
// rather than a blocked mask and a signalfd: libraries start threads of their own before main
// (OpenBLAS does), and a signal may be delivered to any of them.
#pragma once

namespace flashq {

// Installs the handlers (once per process) and returns the eventfd; kIo on failure.
int install_shutdown_signals();

}  // namespace flashq
