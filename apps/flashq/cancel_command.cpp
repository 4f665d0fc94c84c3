#include "apps/flashq/cancel_command.h"

#include <cstdio>
#include <memory>

#include "apps/flashq/broker_options.h"
#include "client/flashq_client.h"

namespace flashq {
namespace {

struct CancelOptions {
  std::string id;
  BrokerOptions broker;
};

int run_cancel(const CancelOptions& options) {
  Client client;
  connect_to_broker(client, options.broker);
  // An unknown id comes back as a not_found error (exit 2). A running job ends later, with a final
  // event saying cancelled; the state printed is the one right after the broker took the cancel.
  const protocol::StatusReply status = client.cancel(options.id, options.broker.timeout_ms);
  std::printf("cancel requested for job %s (state: %s)\n", options.id.c_str(),
              std::string(protocol::job_state_name(status.state)).c_str());
  return 0;
}

}  // namespace

std::function<int()> add_cancel_command(CLI::App& app) {
  auto options = std::make_shared<CancelOptions>();
  CLI::App* cmd = app.add_subcommand("cancel", "cancel a job");
  cmd->add_option("id", options->id, "job id")->required();
  add_broker_options(*cmd, options->broker);
  return [cmd, options] { return *cmd ? run_cancel(*options) : 0; };
}

}  // namespace flashq
